#include "harness/data_parallel.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "harness/check.h"
#include "harness/hash.h"

namespace cnnbench {

void throw_nccl_error(int code, const char* call, const char* file, int line) {
  std::string msg = ncclGetErrorString(static_cast<ncclResult_t>(code));
  const char* last = ncclGetLastError(nullptr);
  if (last && *last) msg += std::string(" (") + last + ")";
  throw LibraryError("NCCL", code, msg, call, file, line);
}

namespace {

std::string version_of(int v) {  // NCCL_VERSION_CODE: major * 10000 + minor * 100 + patch
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
         std::to_string(v % 100);
}

ncclDataType_t nccl_type(int group) {
  switch (static_cast<DType>(group)) {
    case DType::F32:
      return ncclFloat32;
    case DType::F16:
      return ncclFloat16;
    case DType::BF16:
      return ncclBfloat16;
  }
  throw std::logic_error("data parallel: no NCCL type for group " + std::to_string(group));
}

}  // namespace

std::string nccl_version_loaded() {
  int v = 0;
  CNN_CHECK_NCCL(ncclGetVersion(&v));
  return version_of(v);
}

std::string nccl_version_compiled() {
  return version_of(NCCL_VERSION_CODE);
}

DataParallel::DataParallel(TrainModel& model, ncclComm_t comm, int world,
                           const DataParallelOptions& opt)
    : model_(model), comm_(comm), world_(world), opt_(opt) {
  for (const TrainModel::GradientBuffer& b : model.gradient_buffers()) {
    GradSlot s;
    s.name = b.name;
    s.address = reinterpret_cast<uintptr_t>(b.ptr);
    s.bytes = size_t(b.count) * dtype_size(b.type);
    s.ready = b.ready;
    s.group = static_cast<int>(b.type);
    slots_.push_back(s);
  }
  buckets_ = plan_buckets(slots_, opt.bucket_bytes, opt.first_bucket_bytes);
  const std::string bad = coverage_error();
  if (!bad.empty()) throw std::logic_error("data parallel: " + bad);
  at_launch_.assign(size_t(model.launch_count()), {});
  for (size_t b = 0; b < buckets_.size(); ++b)
    at_launch_.at(size_t(buckets_[b].ready)).push_back(int(b));
  CNN_CHECK_CUDA(cudaStreamCreateWithFlags(&nccl_stream_, cudaStreamNonBlocking));
  ready_.assign(buckets_.size(), nullptr);
  for (cudaEvent_t& e : ready_)
    CNN_CHECK_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  CNN_CHECK_CUDA(cudaEventCreateWithFlags(&start_, cudaEventDisableTiming));
  CNN_CHECK_CUDA(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));
  check_layout_on_all_ranks();
}

DataParallel::~DataParallel() {
  for (cudaEvent_t e : ready_)
    if (e) cudaEventDestroy(e);
  if (start_) cudaEventDestroy(start_);
  if (done_) cudaEventDestroy(done_);
  if (nccl_stream_) cudaStreamDestroy(nccl_stream_);
}

size_t DataParallel::gradient_bytes() const {
  size_t n = 0;
  for (const GradSlot& s : slots_) n += s.bytes;
  return n;
}

std::string DataParallel::coverage_error() const {
  std::vector<BucketRun> runs;
  for (const Bucket& b : buckets_) runs.insert(runs.end(), b.runs.begin(), b.runs.end());
  std::sort(runs.begin(), runs.end(),
            [](const BucketRun& a, const BucketRun& b) { return a.address < b.address; });
  for (size_t i = 0; i < runs.size(); ++i) {
    if (runs[i].bytes % dtype_size(static_cast<DType>(runs[i].group)) != 0)
      return "a run of " + std::to_string(runs[i].bytes) + " bytes is no whole number of elements";
    if (i > 0 && runs[i - 1].address + runs[i - 1].bytes > runs[i].address)
      return "two bucket runs overlap";
  }
  for (const GradSlot& s : slots_) {
    int in = 0;
    for (const BucketRun& r : runs)
      if (r.address <= s.address && s.address + s.bytes <= r.address + r.bytes &&
          r.group == s.group)
        ++in;
    if (in != 1)
      return "the gradient of " + s.name + " lies in " + std::to_string(in) + " bucket runs";
  }
  return "";
}

