#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cub/device/device_segmented_radix_sort.cuh>
#include <stdexcept>

#include "harness/check.h"
#include "kernels/convert.cuh"
#include "kernels/detect_gpu.h"

namespace cnnbench {

namespace {

struct HeadArgs {
  int stride;
  float anchor_w[3], anchor_h[3];
};

// One thread per output field: row (n, a, y, x) of 5 + nc, field k. Reads the head's NHWC value
// at channel a * (5 + nc) + k; sigmoid in float; boxes as models.py YOLOLayer (inference).
template <typename T>
__global__ void yolo_decode_kernel(const T* raw, int ny, int nx, int no, HeadArgs h, int64_t total,
                                   int64_t row_offset, int64_t out_rows_per_image, float* out) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int k = int(i % no);
    int64_t r = i / no;  // row within the batch: (n, a, y, x)
    const int x = int(r % nx);
    r /= nx;
    const int y = int(r % ny);
    r /= ny;
    const int a = int(r % 3);
    const int64_t n = r / 3;
    const float v = load_f(raw, ((n * ny + y) * nx + x) * int64_t(3 * no) + a * no + k);
    const float s = 1.f / (1.f + __expf(-v));
    float o;
    switch (k) {
      case 0:
        o = (2.f * s - 0.5f + float(x)) * float(h.stride);
        break;
      case 1:
        o = (2.f * s - 0.5f + float(y)) * float(h.stride);
        break;
      case 2:
        o = 4.f * s * s * h.anchor_w[a];
        break;
      case 3:
        o = 4.f * s * s * h.anchor_h[a];
        break;
      default:
        o = s;
    }
    const int64_t row = (int64_t(a) * ny + y) * nx + x;
    out[(n * out_rows_per_image + row_offset + row) * no + k] = o;
  }
}

}  // namespace

void launch_yolo_decode(const void* raw, DType t, int batch, int ny, int nx, const YoloHead& head,
                        int classes, int64_t row_offset, int64_t out_rows_per_image, float* out,
                        cudaStream_t s) {
  const int no = 5 + classes;
  const int64_t total = int64_t(batch) * 3 * ny * nx * no;
  if (total == 0) return;
  HeadArgs h{head.stride, {}, {}};
  for (int a = 0; a < 3; ++a)
    h.anchor_w[a] = head.anchors[a][0], h.anchor_h[a] = head.anchors[a][1];
  const int threads = 256;
  const int blocks = int(std::min<int64_t>((total + threads - 1) / threads, 65536));
  CNN_DISPATCH_DTYPE(t, yolo_decode_kernel<T>
                     <<<blocks, threads, 0, s>>>(static_cast<const T*>(raw), ny, nx, no, h, total,
                                                 row_offset, out_rows_per_image, out));
  CNN_CHECK_CUDA(cudaGetLastError());
}

namespace {

// A candidate's place in its image's order: ascending keys are descending scores (a positive
// float's bits grow with it, so they are inverted), ties by row * classes + class.
__device__ __forceinline__ uint64_t candidate_key(float score, uint32_t index) {
  return (uint64_t(0xFFFFFFFFu - __float_as_uint(score)) << 32) | index;
}

// The box of a row, as nms_reference computes it (x +- w / 2: halving is exact, one rounding).
__device__ __forceinline__ Detection box_of(const float* p) {
  Detection d;
  d.x1 = __fsub_rn(p[0], p[2] * 0.5f), d.y1 = __fsub_rn(p[1], p[3] * 0.5f);
  d.x2 = __fadd_rn(p[0], p[2] * 0.5f), d.y2 = __fadd_rn(p[1], p[3] * 0.5f);
  return d;
}

// box_iou (kernels/detect_ref.cpp) with its operation order and no fused multiply-add.
__device__ __forceinline__ float iou_of(const Detection& a, const Detection& b) {
  const float area_a =
      __fmul_rn(fmaxf(0.f, __fsub_rn(a.x2, a.x1)), fmaxf(0.f, __fsub_rn(a.y2, a.y1)));
  const float area_b =
      __fmul_rn(fmaxf(0.f, __fsub_rn(b.x2, b.x1)), fmaxf(0.f, __fsub_rn(b.y2, b.y1)));
  const float iw = fmaxf(0.f, __fsub_rn(fminf(a.x2, b.x2), fmaxf(a.x1, b.x1)));
  const float ih = fmaxf(0.f, __fsub_rn(fminf(a.y2, b.y2), fmaxf(a.y1, b.y1)));
  const float inter = __fmul_rn(iw, ih), uni = __fsub_rn(__fadd_rn(area_a, area_b), inter);
  return uni > 0.f ? __fdiv_rn(inter, uni) : 0.f;
}

// One thread per (image, row): its candidates appended to the image's list (order restored by
// the sort).
__global__ void nms_candidates_kernel(const float* rows, int64_t rows_per_image, int classes,
                                      float conf, int capacity, int batch, int* count,
                                      uint64_t* keys) {
  const int no = 5 + classes;
  const int64_t total = int64_t(batch) * rows_per_image;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t n = i / rows_per_image, r = i % rows_per_image;
    const float* p = rows + i * no;
    const float obj = p[4];
    if (!(obj > conf)) continue;
    for (int c = 0; c < classes; ++c) {
      const float score = __fmul_rn(p[5 + c], obj);
      if (!(score > conf)) continue;
      const int slot = atomicAdd(&count[n], 1);
      if (slot < capacity)
        keys[n * capacity + slot] = candidate_key(score, uint32_t(r * classes + c));
    }
  }
}

