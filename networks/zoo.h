// The networks of the zoo, one builder per family, each with torchvision's (or, for the MXNet
// symbols, MXNet's) module and parameter names. Every builder takes the input size (square) and
// the class count.
#pragma once

#include <string>

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
// YOLOR-CSP-X (cfg/yolor_csp_x.cfg, 80 classes): parameters module_list.{i}.Conv2d / BatchNorm2d /
// implicit as the reference names them; output() is the stride-8 head, extra_outputs() the
// stride-16 and stride-32 ones (each 255 = 3 anchors x 85 channels, before the YOLO decode). The
// implicit layers are graph ops here (implicit_add / implicit_mul); inference is to fold them into
// the heads' 1x1 convs. Not in the registry yet: no inference of upsample or the implicits exists.
Graph yolor_csp_x(int input_size = 640, int num_classes = 80);
// How many of the cfg's blocks have this type ("convolutional", "route", "shortcut", "maxpool",
// "upsample", "implicit_add", "implicit_mul", "shift_channels", "control_channels", "yolo").
int yolor_layer_count(const std::string& kind);
// StyleGAN2's generator at `resolution` (4 ... 1024) with channel_base 32768 (config-f, paper512,
// paper1024) or 16384 (paper256) and 8 or 2 mapping layers, z = w = 512, unconditional. The input
// is z as [512, 1, 1]; the output the image [3, resolution, resolution]. Not in the registry: no
// inference of its ops exists yet.
Graph stylegan2_generator(int resolution, int channel_base = 32768, int mapping_layers = 8);

}  // namespace cnnbench
