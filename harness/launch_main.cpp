// cnnbench_launch: starts one process of a program per local GPU for data-parallel training
// (harness/dist.h reads what it sets), waits for them, and stops them all when one fails.
// Host-only: no CUDA, so it links with cnnbench_host alone.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "harness/check.h"
#include "harness/cli.h"

extern char** environ;

namespace cnnbench {
namespace {

const char* kUsage =
    R"(usage: cnnbench_launch --nproc=N [--nnodes=M --node_rank=K --master_addr=A]
                       [--master_port=P] [--quiet_ranks] -- PROGRAM [ARGS...]
  Starts N processes of PROGRAM on this node, one per GPU, and waits for them. Each gets
  CNNBENCH_RANK (node_rank * N + local rank), CNNBENCH_WORLD_SIZE (nnodes * N),
  CNNBENCH_LOCAL_RANK, CNNBENCH_LOCAL_WORLD_SIZE (N), CNNBENCH_MASTER_ADDR and
  CNNBENCH_MASTER_PORT (where rank 0 hands out NCCL's id), and always NCCL_NVLS_ENABLE=0,
  TORCH_SYMM_MEM_DISABLE_MULTICAST=1 and NVSHMEM_DISABLE_NVLS=1 (NVLink multicast off, as these
  machines require; a different NCCL_NVLS_ENABLE of the caller's is overridden, with a note).
  When a rank exits non-zero or is killed, the others get SIGTERM (SIGKILL 5 s later) and the
  launcher exits with that rank's code (128 + the signal for a signal). SIGINT or SIGTERM to the
  launcher is passed on to every rank; the launcher then exits with 128 + that signal.
  --nproc=N        processes on this node (one per GPU)
  --nnodes=M       nodes in the run (default 1)
  --node_rank=K    this node's index, 0..M-1 (default 0)
  --master_addr=A  node 0's address, as the other nodes reach it (default 127.0.0.1; required
                   when --nnodes > 1)
  --master_port=P  the port rank 0 listens on (default 29511)
  --quiet_ranks    the standard output of local ranks 1..N-1 goes to /dev/null (stderr stays)
  Several nodes: run the same command on each, with the same --nnodes and --master_addr and its
  own --node_rank, e.g. on two nodes of 8 GPUs:
    host0$ cnnbench_launch --nproc=8 --nnodes=2 --node_rank=0 --master_addr=host0 -- PROGRAM ...
    host1$ cnnbench_launch --nproc=8 --nnodes=2 --node_rank=1 --master_addr=host0 -- PROGRAM ...
  With MPI instead of this launcher: the program reads Open MPI's variables itself
  (OMPI_COMM_WORLD_RANK, ...; MPICH's PMI_RANK and Slurm's SLURM_PROCID too), e.g.
    mpirun -np 8 -x CNNBENCH_MASTER_ADDR=host0 -x NCCL_NVLS_ENABLE=0 PROGRAM ...
)";

constexpr const char* kProgram = "cnnbench_launch";
constexpr int kMaxProcs = 1024;
constexpr auto kKillGrace = std::chrono::seconds(5);

using Clock = std::chrono::steady_clock;

struct Child {
  pid_t pid = -1;
  int rank = 0;
  bool running = false;
};

// The environment of one rank: the launcher's, with our variables replacing any of the same name.
std::vector<std::string> child_env(const std::vector<std::pair<std::string, std::string>>& set) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string kv = *e;
    const std::string key = kv.substr(0, kv.find('='));
    bool replaced = false;
    for (const auto& [k, v] : set) replaced = replaced || k == key;
    if (!replaced) env.push_back(kv);
  }
  for (const auto& [k, v] : set) env.push_back(k + "=" + v);
  return env;
}

void signal_all(const std::vector<Child>& children, int sig) {
  for (const Child& c : children)
    if (c.running) ::kill(c.pid, sig);
}

bool any_running(const std::vector<Child>& children) {
  for (const Child& c : children)
    if (c.running) return true;
  return false;
}

void on_sigchld(int) {}

