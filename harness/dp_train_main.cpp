// cnnbench_dp: data-parallel training over NCCL, one process per GPU (issue 11). Started by
// cnnbench_launch (or mpirun, or srun): every rank builds the same network with the same weights
// and the same synthetic batch, and steps with its gradients averaged across the ranks
// (harness/data_parallel.h). It times, per batch per GPU, three CUDA graphs on every rank:
// the step alone (no communication: the one-GPU run), the data-parallel step (all-reduces
// bucketed and overlapped with the backward) and the all-reduces alone; rank 0 writes the global
// and per-GPU images/sec, the scaling efficiency and the communication the backward did not hide.
// --verify checks the step instead: each rank trains on its slice of one global batch, and the
// averaged gradients must equal the mean of the one-GPU gradients of every slice (and, for a
// network without BatchNorm, the one-GPU step on the whole batch), with the weights after the
// step identical on every rank.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <random>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "harness/check.h"
#include "harness/context.h"
#include "harness/data_parallel.h"
#include "harness/device.h"
#include "harness/dist.h"
#include "harness/hash.h"
#include "harness/session.h"
#include "kernels/timing.h"
#include "networks/registry.h"
#include "networks/train_model.h"
#include "networks/train_plan.h"
#include "networks/weights.h"

namespace cnnbench {
namespace {

const char* kUsage =
    R"(usage: cnnbench_launch --nproc=G -- cnnbench_dp --network=NAME [--batches=64,256]
                           [--precision=fp16|bf16|tf32|fp32] [--optimizer=sgd|adam] [--lr=X]
                           [--steps=N] [--repetitions=N] [--warmup=N] [--bucket_mb=X]
                           [--first_bucket_mb=X] [--overlap=1|0] [--engine=autotune|heuristic]
                           [--input_size=N] [--num_classes=N] [--seed=N] [--json=FILE]
       cnnbench_launch --nproc=G -- cnnbench_dp --network=NAME --verify [--batches=N]
                           [--precision=fp32|tf32] [--tolerance=X] [--json=FILE]
  --precision defaults to fp16 for timing and to fp32 for --verify.
  One process per GPU (rank r on GPU local_rank), NCCL over every rank; a lone process (no
  launcher) is a world of one. Ranks find each other through CNNBENCH_MASTER_ADDR and
  CNNBENCH_MASTER_PORT (rank 0 listens there); NCCL_NVLS_ENABLE=0 is always set.
  Timing (per batch per GPU): the step alone, the data-parallel step and the all-reduces alone,
  each a CUDA graph of --steps replays timed by events, --repetitions times, every rank at once;
  rank 0 writes global and per-GPU img/s, the scaling efficiency (per-GPU img/s over the step
  alone), the exposed communication (data-parallel step minus the step alone) and the part of
  the all-reduces hidden behind the backward.
  --bucket_mb  gradients per all-reduce bucket (PyTorch DDP's bucket_cap_mb, 25); the first
            bucket is --first_bucket_mb (1). --overlap=0 all-reduces after the whole backward.
  --verify  the step checked, not timed (fp32 or tf32, dropout off): rank r trains on slice r of
            one global batch of G x N images; rank 0 compares the averaged gradients with the mean
            of one-GPU gradients of every slice, and, where the network has no BatchNorm, the
            gradients and the weights after the step with one GPU's step on the whole batch;
            every rank's weights after the step must be bitwise the same. Exit 1 on a mismatch.
  --json    rank 0's results, rewritten after every batch (written nowhere else)
  --rendezvous_check  no GPU: every rank gets rank 0's random bytes over the rendezvous and
            prints a line (its rank, where it read it from, a hash of the bytes)
)";

std::vector<int> parse_batches(const std::string& s) {
  std::vector<int> out;
  size_t at = 0;
  while (at <= s.size()) {
    const size_t comma = std::min(s.find(',', at), s.size());
    const long b = parse_count(s.substr(at, comma - at), "batches");
    if (b < 1 || b > 65536) throw UserError("--batches takes whole numbers from 1 to 65536");
    out.push_back(int(b));
    at = comma + 1;
  }
  return out;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0 : (n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]));
}

