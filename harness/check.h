// Checked calls for CUDA, cuDNN and cuBLAS, and the two error types of the suite.
//
// Every library call goes through one of the CNN_CHECK_* macros. A failure throws LibraryError
// carrying the call text, file:line and the library's own message. Bad input from a user (config,
// CLI, weights file) throws UserError with one plain sentence; main() prints it and exits non-zero.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include <stdexcept>
#include <string>

namespace cnnbench {

// Whether environment variable `name` is set to exactly "1" (the kernels' A/B switches, such as
// CNNBENCH_MAXPOOL_GATHER=1: any other value, or none, leaves the default).
inline bool env_is_one(const char* name) {
  const char* e = std::getenv(name);
  return e && std::string(e) == "1";
}

// An A/B knob's integer: environment variable `name` if it holds an integer in [lo, hi], else
// `fallback` (a test hook: anything else leaves the default, with one line on stderr).
inline int env_int_in(const char* name, int fallback, int lo, int hi) {
  const char* e = std::getenv(name);
  if (!e || !*e) return fallback;
  char* end = nullptr;
  const long v = std::strtol(e, &end, 10);
  if (*end == '\0' && v >= lo && v <= hi) return int(v);
  // Said (the knobs read once, into a static), so that a mistyped value in an A/B does not pass
  // for "no change".
  std::fprintf(stderr, "cnnbench: %s=%s ignored (an integer from %d to %d), %d used\n", name, e, lo,
               hi, fallback);
  return fallback;
}

// A problem with what the user gave us: one sentence that names the bad value.
struct UserError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A CUDA / cuDNN / cuBLAS call failed.
struct LibraryError : std::runtime_error {
  LibraryError(const std::string& library, int code, const std::string& message,
               const std::string& call, const char* file, int line);
  std::string library;
  int code;
};

// Whether e is a library's failure to allocate device memory: CUDA's cudaErrorMemoryAllocation,
// cuDNN's CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED, cuBLAS's
// CUBLAS_STATUS_ALLOC_FAILED. An expected outcome of a max-batch search, unlike every other error.
bool is_out_of_memory(const std::exception& e);

// cuDNN builds no plan of a supported op when the device has too little memory left for its
// kernels to load (a max-batch search met this at EfficientNet-B0 batch 2049 on an 8 GB cap):
// "no engine supports <what>" is an out-of-memory (cuDNN's allocation-failed code, so
// is_out_of_memory says so) when fewer than kNoEngineLowMemory bytes are free, else
// CUDNN_STATUS_NOT_SUPPORTED. free_bytes: the device's free memory when no engine built.
constexpr uint64_t kNoEngineLowMemory = uint64_t(1) << 30;
LibraryError no_engine_error(const std::string& what, uint64_t free_bytes, const char* call,
                             const char* file, int line);
// The device's free bytes (cudaMemGetInfo), or UINT64_MAX where it cannot say.
uint64_t device_free_or_max();

// CUDA's "sticky" errors: after an illegal address, a misaligned address, an illegal
// instruction, a kernel's trap or assert, a launch failure or timeout, or an uncorrectable ECC
// error, the process's CUDA context is unusable, and every later call fails with the same error.
bool is_sticky_cuda_code(int code);
// Whether the context is unusable now: cudaDeviceSynchronize failing with a sticky error, whose
// name and description it returns (a plain error is consumed, as throw_cuda_error does); "" if
// the context is fine or there is no device. Asked after a failure, since a cuDNN or cuBLAS error
// hides a sticky cause behind its own code (an execution failure, an internal error).
std::string sticky_error_now();

[[noreturn]] void throw_cuda_error(int code, const char* call, const char* file, int line);
[[noreturn]] void throw_cudnn_error(int code, const char* call, const char* file, int line);
[[noreturn]] void throw_cublas_error(int code, const char* call, const char* file, int line);

}  // namespace cnnbench

#define CNN_CHECK_CUDA(call)                                                                    \
  do {                                                                                          \
    int cnn_status_ = static_cast<int>(call);                                                   \
    if (cnn_status_ != 0) ::cnnbench::throw_cuda_error(cnn_status_, #call, __FILE__, __LINE__); \
  } while (0)

#define CNN_CHECK_CUDNN(call)                                                                    \
  do {                                                                                           \
    int cnn_status_ = static_cast<int>(call);                                                    \
    if (cnn_status_ != 0) ::cnnbench::throw_cudnn_error(cnn_status_, #call, __FILE__, __LINE__); \
  } while (0)

#define CNN_CHECK_CUBLAS(call)                                                                    \
  do {                                                                                            \
    int cnn_status_ = static_cast<int>(call);                                                     \
    if (cnn_status_ != 0) ::cnnbench::throw_cublas_error(cnn_status_, #call, __FILE__, __LINE__); \
  } while (0)

// After a kernel launch of our own.
#define CNN_CHECK_LAUNCH() CNN_CHECK_CUDA(cudaGetLastError())
