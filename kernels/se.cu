#include <cmath>

#include "harness/check.h"
#include "kernels/convert.cuh"
#include "kernels/se.h"

namespace cnnbench {

namespace {

constexpr int kThreads = 256;
constexpr int kMaxChunks = 64;

// How many blocks share one image's pooling: about 8K elements each, at most kMaxChunks.
int chunks_for(const SeSpec& s) {
  const int64_t hw = int64_t(s.x.h) * s.x.w;
  const int64_t per = hw * s.x.c;
  int64_t chunks = (per + 8191) / 8192;
  chunks = std::min<int64_t>(std::min<int64_t>(chunks, kMaxChunks), hw);
  return int(std::max<int64_t>(chunks, 1));
}

struct Layout {
  size_t partial, scale, counters, total;  // byte offsets into the scratch
};
Layout layout(const SeSpec& s) {
  const size_t nc = size_t(s.x.n) * s.x.c;
  Layout l;
  l.partial = 0;
  l.scale = l.partial + nc * size_t(chunks_for(s)) * sizeof(float);
  l.counters = l.scale + nc * sizeof(float);
  l.total = l.counters + size_t(s.x.n) * sizeof(unsigned);
  return l;
}

// Grid (chunks, N). Each block sums its rows of image n per channel into its own slot of
// `partial` (no float atomics: the sum's order is fixed, so results repeat bit for bit). The
// last block of an image to finish adds the slots in order, runs both 1x1 convs in shared
// memory and writes the image's scale; then it resets the image's counter for the next run.
template <typename T>
__global__ void se_pool_excite(const T* x, int hw, int C, int squeeze, int chunks, const float* w1,
                               const float* b1, const float* w2, const float* b2, float* partial,
                               float* scale, unsigned* counters) {
  extern __shared__ float smem[];  // C pooled values, then squeeze hidden values
  __shared__ bool last;
  const int n = blockIdx.y, chunk = blockIdx.x;
  const int rows_per = (hw + chunks - 1) / chunks;
  const int r0 = chunk * rows_per, r1 = min(hw, r0 + rows_per);
  const T* img = x + int64_t(n) * hw * C;
  float* slot = partial + (int64_t(n) * chunks + chunk) * C;
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    float acc = 0.0f;
    for (int r = r0; r < r1; ++r) acc += load_f(img, int64_t(r) * C + c);
    slot[c] = acc;
  }
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(&counters[n], 1u) == unsigned(chunks - 1);
  __syncthreads();
  if (!last) return;
  __threadfence();
  float* pooled = smem;
  float* hidden = smem + C;
  const float inv = 1.0f / float(hw);
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    float acc = 0.0f;
    for (int k = 0; k < chunks; ++k) acc += __ldcg(partial + (int64_t(n) * chunks + k) * C + c);
    pooled[c] = acc * inv;
  }
  __syncthreads();
  // fc1 + SiLU: one warp per hidden unit, lanes across channels.
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  for (int j = warp; j < squeeze; j += warps) {
    float acc = 0.0f;
    for (int c = lane; c < C; c += 32) acc += w1[int64_t(j) * C + c] * pooled[c];
    for (int o = 16; o > 0; o /= 2) acc += __shfl_down_sync(0xffffffffu, acc, o);
    if (lane == 0) {
      const float v = acc + b1[j];
      hidden[j] = v / (1.0f + expf(-v));
    }
  }
  __syncthreads();
  // fc2 + sigmoid: one thread per channel.
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    float acc = b2[c];
    for (int j = 0; j < squeeze; ++j) acc += w2[int64_t(c) * squeeze + j] * hidden[j];
    scale[int64_t(n) * C + c] = 1.0f / (1.0f + expf(-acc));
  }
  if (threadIdx.x == 0) counters[n] = 0;
}

template <typename T>
__global__ void se_apply(const T* x, T* y, const float* scale, int64_t total, int64_t per_image,
                         int C) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const int64_t n = i / per_image;
    const int c = int(i % C);
    store_f(y, i, load_f(x, i) * scale[n * C + c]);
  }
}

}  // namespace

size_t se_scratch_bytes(const SeSpec& s) {
  return layout(s).total;
}

void launch_se(DType t, const void* x, void* y, const float* w1, const float* b1, const float* w2,
               const float* b2, const SeSpec& s, void* scratch, cudaStream_t stream) {
  const Layout l = layout(s);
  char* base = static_cast<char*>(scratch);
  float* partial = reinterpret_cast<float*>(base + l.partial);
  float* scale = reinterpret_cast<float*>(base + l.scale);
  unsigned* counters = reinterpret_cast<unsigned*>(base + l.counters);
  const int hw = s.x.h * s.x.w, C = s.x.c, chunks = chunks_for(s);
  const size_t smem = size_t(C + s.squeeze) * sizeof(float);
  const dim3 grid(chunks, s.x.n);
  CNN_DISPATCH_DTYPE(t, se_pool_excite<T><<<grid, kThreads, smem, stream>>>(
                            static_cast<const T*>(x), hw, C, s.squeeze, chunks, w1, b1, w2, b2,
                            partial, scale, counters));
  CNN_CHECK_LAUNCH();
  const int64_t total = s.x.numel(), per_image = int64_t(hw) * C;
  const int blocks =
      int(std::max<int64_t>(1, std::min<int64_t>((total + kThreads - 1) / kThreads, 132 * 16)));
  CNN_DISPATCH_DTYPE(
      t, se_apply<T><<<blocks, kThreads, 0, stream>>>(static_cast<const T*>(x), static_cast<T*>(y),
                                                      scale, total, per_image, C));
  CNN_CHECK_LAUNCH();
}

std::vector<double> se_reference(const std::vector<float>& x, const std::vector<float>& w1,
                                 const std::vector<float>& b1, const std::vector<float>& w2,
                                 const std::vector<float>& b2, const SeSpec& s) {
  const int C = s.x.c, hw = s.x.h * s.x.w, sq = s.squeeze;
  std::vector<double> y(x.size());
  for (int n = 0; n < s.x.n; ++n) {
    std::vector<double> pooled(C, 0.0), hidden(sq), gate(C);
    for (int r = 0; r < hw; ++r)
      for (int c = 0; c < C; ++c) pooled[c] += x[(size_t(n) * hw + r) * C + c];
    for (double& p : pooled) p /= hw;
    for (int j = 0; j < sq; ++j) {
      double a = b1[j];
      for (int c = 0; c < C; ++c) a += double(w1[size_t(j) * C + c]) * pooled[c];
      hidden[j] = a / (1.0 + std::exp(-a));
    }
    for (int c = 0; c < C; ++c) {
      double a = b2[c];
      for (int j = 0; j < sq; ++j) a += double(w2[size_t(c) * sq + j]) * hidden[j];
      gate[c] = 1.0 / (1.0 + std::exp(-a));
    }
    for (int r = 0; r < hw; ++r)
      for (int c = 0; c < C; ++c) {
        const size_t i = (size_t(n) * hw + r) * C + c;
        y[i] = x[i] * gate[c];
      }
  }
  return y;
}

}  // namespace cnnbench
