#include <cfloat>
#include <climits>
#include <cstdint>

#include "harness/check.h"
#include "kernels/channel_kernels.cuh"
#include "kernels/convert.cuh"
#include "kernels/pool.h"

namespace cnnbench {

namespace {

// Where output element i (NHWC) sits: its image, row, column, channel, and row index.
struct OutPos {
  int n, h, w, c;
  int64_t row;
};
__device__ __forceinline__ OutPos out_pos(int64_t i, const Dims& out) {
  OutPos p;
  p.c = int(i % out.c);
  p.row = i / out.c;
  p.w = int(p.row % out.w);
  const int64_t r = p.row / out.w;
  p.h = int(r % out.h);
  p.n = int(r / out.h);
  return p;
}

// The divisor of an average pool's window starting at (h0, w0): PyTorch counts padded positions
// inside the padded image, never past its far edge (count_include_pad), or the valid ones only.
__device__ __forceinline__ float avg_divisor(int h0, int w0, int k, int p, const Dims& in,
                                             bool count_include_pad, int count) {
  if (!count_include_pad) return float(max(count, 1));
  const int hend = min(h0 + k, in.h + p), wend = min(w0 + k, in.w + p);
  return float((hend - h0) * (wend - w0));
}

// One thread per output element; consecutive threads take consecutive channels (coalesced).
// Rows of x and y are ld_x / ld_y elements apart (a slice of a concat buffer when wider than C).
template <typename T, bool kMax>
__global__ void pool_kernel(const T* x, T* y, Dims in, Dims out, int k, int s, int p,
                            bool count_include_pad, int ld_x, int ld_y) {
  const int64_t total = int64_t(out.n) * out.c * out.h * out.w;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const OutPos o = out_pos(i, out);
    const int c = o.c, ow = o.w, oh = o.h, n = o.n;
    const int64_t row = o.row;
    const int h0 = oh * s - p, w0 = ow * s - p;
    float acc = kMax ? -FLT_MAX : 0.0f;
    int count = 0;
    for (int dh = 0; dh < k; ++dh) {
      const int h = h0 + dh;
      if (h < 0 || h >= in.h) continue;
      for (int dw = 0; dw < k; ++dw) {
        const int w = w0 + dw;
        if (w < 0 || w >= in.w) continue;
        const float v = load_f(x, ((int64_t(n) * in.h + h) * in.w + w) * ld_x + c);
        acc = kMax ? fmaxf(acc, v) : acc + v;
        ++count;
      }
    }
    if (!kMax) acc /= avg_divisor(h0, w0, k, p, in, count_include_pad, count);
    store_f(y, row * ld_y + c, acc);
  }
}

// Max or average pooling, vectorised (the 16-byte pack dividing C and both row strides): a thread
// owns one pack of V channels of one output pixel; rows of x and y are lx / ly packs apart (a
// slice of a concat buffer where wider than C). Index type I: 32-bit where the pack count fits (the
// index arithmetic is most of an average pool's work; 64-bit division costs several times more).
template <typename T, int V, bool kMax, typename I>
__global__ void __launch_bounds__(256) pool_vec(const T* x, T* y, Dims in, Dims out, int k, int s,
                                                int p, bool count_include_pad, int lx, int ly) {
  const int packs = in.c / V;
  const I total = I(out.n) * out.h * out.w * packs;
  const I stride = I(gridDim.x) * blockDim.x;
  for (I i = I(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const int pk = int(i % packs);
    const I pix = i / packs;
    const int ow = int(pix % out.w);
    const I nh = pix / out.w;
    const int oh = int(nh % out.h), n = int(nh / out.h);
    const int h0 = oh * s - p, w0 = ow * s - p;
    float acc[V];
#pragma unroll
    for (int c = 0; c < V; ++c) acc[c] = kMax ? -FLT_MAX : 0.0f;
    int count = 0;
    for (int dh = 0; dh < k; ++dh) {
      const int h = h0 + dh;
      if (h < 0 || h >= in.h) continue;
      for (int dw = 0; dw < k; ++dw) {
        const int w = w0 + dw;
        if (w < 0 || w >= in.w) continue;
        float v[V];
        ck::load_pack<T, V>(x, int64_t((I(n) * in.h + h) * in.w + w) * lx + pk, v);
#pragma unroll
        for (int c = 0; c < V; ++c) acc[c] = kMax ? fmaxf(acc[c], v[c]) : acc[c] + v[c];
        ++count;
      }
    }
    if (!kMax) {
      const float d = avg_divisor(h0, w0, k, p, in, count_include_pad, count);
#pragma unroll
      for (int c = 0; c < V; ++c) acc[c] /= d;
    }
    ck::store_pack<T, V>(y, int64_t(pix) * ly + pk, acc);
  }
}

// Global average pooling, vectorised: grid (column tiles, images), a block of vx packs by vy lanes
// (ck::vec_geom); each lane sums its rows, the lanes add pairwise in a fixed order
// (ck::merge_lane_sums). The grid is small (tiles x images: 256 blocks for EfficientNet's
// squeeze-excitations at batch 256), so a lane loads kRowBatch of its rows before adding them, in
// the same order as one at a time: the same sums, several loads in flight instead of one.
constexpr int kRowBatch = 4;
template <typename T, int V>
__global__ void __launch_bounds__(ck::kThreads)
    global_avgpool_vec(const T* x, T* y, int C, int hw, int vx, int vy) {
  __shared__ float sh[V * ck::kThreads];
  const int col = threadIdx.x % vx, lane = threadIdx.x / vx;
  const int pack = blockIdx.x * vx + col, n = blockIdx.y;
  const bool active = pack * V < C;
  const int packs = C / V;
  float acc[1][V];
#pragma unroll
  for (int c = 0; c < V; ++c) acc[0][c] = 0.0f;
  if (active)
    for (int r0 = lane; r0 < hw; r0 += kRowBatch * vy) {
      float v[kRowBatch][V];
#pragma unroll
      for (int u = 0; u < kRowBatch; ++u)
        if (r0 + u * vy < hw)
          ck::load_pack<T, V>(x, (int64_t(n) * hw + r0 + u * vy) * packs + pack, v[u]);
#pragma unroll
      for (int u = 0; u < kRowBatch; ++u)
        if (r0 + u * vy < hw)
#pragma unroll
          for (int c = 0; c < V; ++c) acc[0][c] += v[u][c];
    }
  ck::merge_lane_sums<1, V>(acc, sh, lane, vx, vy);
  if (lane != 0 || !active) return;
  const float inv = 1.0f / float(hw);
#pragma unroll
  for (int c = 0; c < V; ++c) acc[0][c] *= inv;
  ck::store_pack<T, V>(y, int64_t(n) * packs + pack, acc[0]);
}

template <typename T>
__global__ void global_avgpool_kernel(const T* x, T* y, int n, int c, int hw, int ld_x, int ld_y) {
  const int64_t total = int64_t(n) * c;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const int64_t img = i / c, ch = i % c;
    const T* base = x + img * hw * ld_x + ch;
    float acc = 0.0f;
    for (int j = 0; j < hw; ++j) acc += load_f(base, int64_t(j) * ld_x);
    store_f(y, img * ld_y + ch, acc / float(hw));
  }
}

// PyTorch's AdaptiveAvgPool2d bins: [floor(i*H/oh), ceil((i+1)*H/oh)).
template <typename T>
__global__ void adaptive_avgpool_kernel(const T* x, T* y, Dims in, Dims out, int ld_x, int ld_y) {
  const int64_t total = int64_t(out.n) * out.c * out.h * out.w;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const OutPos o = out_pos(i, out);
    const int c = o.c, ow = o.w, oh = o.h, n = o.n;
    const int64_t row = o.row;
    const int h0 = oh * in.h / out.h, h1 = ((oh + 1) * in.h + out.h - 1) / out.h;
    const int w0 = ow * in.w / out.w, w1 = ((ow + 1) * in.w + out.w - 1) / out.w;
    float acc = 0.0f;
    for (int h = h0; h < h1; ++h)
      for (int w = w0; w < w1; ++w)
        acc += load_f(x, ((int64_t(n) * in.h + h) * in.w + w) * ld_x + c);
    store_f(y, row * ld_y + c, acc / float((h1 - h0) * (w1 - w0)));
  }
}

