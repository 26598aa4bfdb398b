#include "harness/check.h"
#include "kernels/fault.h"

namespace cnnbench {
namespace {

__global__ void store_to_address(int* p) {
  *p = 1;
}

}  // namespace

void launch_store_to_address(uintptr_t address, cudaStream_t stream) {
  store_to_address<<<1, 1, 0, stream>>>(reinterpret_cast<int*>(address));
  CNN_CHECK_CUDA(cudaGetLastError());
}

}  // namespace cnnbench