int run(int argc, char** argv) {
  std::string nproc_s, nnodes_s = "1", node_rank_s = "0", master_addr, master_port_s = "29511";
  bool quiet = false;
  int i = 1;
  for (; i < argc; ++i) {
    if (std::string(argv[i]) == "--") break;
    if (take_flag(i, argc, argv, "help", nullptr)) {
      std::cout << kUsage;
      return 0;
    }
    if (take_flag(i, argc, argv, "quiet_ranks", nullptr)) {
      quiet = true;
      continue;
    }
    if (take_flag(i, argc, argv, "nproc", &nproc_s) ||
        take_flag(i, argc, argv, "nnodes", &nnodes_s) ||
        take_flag(i, argc, argv, "node_rank", &node_rank_s) ||
        take_flag(i, argc, argv, "master_addr", &master_addr) ||
        take_flag(i, argc, argv, "master_port", &master_port_s))
      continue;
    if (std::string(argv[i]).compare(0, 2, "--") == 0)
      throw UserError(std::string("unknown flag '") + argv[i] + "' (see --help)");
    throw UserError(std::string("unexpected argument '") + argv[i] +
                    "': the program and its arguments come after -- (see --help)");
  }
  if (nproc_s.empty())
    throw UserError("--nproc is required: the number of processes (GPUs) on this node");
  const long nproc = parse_count(nproc_s, "nproc");
  const long nnodes = parse_count(nnodes_s, "nnodes");
  const long node_rank = parse_count(node_rank_s, "node_rank");
  const long port = parse_count(master_port_s, "master_port");
  if (nproc < 1 || nproc > kMaxProcs)
    throw UserError("--nproc must be from 1 to " + std::to_string(kMaxProcs) + ", not " + nproc_s);
  if (nnodes < 1 || nnodes > 65536)
    throw UserError("--nnodes must be from 1 to 65536, not " + nnodes_s);
  if (node_rank >= nnodes)
    throw UserError("--node_rank=" + node_rank_s + " must be below --nnodes=" + nnodes_s);
  if (port < 1 || port > 65535)
    throw UserError("--master_port must be from 1 to 65535, not " + master_port_s);
  if (nnodes > 1 && master_addr.empty())
    throw UserError("--master_addr (node 0's address) is required when --nnodes > 1");
  if (master_addr.empty()) master_addr = "127.0.0.1";
  if (i >= argc || i + 1 >= argc)
    throw UserError("no program to run: give it after -- (cnnbench_launch --nproc=N -- PROGRAM)");
  char** program = argv + i + 1;
  if (program[0][0] == '\0') throw UserError("the program after -- is an empty string");

  if (const char* nvls = std::getenv("NCCL_NVLS_ENABLE"); nvls && std::string(nvls) != "0")
    std::fprintf(stderr,
                 "%s: NCCL_NVLS_ENABLE=%s overridden: the ranks get NCCL_NVLS_ENABLE=0 (these "
                 "machines require NVLink multicast off)\n",
                 kProgram, nvls);

  // SIGCHLD, SIGINT and SIGTERM are taken by sigtimedwait below; children restore the old mask.
  struct sigaction sa {};
  sa.sa_handler = on_sigchld;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_NOCLDSTOP;
  ::sigaction(SIGCHLD, &sa, nullptr);
  sigset_t wait_set, old_mask;
  sigemptyset(&wait_set);
  sigaddset(&wait_set, SIGCHLD);
  sigaddset(&wait_set, SIGINT);
  sigaddset(&wait_set, SIGTERM);
  ::sigprocmask(SIG_BLOCK, &wait_set, &old_mask);

  int dev_null = -1;
  if (quiet && nproc > 1) {
    dev_null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (dev_null < 0)
      throw UserError(std::string("cannot open /dev/null: ") + std::strerror(errno));
  }

  std::vector<Child> children;
  int exit_code = 0;  // the first failure's
  bool stopping = false;
  Clock::time_point kill_at{};
  int launcher_signal = 0;
  const auto stop_all = [&](int sig) {
    signal_all(children, sig);
    if (!stopping) kill_at = Clock::now() + kKillGrace;
    stopping = true;
  };

  std::fflush(stdout);
  std::fflush(stderr);
  for (long local = 0; local < nproc && !stopping; ++local) {
    const long rank = node_rank * nproc + local;
    const std::vector<std::string> env_strings =
        child_env({{"CNNBENCH_RANK", std::to_string(rank)},
                   {"CNNBENCH_WORLD_SIZE", std::to_string(nnodes * nproc)},
                   {"CNNBENCH_LOCAL_RANK", std::to_string(local)},
                   {"CNNBENCH_LOCAL_WORLD_SIZE", std::to_string(nproc)},
                   {"CNNBENCH_MASTER_ADDR", master_addr},
                   {"CNNBENCH_MASTER_PORT", std::to_string(port)},
                   {"NCCL_NVLS_ENABLE", "0"},
                   {"TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"},
                   {"NVSHMEM_DISABLE_NVLS", "1"}});
    std::vector<char*> envp;
    for (const std::string& s : env_strings) envp.push_back(const_cast<char*>(s.c_str()));
    envp.push_back(nullptr);

    // Tells the parent whether exec failed: closed by a successful exec, the errno otherwise.
    int pipe_fds[2];
    if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
      const int err = errno;
      stop_all(SIGTERM);
      std::fprintf(stderr, "%s: pipe: %s; stopping the ranks\n", kProgram, std::strerror(err));
      exit_code = 1;
      break;
    }
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(pipe_fds[0]);
      if (dev_null >= 0 && local > 0) ::dup2(dev_null, STDOUT_FILENO);
      ::signal(SIGCHLD, SIG_DFL);
      ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
      environ = envp.data();
      ::execvp(program[0], program);
      const int err = errno;
      ssize_t ignored = ::write(pipe_fds[1], &err, sizeof err);
      (void)ignored;
      ::_exit(127);
    }
    ::close(pipe_fds[1]);
    if (pid < 0) {
      const int err = errno;
      ::close(pipe_fds[0]);
      stop_all(SIGTERM);
      std::fprintf(stderr, "%s: cannot start rank %ld: %s; stopping the ranks\n", kProgram, rank,
                   std::strerror(err));
      exit_code = 1;
      break;
    }
    children.push_back(Child{pid, int(rank), true});
    int exec_errno = 0;
    ssize_t got;
    do {
      got = ::read(pipe_fds[0], &exec_errno, sizeof exec_errno);
    } while (got < 0 && errno == EINTR);
    ::close(pipe_fds[0]);
    if (got == ssize_t(sizeof exec_errno)) {
      std::fprintf(stderr, "%s: cannot run '%s': %s\n", kProgram, program[0],
                   std::strerror(exec_errno));
      exit_code = 127;
      stop_all(SIGTERM);  // the ranks started before it (none: they all run the same program)
    }
  }
  if (dev_null >= 0) ::close(dev_null);

  while (any_running(children)) {
    // Reap whatever has exited.
    for (;;) {
      int status = 0;
      const pid_t pid = ::waitpid(-1, &status, WNOHANG);
      if (pid <= 0) break;
      for (Child& c : children) {
        if (c.pid != pid || !c.running) continue;
        c.running = false;
        const bool failed = WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status));
        if (failed && !stopping) {
          if (WIFSIGNALED(status)) {
            const int sig = WTERMSIG(status);
            exit_code = 128 + sig;
            std::fprintf(stderr, "%s: rank %d was killed by signal %d (%s)", kProgram, c.rank, sig,
                         strsignal(sig));
          } else {
            exit_code = WEXITSTATUS(status);
            std::fprintf(stderr, "%s: rank %d exited with code %d", kProgram, c.rank, exit_code);
          }
          std::fprintf(stderr, "%s\n", any_running(children) ? "; stopping the other ranks" : "");
          stop_all(SIGTERM);
        }
      }
    }
    if (!any_running(children)) break;
    if (stopping && Clock::now() >= kill_at) {
      signal_all(children, SIGKILL);
      kill_at = Clock::time_point::max();
    }
    // Sleep until a signal, at most 100 ms (and no later than the SIGKILL time).
    auto wait = std::chrono::milliseconds(100);
    if (stopping && kill_at != Clock::time_point::max())
      wait = std::min(wait, std::chrono::duration_cast<std::chrono::milliseconds>(
                                kill_at - Clock::now() + std::chrono::milliseconds(1)));
    if (wait.count() < 1) wait = std::chrono::milliseconds(1);
    const timespec ts{time_t(wait.count() / 1000), long(wait.count() % 1000) * 1000000L};
    const int sig = ::sigtimedwait(&wait_set, nullptr, &ts);
    if (sig == SIGINT || sig == SIGTERM) {
      if (launcher_signal == 0) {
        launcher_signal = sig;
        std::fprintf(stderr, "%s: got %s; passing it on to the ranks\n", kProgram,
                     sig == SIGINT ? "SIGINT" : "SIGTERM");
        signal_all(children, sig);
        if (!stopping) kill_at = Clock::now() + kKillGrace;
        stopping = true;
      } else {
        signal_all(children, SIGKILL);  // a second one: no more waiting
      }
    }
  }
  if (launcher_signal != 0 && exit_code == 0) exit_code = 128 + launcher_signal;
  return exit_code;
}

}  // namespace
}  // namespace cnnbench

int main(int argc, char** argv) {
  return cnnbench::run_main("cnnbench_launch", cnnbench::run, argc, argv);
}
