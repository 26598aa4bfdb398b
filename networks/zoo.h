// The networks of the zoo, one builder per family, each with torchvision's (or, for the MXNet
// symbols, MXNet's) module and parameter names. Every builder takes the input size (square) and
// the class count.
#pragma once

#include "networks/graph.h"

namespace cnnbench {

// torchvision's AlexNet ("one weird trick"): no LRN, no groups, 224.
Graph alexnet(int input_size = 224, int num_classes = 1000);
// MXNet's symbols/alexnet.py: 96 filters in conv1 without padding, ReLU -> LRN -> max pool, 227.
Graph alexnet_lrn(int input_size = 227, int num_classes = 1000);
// torchvision's VGG-16 / VGG-19, with or without BatchNorm.
Graph vgg(int depth, bool batchnorm, int input_size = 224, int num_classes = 1000);
// MXNet's symbols/inception-bn.py (inputs larger than 28): biases on every conv, floor pooling.
Graph inception_bn(int input_size = 224, int num_classes = 1000);
// torchvision's Inception-v3 at 299; `aux` adds the AuxLogits head (training only: inference never
// reads it, so its nodes do not reach the output).
Graph inception_v3(int input_size = 299, int num_classes = 1000, bool aux = false);
// torchvision's EfficientNet-B0 ... B7 (variant 0..7).
Graph efficientnet(int variant, int input_size = 0, int num_classes = 1000);
int efficientnet_resolution(int variant);  // 224, 240, 260, 300, 380, 456, 528, 600

}  // namespace cnnbench
