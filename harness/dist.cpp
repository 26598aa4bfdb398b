#include "harness/dist.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "harness/check.h"

namespace cnnbench {
namespace {

// ---- rank_info_from_env ----

struct Family {
  const char* source;
  const char *rank, *world, *local_rank, *local_world;
};
constexpr Family kFamilies[] = {
    {"cnnbench", "CNNBENCH_RANK", "CNNBENCH_WORLD_SIZE", "CNNBENCH_LOCAL_RANK",
     "CNNBENCH_LOCAL_WORLD_SIZE"},
    {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {"pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"},
};

// A whole number >= min (digits only) from variable `name`.
int env_number(const char* name, const char* value, int min) {
  bool ok = value[0] != '\0';
  long long v = 0;
  for (const char* p = value; ok && *p; ++p) {
    if (*p < '0' || *p > '9') {
      ok = false;
    } else {
      v = v * 10 + (*p - '0');
      if (v > 0x7fffffff) ok = false;
    }
  }
  if (!ok || v < min)
    throw UserError(std::string(name) + " must be a whole number >= " + std::to_string(min) +
                    ", not '" + value + "'");
  return int(v);
}

const char* process_env(const char* name) {
  return std::getenv(name);
}

// ---- sockets ----

using Clock = std::chrono::steady_clock;

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = o.fd_;
      o.fd_ = -1;
    }
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }
  int get() const { return fd_; }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
};

struct AddrInfo {
  addrinfo* list = nullptr;
  ~AddrInfo() {
    if (list) freeaddrinfo(list);
  }
};

constexpr uint32_t kMagic = 0x636e6e62;  // 'cnnb'
constexpr uint32_t kMaxBlob = 1u << 20;

std::string host_port(const Rendezvous& r) {
  const bool v6 = r.addr.find(':') != std::string::npos;
  return (v6 ? "[" + r.addr + "]" : r.addr) + ":" + std::to_string(r.port);
}

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", s);
  return buf;
}

// Milliseconds left until `deadline` (0 when past it), for poll().
int ms_left(Clock::time_point deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  if (left <= 0) return 0;
  return int(std::min<long long>(left + 1, 0x7fffffff));
}

// poll() for `events` on fd until the deadline, retrying on EINTR. False when it timed out.
bool wait_for(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, ms_left(deadline));
    if (n > 0) return true;
    if (n == 0) return false;
    if (errno != EINTR) throw UserError(std::string("rendezvous: poll: ") + std::strerror(errno));
  }
}

void set_nonblocking(int fd) {
  const int flags = ::fcntl(fd, F_GETFL, 0);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
    throw UserError(std::string("rendezvous: fcntl: ") + std::strerror(errno));
}

enum class Io { Ok, Closed, Timeout };

// Reads exactly n bytes. *got: how many arrived (for a short read's message); *err: errno of a
// failed read (Closed with err != 0: reset).
Io recv_all(int fd, void* data, size_t n, Clock::time_point deadline, size_t* got = nullptr,
            int* err = nullptr) {
  auto* p = static_cast<uint8_t*>(data);
  size_t done = 0;
  if (err) *err = 0;
  while (done < n) {
    const ssize_t k = ::recv(fd, p + done, n - done, 0);
    if (k > 0) {
      done += size_t(k);
      continue;
    }
    if (k == 0) {
      if (got) *got = done;
      return Io::Closed;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!wait_for(fd, POLLIN, deadline)) {
        if (got) *got = done;
        return Io::Timeout;
      }
      continue;
    }
    if (err) *err = errno;
    if (got) *got = done;
    return Io::Closed;
  }
  if (got) *got = done;
  return Io::Ok;
}

Io send_all(int fd, const void* data, size_t n, Clock::time_point deadline, int* err = nullptr) {
  const auto* p = static_cast<const uint8_t*>(data);
  size_t done = 0;
  if (err) *err = 0;
  while (done < n) {
    const ssize_t k = ::send(fd, p + done, n - done, MSG_NOSIGNAL);
    if (k >= 0) {
      done += size_t(k);
      continue;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!wait_for(fd, POLLOUT, deadline)) return Io::Timeout;
      continue;
    }
    if (err) *err = errno;
    return Io::Closed;
  }
  return Io::Ok;
}