__global__ void nms_segments_kernel(const int* count, int batch, int capacity, int* begin, int* end,
                                    int* overflow) {
  const int n = blockIdx.x * blockDim.x + threadIdx.x;
  if (n >= batch) return;
  begin[n] = n * capacity;
  end[n] = n * capacity + min(count[n], capacity);
  if (count[n] > capacity) atomicMax(overflow, count[n]);
}

// One block per image: the sorted candidates in order; a candidate not yet removed is kept and
// removes every later one of its class that it overlaps by more than iou.
__global__ void nms_greedy_kernel(const float* rows, int64_t rows_per_image, int classes, float iou,
                                  int max_det, int capacity, const int* count, const uint64_t* keys,
                                  unsigned char* removed, Detection* out, int* out_count) {
  const int n = blockIdx.x, no = 5 + classes;
  const int m = min(count[n], capacity);
  const uint64_t* k = keys + int64_t(n) * capacity;
  unsigned char* gone = removed + int64_t(n) * capacity;
  const float* img = rows + int64_t(n) * rows_per_image * no;
  __shared__ int kept;
  if (threadIdx.x == 0) kept = 0;
  for (int i = 0; i < m; ++i) {
    __syncthreads();
    if (kept >= max_det) break;  // the same for every thread: read after the barrier
    if (gone[i]) continue;
    const uint32_t idx_i = uint32_t(k[i]);
    const int cls = int(idx_i % classes);
    const float* pi = img + int64_t(idx_i / classes) * no;
    Detection di = box_of(pi);
    __syncthreads();  // every thread has read `kept` and gone[i] before they change
    if (threadIdx.x == 0) {
      di.score = __fmul_rn(pi[5 + cls], pi[4]);
      di.cls = cls;
      out[int64_t(n) * max_det + kept] = di;
      ++kept;
    }
    for (int j = i + 1 + threadIdx.x; j < m; j += blockDim.x) {
      if (gone[j]) continue;
      const uint32_t idx_j = uint32_t(k[j]);
      if (int(idx_j % classes) != cls) continue;
      if (iou_of(di, box_of(img + int64_t(idx_j / classes) * no)) > iou) gone[j] = 1;
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) out_count[n] = kept;
}

struct NmsLayout {
  size_t counts, keys_in, keys_out, begin, end, removed, temp, temp_bytes, total;
};

size_t align256(size_t b) {
  return (b + 255) / 256 * 256;
}

NmsLayout nms_layout(int batch, int capacity) {
  NmsLayout l{};
  const size_t items = size_t(batch) * capacity;
  size_t at = 0;
  auto take = [&](size_t bytes) {
    const size_t here = at;
    at += align256(bytes);
    return here;
  };
  l.counts = take(sizeof(int) * batch);
  l.keys_in = take(sizeof(uint64_t) * items);
  l.keys_out = take(sizeof(uint64_t) * items);
  l.begin = take(sizeof(int) * batch);
  l.end = take(sizeof(int) * batch);
  l.removed = take(items);
  CNN_CHECK_CUDA(cub::DeviceSegmentedRadixSort::SortKeys(
      nullptr, l.temp_bytes, static_cast<const uint64_t*>(nullptr), static_cast<uint64_t*>(nullptr),
      int(items), batch, static_cast<const int*>(nullptr), static_cast<const int*>(nullptr)));
  l.temp = take(l.temp_bytes);
  l.total = at;
  return l;
}

}  // namespace

