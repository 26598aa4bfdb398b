#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

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

template <typename T>
void launch(const void* raw, int batch, int ny, int nx, const YoloHead& head, int classes,
            int64_t row_offset, int64_t out_rows_per_image, float* out, cudaStream_t s) {
  const int no = 5 + classes;
  const int64_t total = int64_t(batch) * 3 * ny * nx * no;
  if (total == 0) return;
  HeadArgs h{head.stride, {}, {}};
  for (int a = 0; a < 3; ++a)
    h.anchor_w[a] = head.anchors[a][0], h.anchor_h[a] = head.anchors[a][1];
  const int threads = 256;
  const int blocks = int(std::min<int64_t>((total + threads - 1) / threads, 65536));
  yolo_decode_kernel<T><<<blocks, threads, 0, s>>>(static_cast<const T*>(raw), ny, nx, no, h, total,
                                                   row_offset, out_rows_per_image, out);
  CNN_CHECK_CUDA(cudaGetLastError());
}

}  // namespace

void launch_yolo_decode(const void* raw, DType t, int batch, int ny, int nx, const YoloHead& head,
                        int classes, int64_t row_offset, int64_t out_rows_per_image, float* out,
                        cudaStream_t s) {
  switch (t) {
    case DType::F32:
      return launch<float>(raw, batch, ny, nx, head, classes, row_offset, out_rows_per_image, out,
                           s);
    case DType::F16:
      return launch<__half>(raw, batch, ny, nx, head, classes, row_offset, out_rows_per_image, out,
                            s);
    case DType::BF16:
      return launch<__nv_bfloat16>(raw, batch, ny, nx, head, classes, row_offset,
                                   out_rows_per_image, out, s);
  }
}

}  // namespace cnnbench