void put_u32(uint8_t* p, uint32_t v) {
  v = htonl(v);
  std::memcpy(p, &v, 4);
}
uint32_t get_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return ntohl(v);
}

// The peer's "ip:port" for messages.
std::string peer_name(const sockaddr_storage& a) {
  char host[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (a.ss_family == AF_INET) {
    const auto* s = reinterpret_cast<const sockaddr_in*>(&a);
    ::inet_ntop(AF_INET, &s->sin_addr, host, sizeof host);
    port = ntohs(s->sin_port);
    return std::string(host) + ":" + std::to_string(port);
  }
  if (a.ss_family == AF_INET6) {
    const auto* s = reinterpret_cast<const sockaddr_in6*>(&a);
    ::inet_ntop(AF_INET6, &s->sin6_addr, host, sizeof host);
    port = ntohs(s->sin6_port);
    return "[" + std::string(host) + "]:" + std::to_string(port);
  }
  return host;
}

// Resolves r; `passive` for the listener. EAI_AGAIN (a temporary failure) returns false, any
// other failure is an error.
bool resolve(const Rendezvous& r, bool passive, AddrInfo& out) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  const std::string port = std::to_string(r.port);
  const int rc = ::getaddrinfo(r.addr.c_str(), port.c_str(), &hints, &out.list);
  if (rc == 0) return true;
  if (rc == EAI_AGAIN) return false;
  throw UserError("rendezvous: cannot resolve CNNBENCH_MASTER_ADDR '" + r.addr +
                  "': " + ::gai_strerror(rc));
}

