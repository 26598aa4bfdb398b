#include "kernels/kernel_choice.h"

#include "harness/check.h"

namespace cnnbench {

KernelChoice parse_kernel_choice(const std::string& s, const char* flag) {
  if (s == "auto") return KernelChoice::Auto;
  if (s == "cudnn") return KernelChoice::Cudnn;
  if (s == "cnnbench") return KernelChoice::Cnnbench;
  throw UserError(std::string("--") + flag + " takes auto, cudnn or cnnbench, not '" + s + "'");
}

const char* kernel_choice_name(KernelChoice c) {
  switch (c) {
    case KernelChoice::Cudnn:
      return "cudnn";
    case KernelChoice::Cnnbench:
      return "cnnbench";
    default:
      return "auto";
  }
}

}  // namespace cnnbench