YoloNmsPlan plan_yolo_nms(int batch, int64_t rows_per_image, int classes, int capacity) {
  if (batch < 1 || capacity < 1 || classes < 1 || rows_per_image < 1)
    throw std::invalid_argument(
        "plan_yolo_nms: batch, rows, classes and capacity must be positive");
  if (rows_per_image * classes > int64_t(UINT32_MAX))
    throw std::invalid_argument("plan_yolo_nms: rows x classes must fit 32 bits (the sort key)");
  if (int64_t(batch) * capacity > INT32_MAX)
    throw std::invalid_argument("plan_yolo_nms: batch x capacity must fit 31 bits");
  YoloNmsPlan p;
  p.batch = batch, p.classes = classes, p.capacity = capacity, p.rows_per_image = rows_per_image;
  p.workspace_bytes = nms_layout(batch, capacity).total;
  return p;
}

const int* yolo_nms_counts(const YoloNmsPlan& plan, const void* workspace) {
  return reinterpret_cast<const int*>(static_cast<const char*>(workspace) +
                                      nms_layout(plan.batch, plan.capacity).counts);
}

void launch_yolo_nms(const YoloNmsPlan& plan, const float* rows, const NmsOptions& o,
                     void* workspace, Detection* out, int* out_count, int* overflow,
                     cudaStream_t s) {
  const NmsLayout l = nms_layout(plan.batch, plan.capacity);
  char* w = static_cast<char*>(workspace);
  int* count = reinterpret_cast<int*>(w + l.counts);
  auto* keys_in = reinterpret_cast<uint64_t*>(w + l.keys_in);
  auto* keys_out = reinterpret_cast<uint64_t*>(w + l.keys_out);
  int* begin = reinterpret_cast<int*>(w + l.begin);
  int* end = reinterpret_cast<int*>(w + l.end);
  auto* removed = reinterpret_cast<unsigned char*>(w + l.removed);
  const size_t items = size_t(plan.batch) * plan.capacity;
  CNN_CHECK_CUDA(cudaMemsetAsync(count, 0, sizeof(int) * plan.batch, s));
  CNN_CHECK_CUDA(cudaMemsetAsync(removed, 0, items, s));
  CNN_CHECK_CUDA(cudaMemsetAsync(overflow, 0, sizeof(int), s));
  const int64_t threads_total = int64_t(plan.batch) * plan.rows_per_image;
  const int blocks = int(std::min<int64_t>((threads_total + 255) / 256, 65536));
  nms_candidates_kernel<<<blocks, 256, 0, s>>>(rows, plan.rows_per_image, plan.classes,
                                               o.conf_thres, plan.capacity, plan.batch, count,
                                               keys_in);
  CNN_CHECK_CUDA(cudaGetLastError());
  nms_segments_kernel<<<(plan.batch + 127) / 128, 128, 0, s>>>(count, plan.batch, plan.capacity,
                                                               begin, end, overflow);
  CNN_CHECK_CUDA(cudaGetLastError());
  size_t temp_bytes = l.temp_bytes;
  CNN_CHECK_CUDA(cub::DeviceSegmentedRadixSort::SortKeys(
      w + l.temp, temp_bytes, keys_in, keys_out, int(items), plan.batch, begin, end, 0, 64, s));
  nms_greedy_kernel<<<plan.batch, 1024, 0, s>>>(rows, plan.rows_per_image, plan.classes,
                                                o.iou_thres, o.max_det, plan.capacity, count,
                                                keys_out, removed, out, out_count);
  CNN_CHECK_CUDA(cudaGetLastError());
}

}  // namespace cnnbench