std::string join_ranks(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

std::vector<uint8_t> serve(const RankInfo& me, const Rendezvous& r,
                           const std::vector<uint8_t>& blob, double timeout_s) {
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(std::max(0.0, timeout_s)));
  const std::string where = host_port(r);
  if (blob.size() > kMaxBlob)
    throw UserError("rendezvous: the blob of " + std::to_string(blob.size()) +
                    " bytes is larger than " + std::to_string(kMaxBlob));

  AddrInfo ai;
  while (!resolve(r, true, ai)) {
    if (ms_left(deadline) == 0)
      throw UserError("rendezvous: cannot resolve CNNBENCH_MASTER_ADDR '" + r.addr + "' in " +
                      seconds(timeout_s));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  Fd listener;
  int last_errno = 0;
  for (addrinfo* a = ai.list; a && listener.get() < 0; a = a->ai_next) {
    Fd s(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
    if (s.get() < 0) {
      last_errno = errno;
      continue;
    }
    const int one = 1;
    ::setsockopt(s.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(s.get(), a->ai_addr, a->ai_addrlen) != 0 || ::listen(s.get(), me.world) != 0) {
      last_errno = errno;
      continue;
    }
    listener = std::move(s);
  }
  if (listener.get() < 0)
    throw UserError("rendezvous: cannot listen on " + where + ": " + std::strerror(last_errno) +
                    (last_errno == EADDRINUSE
                         ? " (another run on this port? CNNBENCH_MASTER_PORT picks another)"
                         : ""));
  set_nonblocking(listener.get());

  std::vector<Fd> peers(size_t(me.world));  // by rank; [0] unused
  int arrived = 0;
  while (arrived < me.world - 1) {
    if (!wait_for(listener.get(), POLLIN, deadline)) {
      std::vector<int> missing;
      for (int k = 1; k < me.world; ++k)
        if (peers[size_t(k)].get() < 0) missing.push_back(k);
      throw UserError("rendezvous: rank 0 waited " + seconds(timeout_s) + " at " + where +
                      " for rank" + (missing.size() > 1 ? "s " : " ") + join_ranks(missing) +
                      " of " + std::to_string(me.world));
    }
    sockaddr_storage from{};
    socklen_t from_len = sizeof from;
    Fd c(::accept4(listener.get(), reinterpret_cast<sockaddr*>(&from), &from_len,
                   SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (c.get() < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK || errno == ECONNABORTED)
        continue;
      throw UserError("rendezvous: accept on " + where + ": " + std::strerror(errno));
    }
    const std::string peer = peer_name(from);
    uint8_t hello[12];
    size_t got = 0;
    const Io io = recv_all(c.get(), hello, sizeof hello, deadline, &got);
    if (io == Io::Closed && got == 0) continue;  // a probe of the port, not a rank
    if (io != Io::Ok)
      throw UserError("rendezvous: a connection from " + peer + " to " + where + " " +
                      (io == Io::Timeout
                           ? "sent no whole hello in " + seconds(timeout_s)
                           : "closed after " + std::to_string(got) + " bytes of its hello"));
    const uint32_t magic = get_u32(hello), rank = get_u32(hello + 4), world = get_u32(hello + 8);
    if (magic != kMagic) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "magic 0x%08x, not 0x%08x", magic, kMagic);
      throw UserError("rendezvous: a connection from " + peer + " to " + where +
                      " is not a cnnbench rank (" + buf + ")");
    }
    if (world != uint32_t(me.world))
      throw UserError("rendezvous: rank " + std::to_string(rank) + " says the world has " +
                      std::to_string(world) + " ranks, rank 0 has " + std::to_string(me.world));
    if (rank == 0 || rank >= uint32_t(me.world))
      throw UserError("rendezvous: a connection from " + peer + " says it is rank " +
                      std::to_string(rank) + ", not one of 1.." + std::to_string(me.world - 1));
    if (peers[rank].get() >= 0)
      throw UserError("rendezvous: rank " + std::to_string(rank) + " connected twice");
    peers[rank] = std::move(c);
    ++arrived;
  }
  // Every hello is good: now the reply, so that a bad hello stops every rank (they read EOF).
  std::vector<uint8_t> reply(4 + blob.size());
  put_u32(reply.data(), uint32_t(blob.size()));
  if (!blob.empty()) std::memcpy(reply.data() + 4, blob.data(), blob.size());
  for (int k = 1; k < me.world; ++k) {
    int err = 0;
    const Io io = send_all(peers[size_t(k)].get(), reply.data(), reply.size(), deadline, &err);
    if (io == Io::Timeout)
      throw UserError("rendezvous: rank 0 could not send the id to rank " + std::to_string(k) +
                      " in " + seconds(timeout_s));
    if (io == Io::Closed)
      throw UserError("rendezvous: rank " + std::to_string(k) +
                      " closed its connection before rank 0 sent the id: " + std::strerror(err));
  }
  return blob;
}

// One non-blocking connect to `a`, waiting at most until `deadline`. Returns the socket or -1
// (with *err set).
Fd try_connect(const addrinfo* a, Clock::time_point deadline, int* err) {
  Fd s(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol));
  if (s.get() < 0) {
    *err = errno;
    return Fd();
  }
  if (::connect(s.get(), a->ai_addr, a->ai_addrlen) == 0) return s;
  if (errno != EINPROGRESS && errno != EINTR) {
    *err = errno;
    return Fd();
  }
  if (!wait_for(s.get(), POLLOUT, deadline)) {
    *err = ETIMEDOUT;
    return Fd();
  }
  int so_error = 0;
  socklen_t len = sizeof so_error;
  if (::getsockopt(s.get(), SOL_SOCKET, SO_ERROR, &so_error, &len) != 0) so_error = errno;
  if (so_error != 0) {
    *err = so_error;
    return Fd();
  }
  // A connect to a port of this host in the ephemeral range, retried while nobody listens, can
  // meet itself (TCP's simultaneous open): that is no rank 0.
  sockaddr_storage self{}, peer{};
  socklen_t self_len = sizeof self, peer_len = sizeof peer;
  if (::getsockname(s.get(), reinterpret_cast<sockaddr*>(&self), &self_len) == 0 &&
      ::getpeername(s.get(), reinterpret_cast<sockaddr*>(&peer), &peer_len) == 0 &&
      self_len == peer_len && std::memcmp(&self, &peer, self_len) == 0) {
    *err = ECONNREFUSED;
    return Fd();
  }
  return s;
}