// This rank's NCCL communicator, its stream and a device scalar for barriers and gathers.
struct Comm {
  RankInfo me;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  double* scratch = nullptr;  // world doubles
  char* text = nullptr;       // world x kText bytes
  static constexpr size_t kText = 256;
  std::vector<std::string> ranks;  // each rank's "host GPU-name UUID", gathered at setup
  ~Comm() {
    if (scratch) cudaFree(scratch);
    if (text) cudaFree(text);
    if (comm) ncclCommDestroy(comm);
    if (stream) cudaStreamDestroy(stream);
  }
  // Every rank's `v`, in rank order.
  std::vector<double> gather(double v) {
    CNN_CHECK_CUDA(
        cudaMemcpyAsync(scratch + me.rank, &v, sizeof v, cudaMemcpyHostToDevice, stream));
    CNN_CHECK_NCCL(ncclAllGather(scratch + me.rank, scratch, 1, ncclFloat64, comm, stream));
    std::vector<double> out(size_t(me.world));
    CNN_CHECK_CUDA(cudaMemcpyAsync(out.data(), scratch, out.size() * sizeof(double),
                                   cudaMemcpyDeviceToHost, stream));
    CNN_CHECK_CUDA(cudaStreamSynchronize(stream));
    return out;
  }
  void barrier() { gather(0); }
  // Every rank's `s` (cut at kText - 1 bytes), in rank order.
  std::vector<std::string> gather_text(const std::string& s) {
    std::vector<char> mine(kText, 0);
    std::memcpy(mine.data(), s.data(), std::min(s.size(), kText - 1));
    char* slot = text + size_t(me.rank) * kText;
    CNN_CHECK_CUDA(cudaMemcpyAsync(slot, mine.data(), kText, cudaMemcpyHostToDevice, stream));
    CNN_CHECK_NCCL(ncclAllGather(slot, text, kText, ncclChar, comm, stream));
    std::vector<char> all(kText * size_t(me.world));
    CNN_CHECK_CUDA(cudaMemcpyAsync(all.data(), text, all.size(), cudaMemcpyDeviceToHost, stream));
    CNN_CHECK_CUDA(cudaStreamSynchronize(stream));
    std::vector<std::string> out;
    for (int r = 0; r < me.world; ++r) out.emplace_back(all.data() + size_t(r) * kText);
    return out;
  }
};

[[noreturn]] void die(const Comm& c, const char* what, int code) {
  std::fflush(stdout);
  if (c.me.world > 1)
    std::fprintf(stderr, "cnnbench_dp: rank %d of %d: %s\n", c.me.rank, c.me.world, what);
  else
    std::fprintf(stderr, "cnnbench_dp: %s\n", what);
  std::fflush(stderr);
  std::_Exit(code);
}