void DataParallel::reduce(int bucket, cudaStream_t s) {
  const Bucket& b = buckets_.at(size_t(bucket));
  CNN_CHECK_NCCL(ncclGroupStart());
  ncclResult_t first = ncclSuccess;  // the group is closed whatever happens inside it
  for (const BucketRun& r : b.runs) {
    void* p = reinterpret_cast<void*>(r.address);
    const size_t count = r.bytes / dtype_size(static_cast<DType>(r.group));
    first = ncclAllReduce(p, p, count, nccl_type(r.group), ncclAvg, comm_, s);
    if (first != ncclSuccess) break;
  }
  const ncclResult_t end = ncclGroupEnd();
  if (first != ncclSuccess) throw_nccl_error(first, "ncclAllReduce", __FILE__, __LINE__);
  CNN_CHECK_NCCL(end);
}

uint64_t DataParallel::layout_hash() const {
  // FNV-1a over the buckets' runs, addresses taken from the first gradient's: the same on every
  // rank exactly when their all-reduces match call for call.
  uint64_t h = kFnvOffset;
  auto mix = [&h](uint64_t v) { h = fnv1a(&v, sizeof v, h); };
  uintptr_t base = UINTPTR_MAX;
  for (const GradSlot& s : slots_) base = std::min(base, s.address);
  mix(buckets_.size());
  for (const Bucket& b : buckets_) {
    mix(b.runs.size());
    for (const BucketRun& r : b.runs) mix(r.address - base), mix(r.bytes), mix(uint64_t(r.group));
  }
  return h;
}

void DataParallel::check_layout_on_all_ranks() {
  if (world_ < 2) return;
  uint64_t* d = nullptr;
  CNN_CHECK_CUDA(cudaMalloc(&d, sizeof(uint64_t) * size_t(world_)));
  std::vector<uint64_t> all(static_cast<size_t>(world_));
  try {
    int rank = 0;
    CNN_CHECK_NCCL(ncclCommUserRank(comm_, &rank));
    const uint64_t mine = layout_hash();
    CNN_CHECK_CUDA(cudaMemcpy(d + rank, &mine, sizeof mine, cudaMemcpyHostToDevice));
    CNN_CHECK_NCCL(ncclAllGather(d + rank, d, 1, ncclUint64, comm_, nccl_stream_));
    CNN_CHECK_CUDA(cudaStreamSynchronize(nccl_stream_));
    CNN_CHECK_CUDA(
        cudaMemcpy(all.data(), d, sizeof(uint64_t) * all.size(), cudaMemcpyDeviceToHost));
  } catch (...) {
    cudaFree(d);
    throw;
  }
  CNN_CHECK_CUDA(cudaFree(d));
  for (int r = 1; r < world_; ++r)
    if (all[size_t(r)] != all[0])
      throw std::runtime_error(
          "data parallel: rank " + std::to_string(r) +
          " laid its gradients out unlike rank 0 (their all-reduces would not match): the ranks "
          "built different models");
}

void DataParallel::step(cudaStream_t stream) {
  if (buckets_.empty()) {  // nothing to average
    model_.step(stream);
    return;
  }
  model_.forward_backward(stream, [&](int launch, cudaStream_t st) {
    if (!opt_.overlap) return;
    for (int b : at_launch_.at(size_t(launch))) {
      CNN_CHECK_CUDA(cudaEventRecord(ready_[size_t(b)], st));
      CNN_CHECK_CUDA(cudaStreamWaitEvent(nccl_stream_, ready_[size_t(b)], 0));
      reduce(b, nccl_stream_);
    }
  });
  if (!opt_.overlap) {
    CNN_CHECK_CUDA(cudaEventRecord(start_, stream));
    CNN_CHECK_CUDA(cudaStreamWaitEvent(nccl_stream_, start_, 0));
    for (size_t b = 0; b < buckets_.size(); ++b) reduce(int(b), nccl_stream_);
  }
  CNN_CHECK_CUDA(cudaEventRecord(done_, nccl_stream_));
  CNN_CHECK_CUDA(cudaStreamWaitEvent(stream, done_, 0));
  model_.update(stream);
}

void DataParallel::allreduce_only(cudaStream_t stream) {
  if (buckets_.empty()) return;
  CNN_CHECK_CUDA(cudaEventRecord(start_, stream));
  CNN_CHECK_CUDA(cudaStreamWaitEvent(nccl_stream_, start_, 0));
  for (size_t b = 0; b < buckets_.size(); ++b) reduce(int(b), nccl_stream_);
  CNN_CHECK_CUDA(cudaEventRecord(done_, nccl_stream_));
  CNN_CHECK_CUDA(cudaStreamWaitEvent(stream, done_, 0));
}

}  // namespace cnnbench
