// Data-parallel training over NCCL (issue 11): one process per GPU, each holding the whole
// network (TrainModel) and its own batch. After every step's backward the parameter gradients are
// averaged across the ranks (ncclAvg), bucket by bucket as the backward finishes them
// (plan_buckets, harness/dist.h), on a stream of their own so they overlap the rest of the
// backward; the optimizer then runs on each rank on the same averaged gradients, so every rank
// keeps the same weights. BatchNorm's batch statistics and running statistics stay per rank
// (as PyTorch's DistributedDataParallel with broadcast_buffers off): a rank normalises its own
// batch.
//
// step() only enqueues work (events, NCCL calls, the model's launches), so a whole step is
// captured in one CUDA graph: the NCCL stream forks from and joins the capturing stream.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <string>
#include <vector>

#include "harness/dist.h"
#include "networks/train_model.h"

namespace cnnbench {

[[noreturn]] void throw_nccl_error(int code, const char* call, const char* file, int line);

}  // namespace cnnbench

#define CNN_CHECK_NCCL(call)                                                                    \
  do {                                                                                          \
    int cnn_status_ = static_cast<int>(call);                                                   \
    if (cnn_status_ != 0) ::cnnbench::throw_nccl_error(cnn_status_, #call, __FILE__, __LINE__); \
  } while (0)

namespace cnnbench {

// NCCL's version as "2.28.9": the library loaded (ncclGetVersion) and the header compiled against.
std::string nccl_version_loaded();
std::string nccl_version_compiled();

struct DataParallelOptions {
  size_t bucket_bytes = size_t(25) << 20;       // DDP's bucket_cap_mb
  size_t first_bucket_bytes = size_t(1) << 20;  // DDP's first bucket
  // false: every all-reduce after the whole backward (for comparison: what overlap buys).
  bool overlap = true;
};

class DataParallel {
 public:
  // `comm` is this rank's communicator over `world` ranks; the model lives on this rank's GPU.
  DataParallel(TrainModel& model, ncclComm_t comm, int world, const DataParallelOptions& opt);
  ~DataParallel();
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  // One data-parallel step on `stream`: forward, loss, backward with the bucketed all-reduces,
  // then the optimizer. Enqueues only.
  void step(cudaStream_t stream);
  // The step's all-reduces alone, one after another (the communication time with nothing to
  // hide behind). Averages whatever the gradient buffers hold.
  void allreduce_only(cudaStream_t stream);

  const std::vector<Bucket>& buckets() const { return buckets_; }
  const std::vector<GradSlot>& slots() const { return slots_; }
  size_t gradient_bytes() const;  // the sum of the slots' bytes: what one step all-reduces
  // Whether every gradient's bytes lie in exactly one bucket run (a check of the plan against
  // the model's buffers): an empty string, or what is wrong.
  std::string coverage_error() const;

  // A hash of the buckets' runs (offsets from the first gradient, sizes, types).
  uint64_t layout_hash() const;

 private:
  void reduce(int bucket, cudaStream_t s);
  // Every rank's layout_hash() against rank 0's (a collective; world 1: nothing). A rank whose
  // model chose other gradient types would issue other all-reduces and hang the rest: all ranks
  // throw instead, naming the first that differs.
  void check_layout_on_all_ranks();

  TrainModel& model_;
  ncclComm_t comm_;
  int world_;
  DataParallelOptions opt_;
  std::vector<GradSlot> slots_;
  std::vector<Bucket> buckets_;
  std::vector<std::vector<int>> at_launch_;  // per launch: the buckets ready after it
  cudaStream_t nccl_stream_ = nullptr;
  std::vector<cudaEvent_t> ready_;  // per bucket
  cudaEvent_t start_ = nullptr, done_ = nullptr;
};

}  // namespace cnnbench
