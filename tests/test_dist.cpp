// Data-parallel training's host side (harness/dist.h): ranks from the environment, the TCP
// rendezvous (ranks as threads on 127.0.0.1), the bucket plan and the scaling figures.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "harness/check.h"
#include "harness/dist.h"

using namespace cnnbench;

namespace {

// The environment of a test: a plain function pointer (EnvLookup) reading a map.
std::map<std::string, std::string> g_env;
const char* fake_env(const char* name) {
  const auto it = g_env.find(name);
  return it == g_env.end() ? nullptr : it->second.c_str();
}
RankInfo info_of(const std::map<std::string, std::string>& env) {
  g_env = env;
  return rank_info_from_env(fake_env);
}
// The UserError's message of rank_info_from_env on `env` ("" when it throws none).
std::string info_error(const std::map<std::string, std::string>& env) {
  try {
    info_of(env);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

#define EXPECT_CONTAINS(text, part)                          \
  EXPECT_NE(std::string(text).find(part), std::string::npos) \
      << "'" << (text) << "' lacks '" << (part) << "'"

void expect_rank(const RankInfo& r, const char* source, int rank, int world, int local_rank,
                 int local_world) {
  EXPECT_EQ(r.source, source);
  EXPECT_EQ(r.rank, rank);
  EXPECT_EQ(r.world, world);
  EXPECT_EQ(r.local_rank, local_rank);
  EXPECT_EQ(r.local_world, local_world);
}

}  // namespace

TEST(DistRankInfo, EachFamily) {
  RankInfo r = info_of({{"CNNBENCH_RANK", "5"},
                        {"CNNBENCH_WORLD_SIZE", "8"},
                        {"CNNBENCH_LOCAL_RANK", "1"},
                        {"CNNBENCH_LOCAL_WORLD_SIZE", "4"}});
  expect_rank(r, "cnnbench", 5, 8, 1, 4);

  r = info_of({{"OMPI_COMM_WORLD_RANK", "6"},
               {"OMPI_COMM_WORLD_SIZE", "16"},
               {"OMPI_COMM_WORLD_LOCAL_RANK", "6"},
               {"OMPI_COMM_WORLD_LOCAL_SIZE", "8"}});
  expect_rank(r, "openmpi", 6, 16, 6, 8);

  r = info_of(
      {{"PMI_RANK", "3"}, {"PMI_SIZE", "4"}, {"MPI_LOCALRANKID", "1"}, {"MPI_LOCALNRANKS", "2"}});
  expect_rank(r, "pmi", 3, 4, 1, 2);

  r = info_of({{"SLURM_PROCID", "2"},
               {"SLURM_NTASKS", "3"},
               {"SLURM_LOCALID", "0"},
               {"SLURM_NTASKS_PER_NODE", "1"}});
  expect_rank(r, "slurm", 2, 3, 0, 1);
}

TEST(DistRankInfo, NoneSetIsSingle) {
  const RankInfo r = info_of({{"SOMETHING_ELSE", "3"}, {"CNNBENCH_WORLD_SIZE", "4"}});
  expect_rank(r, "single", 0, 1, 0, 1);
}

TEST(DistRankInfo, FirstFamilyWithItsRankWins) {
  // Ours over Open MPI's over PMI's over Slurm's; a family's size alone does not count.
  const std::map<std::string, std::string> all = {{"CNNBENCH_RANK", "1"},
                                                  {"CNNBENCH_WORLD_SIZE", "2"},
                                                  {"OMPI_COMM_WORLD_RANK", "2"},
                                                  {"OMPI_COMM_WORLD_SIZE", "3"},
                                                  {"PMI_RANK", "3"},
                                                  {"PMI_SIZE", "4"},
                                                  {"SLURM_PROCID", "4"},
                                                  {"SLURM_NTASKS", "5"}};
  EXPECT_EQ(info_of(all).source, "cnnbench");
  EXPECT_EQ(info_of(all).rank, 1);
  auto env = all;
  env.erase("CNNBENCH_RANK");  // CNNBENCH_WORLD_SIZE alone: not our family
  EXPECT_EQ(info_of(env).source, "openmpi");
  EXPECT_EQ(info_of(env).rank, 2);
  env.erase("OMPI_COMM_WORLD_RANK");
  EXPECT_EQ(info_of(env).source, "pmi");
  EXPECT_EQ(info_of(env).world, 4);
  env.erase("PMI_RANK");
  EXPECT_EQ(info_of(env).source, "slurm");
  EXPECT_EQ(info_of(env).rank, 4);
  EXPECT_EQ(info_of(env).world, 5);
}

TEST(DistRankInfo, MissingLocalVariablesMeanOneHost) {
  RankInfo r = info_of({{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "4"}});
  EXPECT_EQ(r.local_rank, 3);
  EXPECT_EQ(r.local_world, 4);
  // Only the local rank: the local world is the world.
  r = info_of({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "1"}});
  EXPECT_EQ(r.local_rank, 1);
  EXPECT_EQ(r.local_world, 8);
}

TEST(DistRankInfo, ErrorsNameTheVariable) {
  std::string e = info_error({{"CNNBENCH_RANK", "x1"}, {"CNNBENCH_WORLD_SIZE", "4"}});
  EXPECT_CONTAINS(e, "CNNBENCH_RANK");
  EXPECT_CONTAINS(e, "'x1'");
  e = info_error({{"CNNBENCH_RANK", "-1"}, {"CNNBENCH_WORLD_SIZE", "4"}});
  EXPECT_CONTAINS(e, "CNNBENCH_RANK");
  EXPECT_CONTAINS(e, "'-1'");
  e = info_error({{"CNNBENCH_RANK", ""}, {"CNNBENCH_WORLD_SIZE", "4"}});
  EXPECT_CONTAINS(e, "CNNBENCH_RANK");
  e = info_error({{"CNNBENCH_RANK", "1.5"}, {"CNNBENCH_WORLD_SIZE", "4"}});
  EXPECT_CONTAINS(e, "'1.5'");
  e = info_error({{"CNNBENCH_RANK", "99999999999"}, {"CNNBENCH_WORLD_SIZE", "4"}});
  EXPECT_CONTAINS(e, "CNNBENCH_RANK");
  // World sizes >= 1.
  e = info_error({{"PMI_RANK", "0"}, {"PMI_SIZE", "0"}});
  EXPECT_CONTAINS(e, "PMI_SIZE");
  EXPECT_CONTAINS(e, "'0'");
  e = info_error({{"PMI_RANK", "0"}, {"PMI_SIZE", "2"}, {"MPI_LOCALNRANKS", "0"}});
  EXPECT_CONTAINS(e, "MPI_LOCALNRANKS");
  e = info_error({{"PMI_RANK", "0"}, {"PMI_SIZE", "2"}, {"MPI_LOCALRANKID", "a"}});
  EXPECT_CONTAINS(e, "MPI_LOCALRANKID");
  // rank >= world.
  e = info_error({{"SLURM_PROCID", "4"}, {"SLURM_NTASKS", "4"}});
  EXPECT_CONTAINS(e, "SLURM_PROCID=4");
  EXPECT_CONTAINS(e, "SLURM_NTASKS=4");
  // local_rank >= local_world.
  e = info_error({{"OMPI_COMM_WORLD_RANK", "2"},
                  {"OMPI_COMM_WORLD_SIZE", "8"},
                  {"OMPI_COMM_WORLD_LOCAL_RANK", "2"},
                  {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}});
  EXPECT_CONTAINS(e, "OMPI_COMM_WORLD_LOCAL_RANK=2");
  EXPECT_CONTAINS(e, "OMPI_COMM_WORLD_LOCAL_SIZE=2");
  // A rank without its size.
  e = info_error({{"OMPI_COMM_WORLD_RANK", "1"}});
  EXPECT_CONTAINS(e, "OMPI_COMM_WORLD_RANK");
  EXPECT_CONTAINS(e, "OMPI_COMM_WORLD_SIZE");
  // An error in the winning family is not skipped for a later, valid one.
  e = info_error({{"CNNBENCH_RANK", "7"},
                  {"CNNBENCH_WORLD_SIZE", "2"},
                  {"SLURM_PROCID", "0"},
                  {"SLURM_NTASKS", "1"}});
  EXPECT_CONTAINS(e, "CNNBENCH_RANK=7");
}

TEST(DistRankInfo, ProcessEnvironment) {
  // The getenv overload reads the same variables (this test sets ours and restores them).
  const char* keep = std::getenv("CNNBENCH_RANK");
  const std::string kept = keep ? keep : "";
  const char* keep_w = std::getenv("CNNBENCH_WORLD_SIZE");
  const std::string kept_w = keep_w ? keep_w : "";
  setenv("CNNBENCH_RANK", "2", 1);
  setenv("CNNBENCH_WORLD_SIZE", "3", 1);
  const RankInfo r = rank_info_from_env();
  if (keep)
    setenv("CNNBENCH_RANK", kept.c_str(), 1);
  else
    unsetenv("CNNBENCH_RANK");
  if (keep_w)
    setenv("CNNBENCH_WORLD_SIZE", kept_w.c_str(), 1);
  else
    unsetenv("CNNBENCH_WORLD_SIZE");
  EXPECT_EQ(r.source, "cnnbench");
  EXPECT_EQ(r.rank, 2);
  EXPECT_EQ(r.world, 3);
}

TEST(DistRendezvous, FromEnvironment) {
  g_env = {};
  Rendezvous r = rendezvous_from_env(fake_env);
  EXPECT_EQ(r.addr, "127.0.0.1");
  EXPECT_EQ(r.port, 29511);
  g_env = {{"CNNBENCH_MASTER_ADDR", "node0.cluster"}, {"CNNBENCH_MASTER_PORT", "1234"}};
  r = rendezvous_from_env(fake_env);
  EXPECT_EQ(r.addr, "node0.cluster");
  EXPECT_EQ(r.port, 1234);
  g_env = {{"CNNBENCH_MASTER_PORT", "65535"}};
  EXPECT_EQ(rendezvous_from_env(fake_env).port, 65535);
  for (const char* bad : {"0", "65536", "-1", "http", "", "80x", "99999999999999999999"}) {
    g_env = {{"CNNBENCH_MASTER_PORT", bad}};
    try {
      rendezvous_from_env(fake_env);
      ADD_FAILURE() << "port '" << bad << "' accepted";
    } catch (const UserError& e) {
      EXPECT_CONTAINS(e.what(), "CNNBENCH_MASTER_PORT");
      EXPECT_CONTAINS(e.what(), std::string("'") + bad + "'");
    }
  }
}

namespace {

// A port of 127.0.0.1 that nothing listens on now (the kernel's pick for port 0).
int free_port() {
  const int s = ::socket(AF_INET, SOCK_STREAM, 0);
  EXPECT_GE(s, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  EXPECT_EQ(::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  socklen_t len = sizeof a;
  EXPECT_EQ(::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len), 0);
  ::close(s);
  return ntohs(a.sin_port);
}

std::vector<uint8_t> id_blob() {
  std::vector<uint8_t> b(128);
  for (size_t i = 0; i < b.size(); ++i) b[i] = uint8_t(i * 7 + 3);
  return b;
}

// One rank's outcome: what it returned or its UserError's message.
struct Outcome {
  std::vector<uint8_t> blob;
  std::string error;
  bool threw_other = false;
};

// Runs each (rank, world) as a thread against 127.0.0.1:port; rank 0's blob is id_blob(), the
// others' a decoy. Ranks other than 0 start `stagger` later than the one before (rank 0 last when
// `zero_last`, so the others retry their connects).
std::vector<Outcome> run_ranks(const std::vector<std::pair<int, int>>& ranks, int port,
                               double timeout_s, bool zero_last = false) {
  std::vector<Outcome> out(ranks.size());
  std::vector<std::thread> threads;
  const Rendezvous r{"127.0.0.1", port};
  for (size_t i = 0; i < ranks.size(); ++i) {
    threads.emplace_back([&, i] {
      RankInfo me;
      me.rank = ranks[i].first;
      me.world = ranks[i].second;
      me.local_rank = me.rank;
      me.local_world = me.world;
      if (zero_last && me.rank == 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));
      try {
        out[i].blob = rendezvous_broadcast(
            me, r, me.rank == 0 ? id_blob() : std::vector<uint8_t>(5, 0xee), timeout_s);
      } catch (const UserError& e) {
        out[i].error = e.what();
      } catch (...) {
        out[i].threw_other = true;
      }
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

}  // namespace

TEST(DistRendezvous, WorldOfOneNeedsNoSocket) {
  RankInfo me;  // rank 0 of 1
  const std::vector<uint8_t> blob = id_blob();
  // An address that cannot be reached: no socket is made, so no error.
  EXPECT_EQ(rendezvous_broadcast(me, Rendezvous{"192.0.2.1", 1}, blob, 0.1), blob);
}

TEST(DistRendezvous, FourRanksGetRankZerosBlob) {
  const int port = free_port();
  for (bool zero_last : {false, true}) {
    const std::vector<Outcome> out =
        run_ranks({{0, 4}, {1, 4}, {2, 4}, {3, 4}}, port, 10, zero_last);
    for (size_t i = 0; i < out.size(); ++i) {
      EXPECT_EQ(out[i].error, "") << "rank " << i;
      EXPECT_FALSE(out[i].threw_other);
      EXPECT_EQ(out[i].blob, id_blob()) << "rank " << i << (zero_last ? ", rank 0 last" : "");
    }
  }
}

TEST(DistRendezvous, DifferentWorldSizeIsAnError) {
  const int port = free_port();
  const std::vector<Outcome> out = run_ranks({{0, 2}, {1, 8}}, port, 5);
  EXPECT_EQ(out[0].error, "rendezvous: rank 1 says the world has 8 ranks, rank 0 has 2");
  // Rank 1 is told: rank 0 closed without the id.
  EXPECT_CONTAINS(out[1].error, "rendezvous: rank 1");
  EXPECT_CONTAINS(out[1].error, "closed the connection");
  EXPECT_TRUE(out[1].blob.empty());
}

TEST(DistRendezvous, DuplicateRankIsAnError) {
  const int port = free_port();
  const std::vector<Outcome> out = run_ranks({{0, 3}, {1, 3}, {1, 3}}, port, 5);
  EXPECT_EQ(out[0].error, "rendezvous: rank 1 connected twice");
  EXPECT_NE(out[1].error, "");
  EXPECT_NE(out[2].error, "");
}

TEST(DistRendezvous, RankZeroTimesOutNamingTheMissingRanks) {
  const int port = free_port();
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<Outcome> out = run_ranks({{0, 4}, {1, 4}}, port, 0.5);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(out[0].error, "rendezvous: rank 0 waited 0.5 s at 127.0.0.1:" + std::to_string(port) +
                              " for ranks 2, 3 of 4");
  EXPECT_NE(out[1].error, "");  // rank 0 gave up: no id
  EXPECT_LT(s, 5);
}

TEST(DistRendezvous, OtherRankTimesOutWithNobodyListening) {
  const int port = free_port();
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<Outcome> out = run_ranks({{3, 4}}, port, 0.5);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(out[0].error, "rendezvous: rank 3 could not reach 127.0.0.1:" + std::to_string(port) +
                              " in 0.5 s (is rank 0 running, and is CNNBENCH_MASTER_ADDR its "
                              "address?)");
  EXPECT_GE(s, 0.45);
  EXPECT_LT(s, 5);
}

TEST(DistRendezvous, PortInUseIsAnError) {
  // A listener of another program on the port: rank 0 cannot bind it.
  const int s = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(s, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(s, 1), 0);
  socklen_t len = sizeof a;
  ASSERT_EQ(::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len), 0);
  const int port = ntohs(a.sin_port);
  const std::vector<Outcome> out = run_ranks({{0, 2}}, port, 0.5);
  ::close(s);
  EXPECT_CONTAINS(out[0].error,
                  "rendezvous: cannot listen on 127.0.0.1:" + std::to_string(port) + ": ");
  EXPECT_CONTAINS(out[0].error, std::strerror(EADDRINUSE));
}

namespace {

GradSlot slot(const char* name, uintptr_t address, size_t bytes, int ready, int group = 0) {
  GradSlot s;
  s.name = name;
  s.address = address;
  s.bytes = bytes;
  s.ready = ready;
  s.group = group;
  return s;
}

// Every slot index exactly once across the buckets.
void expect_each_slot_once(const std::vector<Bucket>& buckets, size_t n) {
  std::vector<int> seen(n, 0);
  for (const Bucket& b : buckets)
    for (int i : b.slots) {
      ASSERT_GE(i, 0);
      ASSERT_LT(size_t(i), n);
      ++seen[size_t(i)];
    }
  for (size_t i = 0; i < n; ++i) EXPECT_EQ(seen[i], 1) << "slot " << i;
}

}  // namespace

TEST(DistBuckets, SizesAndReadyOrder) {
  // 20 slots of 100 bytes; the backward finishes them last first (ready 19 - i), apart.
  std::vector<GradSlot> slots;
  for (int i = 0; i < 20; ++i) slots.push_back(slot("p", uintptr_t(i) * 4096, 100, 19 - i));
  const std::vector<Bucket> b = plan_buckets(slots, 350, 150);
  expect_each_slot_once(b, slots.size());
  // First bucket: closed once it reaches 150 (2 slots); then 4 slots (400 >= 350) each; the
  // last holds the rest (20 - 2 - 4 * 4 = 2 slots).
  ASSERT_EQ(b.size(), 6u);
  EXPECT_EQ(b[0].bytes, 200u);
  EXPECT_EQ(b[0].slots, (std::vector<int>{19, 18}));
  for (size_t k = 1; k + 1 < b.size(); ++k) {
    EXPECT_EQ(b[k].bytes, 400u) << k;
    EXPECT_GE(b[k].bytes, 350u);
  }
  EXPECT_EQ(b.back().bytes, 200u);
  EXPECT_EQ(b.back().slots, (std::vector<int>{1, 0}));
  // In order of ready; a bucket's ready is its largest.
  for (size_t k = 0; k < b.size(); ++k) {
    int most = -1;
    for (int i : b[k].slots) most = std::max(most, slots[size_t(i)].ready);
    EXPECT_EQ(b[k].ready, most);
    if (k > 0) EXPECT_LT(b[k - 1].ready, b[k].ready);
  }
  EXPECT_EQ(b[0].ready, 1);
  EXPECT_EQ(b.back().ready, 19);
  // Sizes are the sum of the slots' bytes.
  size_t total = 0;
  for (const Bucket& x : b) total += x.bytes;
  EXPECT_EQ(total, 2000u);
}

TEST(DistBuckets, BucketClosesAsSoonAsItReachesItsSize) {
  // Exactly reaching the size closes it; a big slot alone overfills a bucket.
  const std::vector<GradSlot> slots = {slot("a", 0, 50, 0), slot("b", 1000, 50, 1),
                                       slot("c", 2000, 1000, 2), slot("d", 5000, 10, 3),
                                       slot("e", 6000, 10, 4)};
  const std::vector<Bucket> b = plan_buckets(slots, 100, 100);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0].slots, (std::vector<int>{0, 1}));
  EXPECT_EQ(b[1].slots, (std::vector<int>{2}));
  EXPECT_EQ(b[1].bytes, 1000u);
  EXPECT_EQ(b[2].slots, (std::vector<int>{3, 4}));  // the last may be smaller
  EXPECT_EQ(b[2].bytes, 20u);
}

TEST(DistBuckets, ZeroBucketBytesIsOneBucketPerSlot) {
  const std::vector<GradSlot> slots = {slot("a", 0, 64, 2), slot("b", 64, 64, 0),
                                       slot("c", 128, 64, 1)};
  const std::vector<Bucket> b = plan_buckets(slots, 0, 1 << 20);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0].slots, std::vector<int>{1});
  EXPECT_EQ(b[1].slots, std::vector<int>{2});
  EXPECT_EQ(b[2].slots, std::vector<int>{0});
  for (const Bucket& x : b) {
    EXPECT_EQ(x.bytes, 64u);
    ASSERT_EQ(x.runs.size(), 1u);
    EXPECT_EQ(x.runs[0].bytes, 64u);
  }
  EXPECT_TRUE(plan_buckets({}, 100, 100).empty());
}

