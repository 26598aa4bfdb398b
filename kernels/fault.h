// A deliberate device fault, for the tests of how a run survives one (tests/fault_test.sh,
// CNNBENCH_FAULT in harness/bench_main.cpp).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace cnnbench {

// One thread stores an int at `address`: an address no allocation holds (16, say) makes the
// kernel fail with cudaErrorIllegalAddress, a sticky error. Checks the launch only.
void launch_store_to_address(uintptr_t address, cudaStream_t stream);

}  // namespace cnnbench