void setup(Comm& c, double timeout_s) {
  c.me = rank_info_from_env();
  const char* nvls = std::getenv("NCCL_NVLS_ENABLE");
  if (nvls && std::string(nvls) != "0")
    std::fprintf(stderr,
                 "cnnbench_dp: NCCL_NVLS_ENABLE was '%s': set to 0 (NVLink multicast off)\n", nvls);
  setenv("NCCL_NVLS_ENABLE", "0", 1);
  require_cuda_device();
  int devices = 0;
  CNN_CHECK_CUDA(cudaGetDeviceCount(&devices));
  if (c.me.local_rank >= devices)
    throw UserError("rank " + std::to_string(c.me.rank) + " is local rank " +
                    std::to_string(c.me.local_rank) + ", but this host shows " +
                    std::to_string(devices) + " GPU(s): start at most that many ranks per host");
  CNN_CHECK_CUDA(cudaSetDevice(c.me.local_rank));
  ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
  if (c.me.rank == 0) CNN_CHECK_NCCL(ncclGetUniqueId(&id));
  const std::vector<uint8_t> mine(reinterpret_cast<uint8_t*>(&id),
                                  reinterpret_cast<uint8_t*>(&id) + sizeof id);
  const std::vector<uint8_t> got =
      rendezvous_broadcast(c.me, rendezvous_from_env(), mine, timeout_s);
  if (got.size() != sizeof id)
    throw UserError("rendezvous: rank 0 sent " + std::to_string(got.size()) +
                    " bytes, not an NCCL id of " + std::to_string(sizeof id));
  std::memcpy(&id, got.data(), sizeof id);
  CNN_CHECK_NCCL(ncclCommInitRank(&c.comm, c.me.world, id, c.me.rank));
  CNN_CHECK_CUDA(cudaStreamCreateWithFlags(&c.stream, cudaStreamNonBlocking));
  CNN_CHECK_CUDA(cudaMalloc(&c.scratch, sizeof(double) * size_t(c.me.world)));
  CNN_CHECK_CUDA(cudaMalloc(&c.text, Comm::kText * size_t(c.me.world)));
  // Which GPU of which host each rank drives, for the context (a mixed host shows here).
  char host[128] = {0};
  gethostname(host, sizeof host - 1);
  const DeviceInfo d = discover_device(c.me.local_rank);
  c.ranks = c.gather_text(std::string(host) + " " + d.name + " " + d.uuid);
}

// --rendezvous_check: the launch without a GPU. Every rank reads its place from the environment
// and gets rank 0's 128 random bytes over the TCP rendezvous (as NCCL's id travels), then prints
// one line; a test compares the lines of all ranks.
int rendezvous_check() {
  const RankInfo me = rank_info_from_env();
  std::vector<uint8_t> blob(128);
  std::random_device rd;
  for (uint8_t& b : blob) b = uint8_t(rd());
  const std::vector<uint8_t> got = rendezvous_broadcast(me, rendezvous_from_env(), blob, 30);
  const uint64_t h = fnv1a(got.data(), got.size());
  std::printf("rendezvous: rank %d of %d (local %d of %d, from %s): %zu bytes, fnv %016llx\n",
              me.rank, me.world, me.local_rank, me.local_world, me.source.c_str(), got.size(),
              static_cast<unsigned long long>(h));
  return 0;
}

// A step captured in a CUDA graph, timed by events over `steps` replays.
struct Captured {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  Captured(const std::function<void(cudaStream_t)>& f, cudaStream_t s) {
    capture_graph(f, s, &graph, &exec);
  }
  ~Captured() {
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
  }
  double ms(cudaStream_t s, int steps, cudaEvent_t a, cudaEvent_t b) {
    CNN_CHECK_CUDA(cudaEventRecord(a, s));
    for (int i = 0; i < steps; ++i) CNN_CHECK_CUDA(cudaGraphLaunch(exec, s));
    CNN_CHECK_CUDA(cudaEventRecord(b, s));
    CNN_CHECK_CUDA(cudaEventSynchronize(b));
    float ms = 0;
    CNN_CHECK_CUDA(cudaEventElapsedTime(&ms, a, b));
    return double(ms) / steps;
  }
};

struct Settings {
  std::string network;
  int input_size = 0, num_classes = 1000;
  std::vector<int> batches{64, 256};
  TrainOptions train;
  DataParallelOptions dp;
  int steps = 20, repetitions = 9, warmup = 5;
  uint64_t seed = 1;
  double tolerance = 0;  // --verify; 0: by precision
  std::string json_path;
};