TEST(DistBuckets, TiesInReadyKeepInputOrder) {
  const std::vector<GradSlot> slots = {slot("a", 0, 8, 3), slot("b", 512, 8, 1),
                                       slot("c", 1024, 8, 3), slot("d", 1536, 8, 1),
                                       slot("e", 2048, 8, 2)};
  const std::vector<Bucket> b = plan_buckets(slots, 1 << 20, 1 << 20);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].slots, (std::vector<int>{1, 3, 4, 0, 2}));
  EXPECT_EQ(b[0].ready, 3);
  EXPECT_EQ(b[0].bytes, 40u);
}

TEST(DistBuckets, RunsMergeNeighboursOfOneGroup) {
  // In slot order: a [0, 100), b [256, 356) gap 156: merge; c [600, 700) gap 244: merge;
  // d [956, 1000) gap exactly 256: new run; e [1000, 1100) group 1: new run; f [1100, 1200)
  // group 1, adjacent: merge; g [5000, 5050) group 0 again: new run; h [5050, 5060): merge;
  // i [4000, 4010) below that run's end: new run.
  const std::vector<GradSlot> slots = {
      slot("a", 0, 100, 0, 0),   slot("b", 256, 100, 0, 0),  slot("c", 600, 100, 0, 0),
      slot("d", 956, 44, 0, 0),  slot("e", 1000, 100, 0, 1), slot("f", 1100, 100, 0, 1),
      slot("g", 5000, 50, 0, 0), slot("h", 5050, 10, 0, 0),  slot("i", 4000, 10, 0, 0)};
  const std::vector<Bucket> b = plan_buckets(slots, 1 << 20, 1 << 20);
  ASSERT_EQ(b.size(), 1u);
  const std::vector<BucketRun>& r = b[0].runs;
  ASSERT_EQ(r.size(), 5u);
  EXPECT_EQ(r[0].address, 0u);
  EXPECT_EQ(r[0].bytes, 700u);  // a..c and the gaps
  EXPECT_EQ(r[0].group, 0);
  EXPECT_EQ(r[1].address, 956u);
  EXPECT_EQ(r[1].bytes, 44u);
  EXPECT_EQ(r[2].address, 1000u);
  EXPECT_EQ(r[2].bytes, 200u);
  EXPECT_EQ(r[2].group, 1);
  EXPECT_EQ(r[3].address, 5000u);
  EXPECT_EQ(r[3].bytes, 60u);
  EXPECT_EQ(r[3].group, 0);
  EXPECT_EQ(r[4].address, 4000u);  // before the run's end: not merged (slot order, not sorted)
  EXPECT_EQ(r[4].bytes, 10u);
  EXPECT_EQ(b[0].bytes, 614u);  // the slots' bytes, gaps not counted
}