std::vector<uint8_t> join(const RankInfo& me, const Rendezvous& r, double timeout_s) {
  const auto timeout = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(std::max(0.0, timeout_s)));
  const auto deadline = Clock::now() + timeout;
  const std::string where = host_port(r);
  const std::string who = "rendezvous: rank " + std::to_string(me.rank);
  Fd s;
  for (;;) {
    const auto attempt = Clock::now();
    AddrInfo ai;
    if (resolve(r, false, ai)) {
      for (const addrinfo* a = ai.list; a && s.get() < 0; a = a->ai_next) {
        int err = 0;
        s = try_connect(a, deadline, &err);
      }
    }
    if (s.get() >= 0) break;
    if (ms_left(deadline) == 0)
      throw UserError(who + " could not reach " + where + " in " + seconds(timeout_s) +
                      " (is rank 0 running, and is CNNBENCH_MASTER_ADDR its address?)");
    std::this_thread::sleep_until(std::min(deadline, attempt + std::chrono::milliseconds(100)));
  }
  // Connected: rank 0 answers once every rank has arrived, within its own timeout (which began
  // before this connection), so the reply is awaited for timeout_s from now.
  const auto reply_deadline = Clock::now() + timeout;
  uint8_t hello[12];
  put_u32(hello, kMagic);
  put_u32(hello + 4, uint32_t(me.rank));
  put_u32(hello + 8, uint32_t(me.world));
  int err = 0;
  const Io sent = send_all(s.get(), hello, sizeof hello, reply_deadline, &err);
  if (sent == Io::Timeout)
    throw UserError(who + " could not send its hello to " + where + " in " + seconds(timeout_s));
  if (sent == Io::Closed)
    throw UserError(who + ": rank 0 at " + where +
                    " closed the connection before the hello: " + std::strerror(err));
  uint8_t size_bytes[4];
  Io io = recv_all(s.get(), size_bytes, 4, reply_deadline, nullptr, &err);
  const auto fail = [&](Io what) {
    if (what == Io::Timeout)
      throw UserError(who + " connected to " + where + " but rank 0 sent no id in " +
                      seconds(timeout_s) + " (are all " + std::to_string(me.world) +
                      " ranks running?)");
    throw UserError(who + ": rank 0 at " + where + " closed the connection without the id" +
                    (err ? std::string(" (") + std::strerror(err) + ")" : std::string()) +
                    " (see rank 0's error)");
  };
  if (io != Io::Ok) fail(io);
  const uint32_t size = get_u32(size_bytes);
  if (size > kMaxBlob)
    throw UserError(who + ": " + where + " announced a reply of " + std::to_string(size) +
                    " bytes (at most " + std::to_string(kMaxBlob) + "): is it a cnnbench rank 0?");
  std::vector<uint8_t> blob(size);
  if (size > 0) {
    io = recv_all(s.get(), blob.data(), size, reply_deadline, nullptr, &err);
    if (io != Io::Ok) fail(io);
  }
  return blob;
}

}  // namespace

RankInfo rank_info_from_env(EnvLookup env) {
  for (const Family& f : kFamilies) {
    const char* rank_s = env(f.rank);
    if (!rank_s) continue;
    const char* world_s = env(f.world);
    if (!world_s)
      throw UserError(std::string(f.rank) + " is set ('" + rank_s + "') but " + f.world +
                      " is not");
    RankInfo info;
    info.source = f.source;
    info.rank = env_number(f.rank, rank_s, 0);
    info.world = env_number(f.world, world_s, 1);
    if (info.rank >= info.world)
      throw UserError(std::string(f.rank) + "=" + rank_s + " is not below " + f.world + "=" +
                      world_s);
    const char* local_s = env(f.local_rank);
    const char* local_world_s = env(f.local_world);
    info.local_rank = local_s ? env_number(f.local_rank, local_s, 0) : info.rank;
    info.local_world = local_world_s ? env_number(f.local_world, local_world_s, 1) : info.world;
    if (info.local_rank >= info.local_world)
      throw UserError(std::string("local rank ") + std::to_string(info.local_rank) + " (" +
                      (local_s ? std::string(f.local_rank) + "=" + local_s
                               : std::string(f.local_rank) + " unset: the rank") +
                      ") is not below the local world " + std::to_string(info.local_world) + " (" +
                      (local_world_s ? std::string(f.local_world) + "=" + local_world_s
                                     : std::string(f.local_world) + " unset: the world size") +
                      ")");
    return info;
  }
  return RankInfo{};
}

