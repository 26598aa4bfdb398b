// ResNet v1.5 as torchvision builds it: the stride of a downsampling bottleneck sits on its 3x3.
#pragma once

#include <vector>

#include "networks/graph.h"

namespace cnnbench {

// blocks: bottlenecks per stage, e.g. {3, 4, 6, 3} for ResNet-50.
Graph build_resnet(const std::string& name, const std::vector<int>& blocks, int input_size,
                   int num_classes = 1000);
Graph resnet50(int input_size = 224);
Graph resnet152(int input_size = 224);

}  // namespace cnnbench