TEST(DistBuckets, RunsSplitOnGroupChangeEvenWhenAdjacent) {
  const std::vector<GradSlot> slots = {slot("a", 0, 256, 0, 2), slot("b", 256, 256, 1, 3),
                                       slot("c", 512, 256, 2, 2)};
  const std::vector<Bucket> b = plan_buckets(slots, 1 << 20, 1 << 20);
  ASSERT_EQ(b.size(), 1u);
  ASSERT_EQ(b[0].runs.size(), 3u);
  EXPECT_EQ(b[0].runs[0].group, 2);
  EXPECT_EQ(b[0].runs[1].group, 3);
  EXPECT_EQ(b[0].runs[2].group, 2);
  EXPECT_EQ(b[0].ready, 2);
  // Runs do not cross buckets: the same slots one per bucket give one run each.
  const std::vector<Bucket> one =
      plan_buckets({slot("a", 0, 256, 0), slot("b", 256, 256, 1)}, 256, 256);
  ASSERT_EQ(one.size(), 2u);
  EXPECT_EQ(one[0].runs.size(), 1u);
  EXPECT_EQ(one[1].runs.size(), 1u);
  EXPECT_EQ(one[1].runs[0].address, 256u);
}

TEST(DistScaling, WorkedExample) {
  ScalingInput in;
  in.world = 4;
  in.batch_per_gpu = 64;
  in.local_step_ms = 100;
  in.step_ms = {105, 110, 104, 108};
  in.serial_comm_ms = 30;
  const Scaling s = scaling(in);
  // The slowest rank: 110 ms. 4 * 64 images / 0.110 s = 2327.27 img/s.
  EXPECT_NEAR(s.global_img_s, 2327.2727, 1e-3);
  EXPECT_NEAR(s.per_gpu_img_s, 581.8182, 1e-3);
  EXPECT_NEAR(s.local_img_s, 640.0, 1e-9);  // 64 / 0.100 s
  EXPECT_NEAR(s.efficiency, 0.90909, 1e-4);
  EXPECT_NEAR(s.exposed_comm_ms, 10.0, 1e-9);
  EXPECT_NEAR(s.hidden_fraction, 2.0 / 3.0, 1e-9);  // 1 - 10 / 30
}