int blocks_for(int64_t n, int threads) {
  return int(std::max<int64_t>(1, std::min<int64_t>((n + threads - 1) / threads, 132 * 32)));
}

int ld_or(int ld, int c) {
  return ld > 0 ? ld : c;
}

}  // namespace

namespace {
// The vectorised kernel where the 16-byte pack divides C and both row strides and the pointers
// are 16-byte aligned, else one thread an element.
template <bool kMax>
void launch_pool(DType t, const void* x, void* y, const PoolSpec& s, cudaStream_t stream) {
  if (s.y.numel() <= 0) return;
  const int ld_x = ld_or(s.ld_x, s.x.c), ld_y = ld_or(s.ld_y, s.y.c);
  const int V = 16 / int(dtype_size(t));
  const bool aligned =
      reinterpret_cast<uintptr_t>(x) % 16 == 0 && reinterpret_cast<uintptr_t>(y) % 16 == 0;
  if (aligned && s.x.c % V == 0 && ld_x % V == 0 && ld_y % V == 0) {
    CNN_DISPATCH_DTYPE(t, {
      constexpr int W = 16 / sizeof(T);
      const int64_t packs = s.y.numel() / W;
      const int blocks = blocks_for(packs, 256);
      const int64_t in_pixels = int64_t(s.x.n) * s.x.h * s.x.w;
      const bool narrow =
          packs + int64_t(blocks) * 256 < int64_t(INT32_MAX) && in_pixels < int64_t(INT32_MAX);
      if (narrow)
        pool_vec<T, W, kMax, int><<<blocks, 256, 0, stream>>>(
            static_cast<const T*>(x), static_cast<T*>(y), s.x, s.y, s.kernel, s.stride, s.pad,
            s.count_include_pad, ld_x / W, ld_y / W);
      else
        pool_vec<T, W, kMax, int64_t><<<blocks, 256, 0, stream>>>(
            static_cast<const T*>(x), static_cast<T*>(y), s.x, s.y, s.kernel, s.stride, s.pad,
            s.count_include_pad, ld_x / W, ld_y / W);
    });
    CNN_CHECK_LAUNCH();
    return;
  }
  CNN_DISPATCH_DTYPE(t, pool_kernel<T, kMax><<<blocks_for(s.y.numel(), 256), 256, 0, stream>>>(
                            static_cast<const T*>(x), static_cast<T*>(y), s.x, s.y, s.kernel,
                            s.stride, s.pad, s.count_include_pad, ld_x, ld_y));
  CNN_CHECK_LAUNCH();
}
}  // namespace