nlohmann::ordered_json context_of(const Comm& c, const Settings& s) {
  nlohmann::ordered_json j;
  for (const auto& [k, v] : context_entries(discover_device(c.me.local_rank))) j[k] = v;
  j["nccl_loaded"] = nccl_version_loaded();
  j["nccl_compiled"] = nccl_version_compiled();
  j["world_size"] = c.me.world;
  j["local_world_size"] = c.me.local_world;
  j["rank_source"] = c.me.source;
  j["ranks"] = c.ranks;  // rank r: "host GPU-name UUID"
  const char* nvls = std::getenv("NCCL_NVLS_ENABLE");
  j["nccl_nvls_enable"] = nvls ? nvls : "";
  j["bucket_bytes"] = s.dp.bucket_bytes;
  j["first_bucket_bytes"] = s.dp.first_bucket_bytes;
  j["overlap"] = s.dp.overlap;
  return j;
}

void write_json(const std::string& path, const nlohmann::ordered_json& doc) {
  if (path.empty()) return;
  std::ofstream f(path);
  f << doc.dump(1) << "\n";
  if (!f) throw UserError("--json: cannot write " + path);
}

int bench(Comm& c, const Settings& s) {
  const Graph g = build_training_network(s.network, s.input_size, s.num_classes);
  const HostWeights w = random_weights(g, s.seed);
  GpuContext ctx;
  nlohmann::ordered_json doc;
  doc["context"] = context_of(c, s);
  doc["results"] = nlohmann::ordered_json::array();
  cudaEvent_t a = nullptr, b = nullptr;
  CNN_CHECK_CUDA(cudaEventCreate(&a));
  CNN_CHECK_CUDA(cudaEventCreate(&b));
  for (int batch : s.batches) {
    TrainOptions t = s.train;
    t.batch = batch;
    const auto t0 = std::chrono::steady_clock::now();
    auto model = std::make_unique<TrainModel>(ctx, g, w, t);
    DataParallel dp(*model, c.comm, c.me.world, s.dp);
    // One eager step and all-reduce first, so the captures meet a model and communicator that
    // have run (NCCL connects peers lazily; the step's first run settles its buffers).
    dp.step(c.stream);
    dp.allreduce_only(c.stream);
    CNN_CHECK_CUDA(cudaStreamSynchronize(c.stream));
    Captured local([&](cudaStream_t st) { model->step(st); }, c.stream);
    Captured data_parallel([&](cudaStream_t st) { dp.step(st); }, c.stream);
    Captured comm_only([&](cudaStream_t st) { dp.allreduce_only(st); }, c.stream);
    const double build_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    c.barrier();
    for (int i = 0; i < s.warmup; ++i) {
      local.ms(c.stream, 1, a, b);
      data_parallel.ms(c.stream, 1, a, b);
      comm_only.ms(c.stream, 1, a, b);
    }
    std::vector<double> t_local, t_dp, t_comm;
    for (int r = 0; r < s.repetitions; ++r) {
      c.barrier();
      t_local.push_back(local.ms(c.stream, s.steps, a, b));
      c.barrier();
      t_dp.push_back(data_parallel.ms(c.stream, s.steps, a, b));
      c.barrier();
      t_comm.push_back(comm_only.ms(c.stream, s.steps, a, b));
    }
    const float loss = model->loss();
    const std::vector<double> locals = c.gather(median(t_local));
    const std::vector<double> steps = c.gather(median(t_dp));
    const std::vector<double> comms = c.gather(median(t_comm));
    const std::vector<double> losses = c.gather(loss);
    const std::vector<double> used = c.gather(double(device_used_bytes()));
    ScalingInput in;
    in.world = c.me.world;
    in.batch_per_gpu = batch;
    in.local_step_ms = *std::max_element(locals.begin(), locals.end());
    in.step_ms = steps;
    in.serial_comm_ms = *std::max_element(comms.begin(), comms.end());
    const Scaling sc = scaling(in);
    if (c.me.rank == 0) {
      nlohmann::ordered_json row;
      row["network"] = g.name();
      row["precision"] = precision_name(t.precision);
      row["optimizer"] = optimizer_name(t.optimizer);
      row["batch_per_gpu"] = batch;
      row["world_size"] = c.me.world;
      row["global_batch"] = batch * c.me.world;
      row["global_img_per_s"] = sc.global_img_s;
      row["per_gpu_img_per_s"] = sc.per_gpu_img_s;
      row["one_gpu_img_per_s"] = sc.local_img_s;
      row["scaling_efficiency"] = sc.efficiency;
      row["step_ms"] = steps;
      row["one_gpu_step_ms"] = locals;
      row["allreduce_ms"] = comms;
      row["exposed_comm_ms"] = sc.exposed_comm_ms;
      row["hidden_comm_fraction"] = sc.hidden_fraction;
      row["gradient_bytes"] = dp.gradient_bytes();
      row["buckets"] = dp.buckets().size();
      // Bus bandwidth of the all-reduces alone, as nccl-tests counts it: 2 (G - 1) / G bytes.
      row["allreduce_bus_gb_per_s"] = in.serial_comm_ms > 0 ? 2.0 * (c.me.world - 1) / c.me.world *
                                                                  double(dp.gradient_bytes()) /
                                                                  (in.serial_comm_ms * 1e-3) / 1e9
                                                            : 0.0;
      row["steps_per_timing"] = s.steps;
      row["repetitions"] = s.repetitions;
      row["loss"] = losses;
      row["device_used_bytes"] = used;
      row["build_s"] = build_s;
      doc["results"].push_back(row);
      write_json(s.json_path, doc);
      std::printf(
          "%s %s batch %d x %d GPU(s): %.0f img/s (%.0f per GPU; one GPU alone %.0f), "
          "efficiency %.3f, all-reduce %.2f ms alone, %.2f ms exposed, %zu buckets of %.1f MB\n",
          g.name().c_str(), precision_name(t.precision), batch, c.me.world, sc.global_img_s,
          sc.per_gpu_img_s, sc.local_img_s, sc.efficiency, in.serial_comm_ms, sc.exposed_comm_ms,
          dp.buckets().size(), dp.gradient_bytes() / 1e6);
      std::fflush(stdout);
    }
    for (double l : losses)
      if (!std::isfinite(l)) throw std::runtime_error("a rank's training loss is not finite");
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return 0;
}

// ---- --verify ----

double rel_l2(const std::vector<float>& a, const std::vector<double>& ref) {
  double d = 0, n = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    d += (a[i] - ref[i]) * (a[i] - ref[i]);
    n += ref[i] * ref[i];
  }
  return n > 0 ? std::sqrt(d / n) : std::sqrt(d);
}