RankInfo rank_info_from_env() {
  return rank_info_from_env(process_env);
}

Rendezvous rendezvous_from_env(EnvLookup env) {
  Rendezvous r;
  if (const char* a = env("CNNBENCH_MASTER_ADDR")) {
    if (a[0] == '\0') throw UserError("CNNBENCH_MASTER_ADDR is set but empty");
    r.addr = a;
  }
  if (const char* p = env("CNNBENCH_MASTER_PORT")) {
    bool ok = p[0] != '\0';
    long v = 0;
    for (const char* c = p; ok && *c; ++c) {
      ok = *c >= '0' && *c <= '9';
      v = v * 10 + (*c - '0');
      if (v > 65535) ok = false;
    }
    if (!ok || v < 1)
      throw UserError(std::string("CNNBENCH_MASTER_PORT must be a port number from 1 to 65535, "
                                  "not '") +
                      p + "'");
    r.port = int(v);
  }
  return r;
}

Rendezvous rendezvous_from_env() {
  return rendezvous_from_env(process_env);
}

std::vector<uint8_t> rendezvous_broadcast(const RankInfo& me, const Rendezvous& r,
                                          const std::vector<uint8_t>& blob, double timeout_s) {
  if (me.world < 1 || me.rank < 0 || me.rank >= me.world)
    throw UserError("rendezvous: rank " + std::to_string(me.rank) + " of a world of " +
                    std::to_string(me.world) + " is not a rank");
  if (me.world == 1) return blob;
  if (r.port < 1 || r.port > 65535)
    throw UserError("rendezvous: port " + std::to_string(r.port) + " is not in 1..65535");
  return me.rank == 0 ? serve(me, r, blob, timeout_s) : join(me, r, timeout_s);
}

std::vector<Bucket> plan_buckets(const std::vector<GradSlot>& slots, size_t bucket_bytes,
                                 size_t first_bucket_bytes) {
  std::vector<int> order(slots.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = int(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return slots[size_t(a)].ready < slots[size_t(b)].ready; });
  std::vector<Bucket> out;
  bool open = false;
  for (int i : order) {
    const GradSlot& s = slots[size_t(i)];
    if (!open) {
      out.emplace_back();
      out.back().ready = s.ready;
      open = true;
    }
    Bucket& b = out.back();
    b.slots.push_back(i);
    b.bytes += s.bytes;
    b.ready = std::max(b.ready, s.ready);
    BucketRun* run = b.runs.empty() ? nullptr : &b.runs.back();
    const uintptr_t run_end = run ? run->address + run->bytes : 0;
    if (run && run->group == s.group && s.address >= run_end && s.address - run_end < 256) {
      run->bytes = s.address + s.bytes - run->address;
    } else {
      b.runs.push_back(BucketRun{s.address, s.bytes, s.group});
    }
    const size_t cap = out.size() == 1 ? first_bucket_bytes : bucket_bytes;
    if (bucket_bytes == 0 || b.bytes >= cap) open = false;
  }
  return out;
}

Scaling scaling(const ScalingInput& in) {
  Scaling s;
  double slowest = 0;
  for (double t : in.step_ms) slowest = std::max(slowest, t);
  if (slowest > 0) s.global_img_s = double(in.world) * in.batch_per_gpu * 1000.0 / slowest;
  if (in.world > 0) s.per_gpu_img_s = s.global_img_s / in.world;
  if (in.local_step_ms > 0) s.local_img_s = in.batch_per_gpu * 1000.0 / in.local_step_ms;
  if (s.local_img_s > 0) s.efficiency = s.per_gpu_img_s / s.local_img_s;
  if (slowest > 0) s.exposed_comm_ms = std::max(0.0, slowest - in.local_step_ms);
  if (in.serial_comm_ms > 0)
    s.hidden_fraction = std::clamp(1.0 - s.exposed_comm_ms / in.serial_comm_ms, 0.0, 1.0);
  return s;
}

}  // namespace cnnbench