void launch_maxpool(DType t, const void* x, void* y, const PoolSpec& s, cudaStream_t stream) {
  launch_pool<true>(t, x, y, s, stream);
}

void launch_avgpool(DType t, const void* x, void* y, const PoolSpec& s, cudaStream_t stream) {
  launch_pool<false>(t, x, y, s, stream);
}

void launch_global_avgpool(DType t, const void* x, void* y, const PoolSpec& s,
                           cudaStream_t stream) {
  const Dims d = s.x;
  const int64_t total = int64_t(d.n) * d.c;
  if (total <= 0) return;
  if (ck::vectorisable(t, d.c, {ld_or(s.ld_x, d.c), ld_or(s.ld_y, d.c)}, {x, y}) && d.n <= 65535) {
    CNN_DISPATCH_DTYPE(t, {
      constexpr int V = 16 / sizeof(T);
      const ck::VecGeom g = ck::vec_geom(d.c, V);
      global_avgpool_vec<T, V><<<dim3(g.tiles, d.n), g.vx * g.vy, 0, stream>>>(
          static_cast<const T*>(x), static_cast<T*>(y), d.c, d.h * d.w, g.vx, g.vy);
    });
    CNN_CHECK_LAUNCH();
    return;
  }
  CNN_DISPATCH_DTYPE(t, global_avgpool_kernel<T><<<blocks_for(total, 128), 128, 0, stream>>>(
                            static_cast<const T*>(x), static_cast<T*>(y), d.n, d.c, d.h * d.w,
                            ld_or(s.ld_x, d.c), ld_or(s.ld_y, d.c)));
  CNN_CHECK_LAUNCH();
}

void launch_adaptive_avgpool(DType t, const void* x, void* y, const PoolSpec& s,
                             cudaStream_t stream) {
  CNN_DISPATCH_DTYPE(
      t, adaptive_avgpool_kernel<T><<<blocks_for(s.y.numel(), 256), 256, 0, stream>>>(
             static_cast<const T*>(x), static_cast<T*>(y), s.x, s.y, ld_or(s.ld_x, s.x.c),
             ld_or(s.ld_y, s.y.c)));
  CNN_CHECK_LAUNCH();
}

}  // namespace cnnbench