bool has_batchnorm(const Graph& g) {
  for (const Node& n : g.nodes())
    if (n.kind == OpKind::BatchNorm) return true;
  return false;
}

int verify(Comm& c, const Settings& s) {
  Graph g = build_training_network(s.network, s.input_size, s.num_classes);
  g.set_dropout_p(0);
  const HostWeights w = random_weights(g, s.seed);
  const int N = s.batches.front(), W = c.me.world;
  TrainOptions t = s.train;
  t.batch = N;
  const double tol = s.tolerance > 0 ? s.tolerance : (t.precision == Precision::TF32 ? 2e-2 : 1e-4);
  // One global batch, the same on every rank; rank r takes images [r N, (r + 1) N).
  const Dims d = g.node(g.input_id()).out;
  const size_t image = size_t(d.c) * d.h * d.w;
  std::mt19937_64 rng(s.seed + 7);
  std::uniform_real_distribution<float> uni(-1.f, 1.f);
  std::vector<float> images(image * size_t(N) * size_t(W));
  for (float& v : images) v = uni(rng);
  const int classes = g.node(g.output()).out.c;
  std::vector<int> labels(size_t(N) * size_t(W));
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = int((i * 7 + 3) % size_t(classes));
  auto slice_images = [&](int r, int n) {
    return std::vector<float>(
        images.begin() + ptrdiff_t(image * size_t(r) * size_t(N)),
        images.begin() + ptrdiff_t(image * (size_t(r) * size_t(N) + size_t(n))));
  };
  auto slice_labels = [&](int r, int n) {
    return std::vector<int>(labels.begin() + ptrdiff_t(size_t(r) * size_t(N)),
                            labels.begin() + ptrdiff_t(size_t(r) * size_t(N) + size_t(n)));
  };

  // Deterministic engines only, in the step and in both references: a nondeterministic filter
  // gradient (atomics) departs from itself by more than the tolerance (call 69: AlexNet's
  // features.3.weight, 2.2e-4 between two runs on the same slice).
  GpuContext ctx;
  ctx.excluded.push_back(kNondeterministic);
  TrainModel m(ctx, g, w, t);
  DataParallel dp(m, c.comm, W, s.dp);
  m.set_input(slice_images(c.me.rank, N));
  m.set_labels(slice_labels(c.me.rank, N));
  dp.step(ctx.stream);
  CNN_CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
  const std::vector<std::string> names = m.trainable_names();
  uint64_t h = kFnvOffset;
  for (const std::string& n : names) {
    const std::vector<float> v = m.parameter(n);
    h = fnv1a(v.data(), v.size() * sizeof(float), h);
  }
  // The hash as two exact doubles (32 bits each) per rank.
  const std::vector<double> hi = c.gather(double(h >> 32)), lo = c.gather(double(h & 0xffffffffu));
  const float loss = m.loss();
  const std::vector<double> losses = c.gather(loss);

  int failed = 0;
  nlohmann::ordered_json doc;
  if (c.me.rank == 0) {
    doc["context"] = context_of(c, s);
    nlohmann::ordered_json r;
    r["network"] = g.name();
    r["precision"] = precision_name(t.precision);
    r["batch_per_gpu"] = N;
    r["world_size"] = W;
    r["tolerance"] = tol;
    r["engines"] = "deterministic only (cuDNN's nondeterministic engines excluded)";
    r["losses"] = losses;
    r["buckets"] = dp.buckets().size();
    r["gradient_bytes"] = dp.gradient_bytes();
    bool same = true;
    for (int k = 1; k < W; ++k) same = same && hi[k] == hi[0] && lo[k] == lo[0];
    r["weights_identical_on_all_ranks"] = same;
    if (!same) {
      ++failed;
      std::fprintf(stderr,
                   "cnnbench_dp --verify: the weights after the step differ between ranks\n");
    }
    // The mean of one-GPU gradients over the slices, on this GPU.
    std::map<std::string, std::vector<double>> mean;
    {
      GpuContext rctx;
      rctx.excluded = ctx.excluded;
      TrainModel ref(rctx, g, w, t);
      for (int k = 0; k < W; ++k) {
        ref.set_input(slice_images(k, N));
        ref.set_labels(slice_labels(k, N));
        ref.forward_backward(rctx.stream);
        CNN_CHECK_CUDA(cudaStreamSynchronize(rctx.stream));
        for (const std::string& n : names) {
          const std::vector<float> gr = ref.gradient(n);
          std::vector<double>& acc = mean[n];
          acc.resize(gr.size(), 0.0);
          for (size_t i = 0; i < gr.size(); ++i) acc[i] += double(gr[i]) / W;
        }
      }
    }
    double worst = 0;
    std::string worst_name;
    for (const std::string& n : names) {
      const double e = rel_l2(m.gradient(n), mean[n]);
      if (!(e <= worst)) worst = e, worst_name = n;
    }
    r["gradient_vs_slices_max_rel_l2"] = worst;
    r["gradient_vs_slices_worst"] = worst_name;
    if (!(worst <= tol)) {
      ++failed;
      std::fprintf(stderr,
                   "cnnbench_dp --verify: averaged gradient of %s departs from the mean of the "
                   "slices' one-GPU gradients by %.3g (tolerance %.3g)\n",
                   worst_name.c_str(), worst, tol);
    }
    // Without BatchNorm the loss's mean over the whole batch is the mean of the slices' means:
    // the data-parallel step is one GPU's step on the concatenated batch.
    if (!has_batchnorm(g)) {
      GpuContext wctx;
      wctx.excluded = ctx.excluded;
      TrainOptions tw = t;
      tw.batch = N * W;
      TrainModel whole(wctx, g, w, tw);
      whole.set_input(images);
      whole.set_labels(labels);
      whole.step(wctx.stream);
      CNN_CHECK_CUDA(cudaStreamSynchronize(wctx.stream));
      double gworst = 0, wworst = 0;
      for (const std::string& n : names) {
        const std::vector<float> gw = whole.gradient(n), pw = whole.parameter(n);
        gworst = std::max(gworst, rel_l2(m.gradient(n), std::vector<double>(gw.begin(), gw.end())));
        wworst =
            std::max(wworst, rel_l2(m.parameter(n), std::vector<double>(pw.begin(), pw.end())));
      }
      r["gradient_vs_whole_batch_max_rel_l2"] = gworst;
      r["weights_vs_whole_batch_max_rel_l2"] = wworst;
      if (!(gworst <= tol && wworst <= tol)) {
        ++failed;
        std::fprintf(stderr,
                     "cnnbench_dp --verify: against one GPU on the whole batch of %d: gradients "
                     "%.3g, weights %.3g (tolerance %.3g)\n",
                     N * W, gworst, wworst, tol);
      }
    } else {
      r["gradient_vs_whole_batch_max_rel_l2"] = nullptr;  // BatchNorm: per-rank statistics
    }
    r["passed"] = failed == 0;
    doc["verify"] = r;
    write_json(s.json_path, doc);
    std::printf("%s\n", r.dump().c_str());
  }
  const std::vector<double> verdict = c.gather(double(failed));
  return verdict[0] > 0 ? 1 : 0;
}

