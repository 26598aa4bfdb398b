// Data-parallel training's host side (issue 11), without CUDA or NCCL, so all of it is tested on
// a CPU: who this process is among the ranks (from our launcher's environment, Open MPI's,
// MPICH's / PMI's or Slurm's), the exchange of NCCL's unique id over TCP (rank 0 listens, the
// others connect), the bucket plan that groups parameter gradients for the all-reduce, and the
// scaling arithmetic of the report.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace cnnbench {

// One process of a data-parallel run. `source` names where the numbers came from: "cnnbench"
// (CNNBENCH_RANK, CNNBENCH_WORLD_SIZE, CNNBENCH_LOCAL_RANK, CNNBENCH_LOCAL_WORLD_SIZE, as
// cnnbench_launch sets them), "openmpi" (OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK,
// _LOCAL_SIZE), "pmi" (PMI_RANK, PMI_SIZE, MPI_LOCALRANKID, MPI_LOCALNRANKS: MPICH's Hydra),
// "slurm" (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NTASKS_PER_NODE) or "single" (none
// set: rank 0 of 1). The first family with its rank variable set wins, in that order.
struct RankInfo {
  int rank = 0, world = 1;
  int local_rank = 0, local_world = 1;
  std::string source = "single";
};

// The environment lookup is a parameter so tests need not touch the process's environment;
// nullptr entries mean unset. UserError, naming the variable and its value, where a number is
// not a whole number >= 0 (world sizes >= 1), where rank >= world or local_rank >= local_world,
// or where a family sets its rank without its size. Missing local variables: local_rank = rank,
// local_world = world (one host).
using EnvLookup = const char* (*)(const char* name);
RankInfo rank_info_from_env(EnvLookup env);
RankInfo rank_info_from_env();  // getenv

// Where rank 0 listens for the others: CNNBENCH_MASTER_ADDR (default 127.0.0.1) and
// CNNBENCH_MASTER_PORT (default 29511). UserError on a port outside 1..65535.
struct Rendezvous {
  std::string addr = "127.0.0.1";
  int port = 29511;
};
Rendezvous rendezvous_from_env(EnvLookup env);
Rendezvous rendezvous_from_env();

// Rank 0 sends `blob` (NCCL's unique id: 128 bytes) to every other rank and returns it; the others
// return what they received (their `blob` argument is ignored). Over TCP: rank 0 binds `r`
// (SO_REUSEADDR) and accepts world - 1 connections; each other rank connects (retrying every
// 100 ms until `timeout_s`, as rank 0 may start later), sends a hello {magic, rank, world}, and
// reads {the blob's size, the blob}. Rank 0 checks every hello: the magic, the same world size,
// a rank in 1..world-1 not seen before; a bad hello is an error naming the rank and the mismatch.
// Every wait is bounded by timeout_s: an error then names the ranks that never arrived (rank 0)
// or the address it could not reach (the others). Errors are UserError (a launch problem, one
// clear line). world == 1: returns blob without any socket.
std::vector<uint8_t> rendezvous_broadcast(const RankInfo& me, const Rendezvous& r,
                                          const std::vector<uint8_t>& blob, double timeout_s = 60);

// A parameter gradient as the backward produces it. `ready` is the index of the step's launch
// after which its value is final (launches run in order); `dtype_bytes` its element size;
// `group` its element type as an integer (tensors of different groups never share a bucket
// run: an all-reduce has one type).
struct GradSlot {
  std::string name;
  uintptr_t address = 0;  // device address (or any offset in tests)
  size_t bytes = 0;
  int ready = 0;
  int group = 0;
};

// A bucket: gradients all-reduced together once the last of them is ready. `runs` are its
// contiguous address ranges of one group each (adjacent slots merge where the gap between them
// is below 256 bytes, the arena's alignment: the gap is all-reduced too, harmlessly), in slot
// order; `ready` is the largest `ready` of its slots; `slots` indexes the input.
struct BucketRun {
  uintptr_t address = 0;
  size_t bytes = 0;
  int group = 0;
};
struct Bucket {
  std::vector<int> slots;
  std::vector<BucketRun> runs;
  size_t bytes = 0;  // the sum of its slots' bytes
  int ready = 0;
};

// Groups slots, taken in order of `ready` (stable for ties; the order the backward finishes
// them), into buckets of at least `bucket_bytes` each (the last may be smaller), closing a bucket
// as soon as it reaches that size, as PyTorch's DDP does with bucket_cap_mb (25 MiB); the first
// bucket is capped at `first_bucket_bytes` (DDP: 1 MiB) so the first all-reduce starts early.
// Every slot lands in exactly one bucket. bucket_bytes == 0: one bucket per slot. Buckets come
// out in order of `ready`.
std::vector<Bucket> plan_buckets(const std::vector<GradSlot>& slots, size_t bucket_bytes,
                                 size_t first_bucket_bytes);

// The report's figures for one (network, batch per GPU, precision). Times in ms per step.
struct ScalingInput {
  int world = 1;
  int batch_per_gpu = 1;
  double local_step_ms = 0;     // the step without any all-reduce, this GPU alone
  std::vector<double> step_ms;  // each rank's data-parallel step (median over repetitions)
  double serial_comm_ms = 0;    // the all-reduces alone, after the backward (not overlapped)
};
struct Scaling {
  double global_img_s = 0;     // world * batch / the slowest rank's step
  double per_gpu_img_s = 0;    // global / world
  double local_img_s = 0;      // batch / local_step_ms: the one-GPU run
  double efficiency = 0;       // per_gpu / local (1 = perfect)
  double exposed_comm_ms = 0;  // slowest step - local step (>= 0): what the backward did not hide
  double hidden_fraction = 0;  // 1 - exposed / serial_comm_ms, clamped to [0, 1]; 0 if no comm
};
Scaling scaling(const ScalingInput& in);

}  // namespace cnnbench
