// YOLO detection on the GPU (issue 6): the decode of one head's raw output into rows of 5 + nc,
// as kernels/detect.h's yolo_decode_reference does on the host.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/detect.h"
#include "kernels/tensor.h"

namespace cnnbench {

// raw: the head's last conv output, NHWC [batch][ny][nx][3 * (5 + classes)] in type t. Writes
// image n's rows (a, y, x) of 5 + classes floats at out + (n * out_rows_per_image + row_offset +
// row) * (5 + classes): the three heads of a network share one [batch][rows][5 + classes] output,
// each at its row offset (YOLOR's torch.cat of the heads). Sigmoid in float (__expf): within a
// few float ulps of the host's double reference.
void launch_yolo_decode(const void* raw, DType t, int batch, int ny, int nx, const YoloHead& head,
                        int classes, int64_t row_offset, int64_t out_rows_per_image, float* out,
                        cudaStream_t s);

}  // namespace cnnbench