int run(int argc, char** argv) {
  Settings s;
  std::string batches_s, precision,
      optimizer = "sgd", lr_s = "0.1", engine = "autotune", steps_s = "20", reps_s = "9",
      warmup_s = "5", bucket_s = "25", first_s = "1", overlap_s = "1", size_s = "0",
      classes_s = "1000", seed_s = "1", tol_s = "0", timeout_s = "120";
  bool verify_mode = false, precision_given = false;
  for (int i = 1; i < argc; ++i) {
    if (take_flag(i, argc, argv, "help", nullptr)) {
      std::cout << kUsage;
      return 0;
    }
    if (take_flag(i, argc, argv, "verify", nullptr)) {
      verify_mode = true;
      continue;
    }
    if (take_flag(i, argc, argv, "rendezvous_check", nullptr)) return rendezvous_check();
    if (take_flag(i, argc, argv, "precision", &precision)) {
      precision_given = true;
      continue;
    }
    if (take_flag(i, argc, argv, "network", &s.network) ||
        take_flag(i, argc, argv, "batches", &batches_s) ||
        take_flag(i, argc, argv, "optimizer", &optimizer) ||
        take_flag(i, argc, argv, "lr", &lr_s) || take_flag(i, argc, argv, "engine", &engine) ||
        take_flag(i, argc, argv, "steps", &steps_s) ||
        take_flag(i, argc, argv, "repetitions", &reps_s) ||
        take_flag(i, argc, argv, "warmup", &warmup_s) ||
        take_flag(i, argc, argv, "bucket_mb", &bucket_s) ||
        take_flag(i, argc, argv, "first_bucket_mb", &first_s) ||
        take_flag(i, argc, argv, "overlap", &overlap_s) ||
        take_flag(i, argc, argv, "input_size", &size_s) ||
        take_flag(i, argc, argv, "num_classes", &classes_s) ||
        take_flag(i, argc, argv, "seed", &seed_s) ||
        take_flag(i, argc, argv, "tolerance", &tol_s) ||
        take_flag(i, argc, argv, "rendezvous_timeout", &timeout_s) ||
        take_flag(i, argc, argv, "json", &s.json_path))
      continue;
    throw UserError(std::string("unknown flag '") + argv[i] + "' (see --help)");
  }
  if (s.network.empty()) throw UserError("--network is required (see --help)");
  s.network = find_network(s.network).name;
  if (!batches_s.empty()) s.batches = parse_batches(batches_s);
  if (verify_mode && batches_s.empty()) s.batches = {4};
  if (verify_mode && s.batches.size() != 1)
    throw UserError("--verify takes one batch per GPU, not '" + batches_s + "'");
  // Timing defaults to fp16; --verify, which checks unscaled gradients, to fp32.
  if (!precision_given) precision = verify_mode ? "fp32" : "fp16";
  s.train.precision = parse_precision(precision);
  if (verify_mode && s.train.precision != Precision::FP32 && s.train.precision != Precision::TF32)
    throw UserError("--verify checks fp32 and tf32 steps (gradients unscaled), not '" + precision +
                    "'");
  if (optimizer != "sgd" && optimizer != "adam")
    throw UserError("--optimizer takes sgd or adam, not '" + optimizer + "'");
  s.train.optimizer = optimizer == "adam" ? Optimizer::Adam : Optimizer::SGD;
  // The same gradient types on every rank (their all-reduces must match call for call), in
  // fp32 as DDP all-reduces them under autocast.
  s.train.fp32_weight_gradients = true;
  s.train.lr = parse_number(lr_s, "lr");
  s.train.engine = parse_engine_mode(engine);
  s.steps = int(parse_count(steps_s, "steps"));
  s.repetitions = int(parse_count(reps_s, "repetitions"));
  s.warmup = int(parse_count(warmup_s, "warmup"));
  if (s.steps < 1 || s.repetitions < 1)
    throw UserError("--steps and --repetitions must be at least 1");
  const double bucket_mb = parse_number(bucket_s, "bucket_mb"),
               first_mb = parse_number(first_s, "first_bucket_mb");
  if (bucket_mb < 0 || first_mb < 0)
    throw UserError("--bucket_mb and --first_bucket_mb must be >= 0");
  s.dp.bucket_bytes = size_t(bucket_mb * (1 << 20));
  s.dp.first_bucket_bytes = size_t(first_mb * (1 << 20));
  if (overlap_s != "0" && overlap_s != "1")
    throw UserError("--overlap takes 1 or 0, not '" + overlap_s + "'");
  s.dp.overlap = overlap_s == "1";
  s.input_size = int(parse_count(size_s, "input_size"));
  s.num_classes = int(parse_count(classes_s, "num_classes"));
  s.seed = uint64_t(parse_count(seed_s, "seed"));
  s.tolerance = parse_number(tol_s, "tolerance");
  const double timeout = parse_number(timeout_s, "rendezvous_timeout");
  if (timeout <= 0) throw UserError("--rendezvous_timeout must be positive");
  // The graph now, so a bad network or size fails before any rank waits for another.
  build_training_network(s.network, s.input_size, s.num_classes);
  if (!s.json_path.empty() && rank_info_from_env().rank == 0) {  // only rank 0 writes it
    std::ofstream probe(s.json_path, std::ios::app);
    if (!probe) throw UserError("--json: cannot write " + s.json_path);
  }
  // From here a failure on one rank must not wait for the others: its message goes out with its
  // rank, and the process ends at once (cnnbench_launch then stops the rest). Unwinding to
  // run_main would destroy the communicator, which waits for every rank of the node (NCCL:
  // ncclCommDestroy is an intra-node collective), and they may be waiting for this one.
  Comm* c = new Comm;
  int rc = 0;
  try {
    setup(*c, timeout);
    rc = verify_mode ? verify(*c, s) : bench(*c, s);
  } catch (const UserError& e) {
    die(*c, e.what(), 2);
  } catch (const std::exception& e) {
    die(*c, e.what(), 1);
  }
  delete c;  // every rank gets here together
  return rc;
}

}  // namespace
}  // namespace cnnbench

int main(int argc, char** argv) {
  return cnnbench::run_main("cnnbench_dp", cnnbench::run, argc, argv);
}
