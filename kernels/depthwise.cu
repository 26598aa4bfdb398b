#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/check.h"
#include "kernels/activation.cuh"
#include "kernels/convert.cuh"
#include "kernels/depthwise.h"

namespace cnnbench {

namespace {

constexpr int kThreads = 256;           // per block, at most
constexpr int kMaxTx = 32;              // channel groups per block, at most
constexpr int64_t kWantBlocks = 264;    // two per SM of an H100 / H200
constexpr size_t kMaxSmem = 48 * 1024;  // the tile's weights stay within the default limit

struct DwArgs {
  int H, W, C, Ho, Wo;
  int K, stride, pad_h, pad_w;
  int groups;                // channel groups of V channels
  int64_t strips_w, strips;  // strips per output row; in all
  Act act;
};

// V values of T at p as float, and back: 16-byte accesses where V is 16 bytes' worth. Host and
// device, like everything a thread of the kernels runs (depthwise_emulate runs it on the host).
// A 16-byte access is one vector load or store on the device (p 16-byte aligned) and a memcpy on
// the host; the packed halves are unpacked by memcpy (registers on the device), never through a
// cast pointer, which the host compiler's aliasing rules would not allow.
#define CNN_HD __host__ __device__ __forceinline__
template <typename V16>
CNN_HD V16 load16(const void* p) {
#ifdef __CUDA_ARCH__
  return *reinterpret_cast<const V16*>(p);
#else
  V16 v;
  std::memcpy(&v, p, sizeof v);
  return v;
#endif
}
template <typename V16>
CNN_HD void store16(void* p, const V16& v) {
#ifdef __CUDA_ARCH__
  *reinterpret_cast<V16*>(p) = v;
#else
  std::memcpy(p, &v, sizeof v);
#endif
}

template <typename T, int V>
struct Vec;
template <typename T>
struct Vec<T, 1> {
  static CNN_HD void load(const T* p, float* v) { v[0] = load_f(p, 0); }
  static CNN_HD void store(T* p, const float* v) { store_f(p, 0, v[0]); }
};
template <>
struct Vec<float, 4> {
  static CNN_HD void load(const float* p, float* v) {
    const float4 q = load16<float4>(p);
    v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
  }
  static CNN_HD void store(float* p, const float* v) {
    store16(p, make_float4(v[0], v[1], v[2], v[3]));
  }
};
template <>
struct Vec<__half, 8> {
  static CNN_HD void load(const __half* p, float* v) {
    const uint4 q = load16<uint4>(p);
    __half2 h[4];
    memcpy(h, &q, sizeof q);
    for (int k = 0; k < 4; ++k) {
      const float2 f = __half22float2(h[k]);
      v[2 * k] = f.x, v[2 * k + 1] = f.y;
    }
  }
  static CNN_HD void store(__half* p, const float* v) {
    __half2 h[4];
    for (int k = 0; k < 4; ++k) h[k] = __floats2half2_rn(v[2 * k], v[2 * k + 1]);
    uint4 q;
    memcpy(&q, h, sizeof q);
    store16(p, q);
  }
};
template <>
struct Vec<__nv_bfloat16, 8> {
  static CNN_HD void load(const __nv_bfloat16* p, float* v) {
    const uint4 q = load16<uint4>(p);
    __nv_bfloat162 h[4];
    memcpy(h, &q, sizeof q);
    for (int k = 0; k < 4; ++k) {
      const float2 f = __bfloat1622float2(h[k]);
      v[2 * k] = f.x, v[2 * k + 1] = f.y;
    }
  }
  static CNN_HD void store(__nv_bfloat16* p, const float* v) {
    __nv_bfloat162 h[4];
    for (int k = 0; k < 4; ++k) h[k] = __floats2bfloat162_rn(v[2 * k], v[2 * k + 1]);
    uint4 q;
    memcpy(&q, h, sizeof q);
    store16(p, q);
  }
};

// The weights of one tap for a block's channel tile sit in shared memory so that each thread's V
// floats are read as V / 4 float4s and a warp's float4s are consecutive (no bank conflicts):
// channel cl of the tile (thread cl / V, its value cl % V) at float
//   ((cl % V) / 4) * (tx * 4) + (cl / V) * 4 + cl % 4   for V a multiple of 4,   cl   for V = 1.
template <int V>
CNN_HD int smem_slot(int cl, int tx) {
  if constexpr (V % 4 == 0)
    return ((cl % V) / 4) * (tx * 4) + (cl / V) * 4 + cl % 4;
  else
    return cl;
}

// Thread `lane`'s V weights of one tap; `tap` points at the tap's tx * V floats.
template <int V>
CNN_HD void load_tap(const float* tap, int lane, int tx, float* v) {
  if constexpr (V % 4 == 0) {
    for (int k = 0; k < V / 4; ++k) {
      const float4 q = load16<float4>(tap + k * tx * 4 + lane * 4);
      v[4 * k] = q.x, v[4 * k + 1] = q.y, v[4 * k + 2] = q.z, v[4 * k + 3] = q.w;
    }
  } else {
    for (int k = 0; k < V; ++k) v[k] = tap[lane * V + k];
  }
}

// A thread's coordinates: threadIdx, blockIdx and blockDim (x: channel groups, y: strips).
struct Thread {
  int x, y, bx, by, bdx, bdy;
};
__device__ __forceinline__ Thread this_thread() {
  return {int(threadIdx.x), int(threadIdx.y), int(blockIdx.x),
          int(blockIdx.y),  int(blockDim.x),  int(blockDim.y)};
}

// Thread t's share of staging the block's channel tile [cbase, cbase + tx * V) of w ([C][taps],
// contiguous per channel) into ws as float [taps][tx * V], each tap's floats in smem_slot order;
// channels past C are zero. The block's global reads are consecutive.
template <typename T, int V>
CNN_HD void stage_weights(const T* __restrict__ w, float* ws, int C, int taps, const Thread& t) {
  const int ct = t.bdx * V, cbase = t.by * ct;
  const int tid = t.y * t.bdx + t.x, nt = t.bdx * t.bdy;
  const int total = ct * taps;
  const T* src = w + int64_t(cbase) * taps;
  for (int j = tid; j < total; j += nt) {
    const int cl = j / taps, tap = j - cl * taps;
    ws[tap * ct + smem_slot<V>(cl, t.bdx)] = cbase + cl < C ? load_f(src, j) : 0.0f;
  }
}

// Where a thread's strip is: false for the threads past the last channel group or strip.
struct Strip {
  int c0, n, oh, ow0;
  int64_t row;  // n * Ho + oh
};
CNN_HD bool locate(const DwArgs& a, const Thread& t, int V, int px, Strip* s) {
  const int g = t.by * t.bdx + t.x;
  const int64_t strip = int64_t(t.bx) * t.bdy + t.y;
  if (g >= a.groups || strip >= a.strips) return false;
  s->c0 = g * V;
  s->row = strip / a.strips_w;
  s->ow0 = int(strip - s->row * a.strips_w) * px;
  s->oh = int(s->row % a.Ho);
  s->n = int(s->row / a.Ho);
  return true;
}

// The unrolled kernel's thread, after the block staged its weights in ws: K x K taps, stride ST,
// PX output pixels along W, V channels. It walks the (PX - 1) * ST + K input columns of its
// window once per kernel row and adds each into every output of the strip that it touches; a
// column or row outside the image is the zero padding.
template <typename T, int V, int K, int ST, int PX>
CNN_HD void dw_fast_thread(const T* __restrict__ x, const T* __restrict__ bias, T* __restrict__ y,
                           const DwArgs& a, const float* ws, const Thread& t) {
  Strip p;
  if (!locate(a, t, V, PX, &p)) return;
  const int ct = t.bdx * V;
  const int ih0 = p.oh * ST - a.pad_h, iw0 = p.ow0 * ST - a.pad_w;
  float acc[PX][V];
#pragma unroll
  for (int q = 0; q < PX; ++q)
#pragma unroll
    for (int v = 0; v < V; ++v) acc[q][v] = 0.0f;
  constexpr int kCols = (PX - 1) * ST + K;
#pragma unroll
  for (int r = 0; r < K; ++r) {
    const int ih = ih0 + r;
    if (ih < 0 || ih >= a.H) continue;
    float wr[K][V];
#pragma unroll
    for (int s = 0; s < K; ++s) load_tap<V>(ws + (r * K + s) * ct, t.x, t.bdx, wr[s]);
    const T* xr = x + (int64_t(p.n) * a.H + ih) * a.W * a.C + p.c0;
#pragma unroll
    for (int j = 0; j < kCols; ++j) {
      const int iw = iw0 + j;
      float xv[V];
      if (iw >= 0 && iw < a.W) {
        Vec<T, V>::load(xr + int64_t(iw) * a.C, xv);
      } else {
#pragma unroll
        for (int v = 0; v < V; ++v) xv[v] = 0.0f;
      }
#pragma unroll
      for (int q = 0; q < PX; ++q) {
        const int s = j - q * ST;  // a constant once unrolled
        if (s >= 0 && s < K) {
#pragma unroll
          for (int v = 0; v < V; ++v) acc[q][v] = fmaf(xv[v], wr[s][v], acc[q][v]);
        }
      }
    }
  }
  float b[V];
#pragma unroll
  for (int v = 0; v < V; ++v) b[v] = bias ? load_f(bias, p.c0 + v) : 0.0f;
  T* yr = y + (p.row * a.Wo + p.ow0) * a.C + p.c0;
#pragma unroll
  for (int q = 0; q < PX; ++q) {
    if (p.ow0 + q < a.Wo) {
      float o[V];
#pragma unroll
      for (int v = 0; v < V; ++v) o[v] = activate(a.act, acc[q][v] + b[v]);
      Vec<T, V>::store(yr + int64_t(q) * a.C, o);
    }
  }
}

// The generic kernel's thread: any kernel size and stride, one output pixel (strips of one),
// loops at run time. For kernels other than 3 and 5, and for V = 1 (channels that do not split
// into 16-byte vectors, or pointers that are not 16-byte aligned).
template <typename T, int V>
CNN_HD void dw_generic_thread(const T* __restrict__ x, const T* __restrict__ bias,
                              T* __restrict__ y, const DwArgs& a, const float* ws,
                              const Thread& t) {
  Strip p;
  if (!locate(a, t, V, 1, &p)) return;
  const int K = a.K, ct = t.bdx * V;
  const int ih0 = p.oh * a.stride - a.pad_h, iw0 = p.ow0 * a.stride - a.pad_w;
  float acc[V];
#pragma unroll
  for (int v = 0; v < V; ++v) acc[v] = 0.0f;
  for (int r = 0; r < K; ++r) {
    const int ih = ih0 + r;
    if (ih < 0 || ih >= a.H) continue;
    const T* xr = x + (int64_t(p.n) * a.H + ih) * a.W * a.C + p.c0;
    for (int s = 0; s < K; ++s) {
      const int iw = iw0 + s;
      if (iw < 0 || iw >= a.W) continue;
      float xv[V], wv[V];
      Vec<T, V>::load(xr + int64_t(iw) * a.C, xv);
      load_tap<V>(ws + (r * K + s) * ct, t.x, t.bdx, wv);
#pragma unroll
      for (int v = 0; v < V; ++v) acc[v] = fmaf(xv[v], wv[v], acc[v]);
    }
  }
  float o[V];
#pragma unroll
  for (int v = 0; v < V; ++v)
    o[v] = activate(a.act, acc[v] + (bias ? load_f(bias, p.c0 + v) : 0.0f));
  Vec<T, V>::store(y + (p.row * a.Wo + p.ow0) * a.C + p.c0, o);
}

// The kernels: grid (strip blocks, channel tiles), block (tx channel groups, ty strips), the
// tile's weights in dynamic shared memory (float4: 16-byte aligned).
template <typename T, int V, int K, int ST, int PX>
__global__ void __launch_bounds__(kThreads)
    dw_fast(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias,
            T* __restrict__ y, DwArgs a) {
  extern __shared__ float4 smem4[];
  float* ws = reinterpret_cast<float*>(smem4);
  const Thread t = this_thread();
  stage_weights<T, V>(w, ws, a.C, K * K, t);
  __syncthreads();
  dw_fast_thread<T, V, K, ST, PX>(x, bias, y, a, ws, t);
}

template <typename T, int V>
__global__ void __launch_bounds__(kThreads)
    dw_generic(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias,
               T* __restrict__ y, DwArgs a) {
  extern __shared__ float4 smem4[];
  float* ws = reinterpret_cast<float*>(smem4);
  const Thread t = this_thread();
  stage_weights<T, V>(w, ws, a.C, a.K * a.K, t);
  __syncthreads();
  dw_generic_thread<T, V>(x, bias, y, a, ws, t);
}

// The kernel a geometry takes, run by `run`: run.template fast<K, ST, PX>() for the unrolled
// kernel, run.generic() otherwise. Run::kV is the vector width it was built for.
template <int K, int ST, typename Run>
void by_px(int px, const Run& run) {
  if (px == 4)
    run.template fast<K, ST, 4>();
  else if (px == 2)
    run.template fast<K, ST, 2>();
  else
    run.template fast<K, ST, 1>();
}
template <typename Run>
void dispatch(const DepthwiseGeometry& g, const DepthwiseSpec& s, const Run& run) {
  if constexpr (Run::kV > 1) {
    if (g.fast) {
      if (s.kernel == 3 && s.stride == 1)
        by_px<3, 1>(g.px, run);
      else if (s.kernel == 3)
        by_px<3, 2>(g.px, run);
      else if (s.stride == 1)
        by_px<5, 1>(g.px, run);
      else
        by_px<5, 2>(g.px, run);
      return;
    }
  }
  run.generic();
}

// On the device: one launch.
template <typename T, int V>
struct DeviceRun {
  static constexpr int kV = V;
  const DepthwiseGeometry& g;
  const DwArgs& a;
  const T *x, *w, *bias;
  T* y;
  cudaStream_t stream;
  dim3 grid() const { return dim3(unsigned(g.grid_x), unsigned(g.grid_y)); }
  dim3 block() const { return dim3(unsigned(g.tx), unsigned(g.ty)); }
  template <int K, int ST, int PX>
  void fast() const {
    dw_fast<T, V, K, ST, PX><<<grid(), block(), g.smem, stream>>>(x, w, bias, y, a);
  }
  void generic() const { dw_generic<T, V><<<grid(), block(), g.smem, stream>>>(x, w, bias, y, a); }
};

// On the host: the same thread code, block by block, every thread's share of the staging before
// any thread computes (the barrier).
template <typename T, int V>
struct HostRun {
  static constexpr int kV = V;
  const DepthwiseGeometry& g;
  const DwArgs& a;
  const T *x, *w, *bias;
  T* y;
  template <typename Body>
  void blocks(int taps, const Body& body) const {
    std::vector<float4> smem(g.smem / sizeof(float4) + 1);
    float* ws = reinterpret_cast<float*>(smem.data());
    for (int by = 0; by < g.grid_y; ++by)
      for (int64_t bx = 0; bx < g.grid_x; ++bx) {
        std::fill(smem.begin(), smem.end(), make_float4(NAN, NAN, NAN, NAN));
        for (int pass = 0; pass < 2; ++pass)
          for (int ty = 0; ty < g.ty; ++ty)
            for (int tx = 0; tx < g.tx; ++tx) {
              const Thread t{tx, ty, int(bx), by, g.tx, g.ty};
              if (pass == 0)
                stage_weights<T, V>(w, ws, a.C, taps, t);
              else
                body(ws, t);
            }
      }
  }
  template <int K, int ST, int PX>
  void fast() const {
    blocks(K * K, [&](const float* ws, const Thread& t) {
      dw_fast_thread<T, V, K, ST, PX>(x, bias, y, a, ws, t);
    });
  }
  void generic() const {
    blocks(a.K * a.K, [&](const float* ws, const Thread& t) {
      dw_generic_thread<T, V>(x, bias, y, a, ws, t);
    });
  }
};

bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// The output size of one dimension, or a negative number where the window does not fit.
int64_t out_size(int in, int k, int stride, int pad) {
  const int64_t span = int64_t(in) + 2 * int64_t(pad) - k;
  return span < 0 ? -1 : span / stride + 1;
}

void check_spec(const DepthwiseSpec& s) {
  auto bad = [&](const std::string& why) {
    throw std::invalid_argument("depthwise: " + s.x.str() + " -> " + s.y.str() + " k" +
                                std::to_string(s.kernel) + " s" + std::to_string(s.stride) + " p" +
                                std::to_string(s.pad) + "x" + std::to_string(s.pw()) + ": " + why);
  };
  if (s.kernel < 1 || s.stride < 1 || s.pad < 0 || s.pw() < 0)
    bad("kernel and stride must be positive, pads not negative");
  if (s.x.n < 0 || s.x.c < 1 || s.x.h < 1 || s.x.w < 1) bad("bad input dims");
  if (s.y.n != s.x.n || s.y.c != s.x.c) bad("output batch and channels must be the input's");
  if (s.y.h != out_size(s.x.h, s.kernel, s.stride, s.pad) ||
      s.y.w != out_size(s.x.w, s.kernel, s.stride, s.pw()))
    bad("output size is not the one kernel, stride and pads give");
}

}  // namespace

DepthwiseGeometry depthwise_geometry(DType t, const DepthwiseSpec& s, bool aligned, int px) {
  check_spec(s);
  DepthwiseGeometry g;
  const int C = s.x.c, K = s.kernel;
  const int vw = int(16 / dtype_size(t));
  g.vec = aligned && C % vw == 0 ? vw : 1;
  g.fast = g.vec > 1 && (K == 3 || K == 5) && (s.stride == 1 || s.stride == 2);
  g.groups = C / g.vec;
  const size_t per_group = size_t(K) * K * g.vec * sizeof(float);
  const int max_tx = int(std::min<size_t>(kMaxTx, kMaxSmem / per_group));
  if (max_tx < 1)
    throw std::invalid_argument("depthwise: kernel " + std::to_string(K) +
                                " too large for the weights' shared memory");
  if (g.groups <= max_tx) {
    g.tx = g.groups;
  } else {
    // The widest tile in [max_tx / 2, max_tx] that wastes the fewest threads on the last tile.
    int64_t best_waste = INT64_MAX;
    for (int tx = max_tx; tx >= std::max(1, max_tx / 2); --tx) {
      const int64_t waste = ceil_div(g.groups, tx) * tx - g.groups;
      if (waste < best_waste) best_waste = waste, g.tx = tx;
    }
  }
  g.ty = std::max(1, kThreads / g.tx);
  const int64_t tiles = ceil_div(g.groups, g.tx);
  if (tiles > 65535) throw std::invalid_argument("depthwise: too many channels for one grid");
  g.grid_y = int(tiles);
  g.smem = size_t(K) * K * g.tx * g.vec * sizeof(float);
  const std::vector<int> choices = g.fast ? std::vector<int>{4, 2, 1} : std::vector<int>{1};
  auto cover = [&](int p) {
    g.px = p;
    g.strips_w = ceil_div(s.y.w, p);
    g.strips = int64_t(s.y.n) * s.y.h * g.strips_w;
    g.grid_x = ceil_div(g.strips, g.ty);
  };
  if (px != 0) {
    if (std::find(choices.begin(), choices.end(), px) == choices.end())
      throw std::invalid_argument("depthwise: " + std::to_string(px) +
                                  " output pixels per thread is not a choice of this layer");
    cover(px);
  } else {
    // The widest strips that still fill the device; the narrowest (1) where none does.
    for (int p : choices) {
      cover(p);
      if (g.blocks() >= kWantBlocks) break;
    }
  }
  if (g.grid_x > INT_MAX) throw std::invalid_argument("depthwise: output too large for one grid");
  return g;
}

std::vector<int> depthwise_px_choices(DType t, const DepthwiseSpec& s, bool aligned) {
  return depthwise_geometry(t, s, aligned).fast ? std::vector<int>{4, 2, 1} : std::vector<int>{1};
}

namespace {

DwArgs args_of(const DepthwiseSpec& s, const DepthwiseGeometry& g) {
  DwArgs a;
  a.H = s.x.h, a.W = s.x.w, a.C = s.x.c, a.Ho = s.y.h, a.Wo = s.y.w;
  a.K = s.kernel, a.stride = s.stride, a.pad_h = s.pad, a.pad_w = s.pw();
  a.groups = g.groups;
  a.strips_w = g.strips_w, a.strips = g.strips;
  a.act = s.act;
  return a;
}

}  // namespace

void launch_depthwise(DType t, const void* x, const void* w, const void* bias, void* y,
                      const DepthwiseSpec& s, int px, cudaStream_t stream) {
  const DepthwiseGeometry g = depthwise_geometry(t, s, aligned16(x) && aligned16(y), px);
  if (g.strips == 0) return;  // an empty batch
  const DwArgs a = args_of(s, g);
  CNN_DISPATCH_DTYPE(t, {
    constexpr int kVec = int(16 / sizeof(T));
    const T* xt = static_cast<const T*>(x);
    const T* wt = static_cast<const T*>(w);
    const T* bt = static_cast<const T*>(bias);
    T* yt = static_cast<T*>(y);
    if (g.vec == kVec)
      dispatch(g, s, DeviceRun<T, kVec>{g, a, xt, wt, bt, yt, stream});
    else
      dispatch(g, s, DeviceRun<T, 1>{g, a, xt, wt, bt, yt, stream});
  });
  CNN_CHECK_LAUNCH();
}

void depthwise_emulate(DType t, const void* x, const void* w, const void* bias, void* y,
                       const DepthwiseSpec& s, int px, bool aligned) {
  if (aligned && !(aligned16(x) && aligned16(y)))
    throw std::invalid_argument("depthwise_emulate: the buffers are not 16-byte aligned");
  const DepthwiseGeometry g = depthwise_geometry(t, s, aligned, px);
  if (g.strips == 0) return;
  const DwArgs a = args_of(s, g);
  CNN_DISPATCH_DTYPE(t, {
    constexpr int kVec = int(16 / sizeof(T));
    const T* xt = static_cast<const T*>(x);
    const T* wt = static_cast<const T*>(w);
    const T* bt = static_cast<const T*>(bias);
    T* yt = static_cast<T*>(y);
    if (g.vec == kVec)
      dispatch(g, s, HostRun<T, kVec>{g, a, xt, wt, bt, yt});
    else
      dispatch(g, s, HostRun<T, 1>{g, a, xt, wt, bt, yt});
  });
}

std::vector<double> depthwise_reference(const std::vector<float>& x, const std::vector<float>& w,
                                        const std::vector<float>& bias, const DepthwiseSpec& s) {
  check_spec(s);
  const Dims X = s.x, Y = s.y;
  const int C = X.c, K = s.kernel;
  if (x.size() != size_t(X.numel()) || w.size() != size_t(C) * K * K ||
      (!bias.empty() && bias.size() != size_t(C)))
    throw std::invalid_argument("depthwise_reference: tensor sizes do not match the spec");
  std::vector<double> y(size_t(Y.numel()));
  for (int n = 0; n < Y.n; ++n)
    for (int oh = 0; oh < Y.h; ++oh)
      for (int ow = 0; ow < Y.w; ++ow)
        for (int c = 0; c < C; ++c) {
          double acc = bias.empty() ? 0.0 : double(bias[c]);
          for (int r = 0; r < K; ++r) {
            const int ih = oh * s.stride - s.pad + r;
            if (ih < 0 || ih >= X.h) continue;
            for (int q = 0; q < K; ++q) {
              const int iw = ow * s.stride - s.pw() + q;
              if (iw < 0 || iw >= X.w) continue;
              acc += double(x[((size_t(n) * X.h + ih) * X.w + iw) * C + c]) *
                     double(w[(size_t(c) * K + r) * K + q]);
            }
          }
          y[((size_t(n) * Y.h + oh) * Y.w + ow) * C + c] = act_ref(s.act, acc);
        }
  return y;
}

}  // namespace cnnbench

#undef CNN_HD
