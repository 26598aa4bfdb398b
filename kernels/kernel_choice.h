// Who computes a layer for which cnnbench has a kernel of its own beside cuDNN's (--depthwise,
// --stem): auto (the op decides: under autotune it times both and keeps the faster), cudnn or
// cnnbench alone. Each op's header says what auto does under heuristics.
#pragma once

#include <string>

namespace cnnbench {

enum class KernelChoice { Auto, Cudnn, Cnnbench };

// "auto", "cudnn" or "cnnbench"; UserError otherwise: "--FLAG takes auto, cudnn or cnnbench, not
// 'S'".
KernelChoice parse_kernel_choice(const std::string& s, const char* flag);
const char* kernel_choice_name(KernelChoice c);

}  // namespace cnnbench
