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

namespace cnnbench {

// Confidence filtering and class-aware NMS of decoded rows on the GPU, image by image, with
// nms_reference's semantics exactly (kernels/detect.h): candidates (row, class) with obj >
// conf_thres and obj * p > conf_thres; ordered by score, highest first, ties by row then class
// (a 64-bit key: the score's bits inverted, then row * classes + class, radix-sorted per image);
// each kept unless an earlier kept one of its class overlaps it by IoU > iou_thres; at most
// max_det. Boxes and IoU in float with the host's operation order (no fused multiply-add), so the
// decisions are the reference's bit for bit.
//
// rows: [batch][rows_per_image][5 + classes] (launch_yolo_decode's output). `capacity`: the most
// candidates an image may have; an image with more sets *overflow (device int) to its count and
// its detections are not to be used. out: [batch][max_det]; out_count: [batch].
struct YoloNmsPlan {
  int batch = 0, classes = 0, capacity = 0;
  int64_t rows_per_image = 0;
  size_t workspace_bytes = 0;  // what launch_yolo_nms needs
};
YoloNmsPlan plan_yolo_nms(int batch, int64_t rows_per_image, int classes, int capacity);
void launch_yolo_nms(const YoloNmsPlan& plan, const float* rows, const NmsOptions& o,
                     void* workspace, Detection* out, int* out_count, int* overflow,
                     cudaStream_t s);
// After launch_yolo_nms: each image's candidate count (device ints, [batch], in the workspace;
// beyond the capacity where the image overflowed).
const int* yolo_nms_counts(const YoloNmsPlan& plan, const void* workspace);

}  // namespace cnnbench