TEST(DistScaling, ClampsAndZeroGuards) {
  ScalingInput in;
  in.world = 2;
  in.batch_per_gpu = 32;
  in.local_step_ms = 100;
  in.step_ms = {95, 98};  // faster than alone: nothing exposed, all hidden
  in.serial_comm_ms = 20;
  Scaling s = scaling(in);
  EXPECT_EQ(s.exposed_comm_ms, 0.0);
  EXPECT_EQ(s.hidden_fraction, 1.0);
  EXPECT_GT(s.efficiency, 1.0);
  // More exposed than the all-reduces alone take: hidden clamps at 0.
  in.step_ms = {150, 160};
  s = scaling(in);
  EXPECT_EQ(s.exposed_comm_ms, 60.0);
  EXPECT_EQ(s.hidden_fraction, 0.0);
  // No communication measured: hidden 0.
  in.serial_comm_ms = 0;
  EXPECT_EQ(scaling(in).hidden_fraction, 0.0);
  // Nothing measured at all: zeros, no NaN or infinity.
  const Scaling z = scaling(ScalingInput{0, 0, 0, {}, 0});
  for (double v : {z.global_img_s, z.per_gpu_img_s, z.local_img_s, z.efficiency, z.exposed_comm_ms,
                   z.hidden_fraction})
    EXPECT_EQ(v, 0.0);
  ScalingInput zero_steps = in;
  zero_steps.step_ms = {0, 0};
  zero_steps.local_step_ms = 0;
  const Scaling zs = scaling(zero_steps);
  EXPECT_EQ(zs.global_img_s, 0.0);
  EXPECT_EQ(zs.local_img_s, 0.0);
  EXPECT_EQ(zs.efficiency, 0.0);
}
