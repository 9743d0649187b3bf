#include "ps/bench/bench.h"

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <system_error>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/barrier.h"
#include "absl/time/clock.h"
#include "ps/base/file_io.h"
#include "ps/base/program.h"
#include "ps/base/server_process.h"
#include "ps/coord/etcd_client.h"
#include "ps/coord/etcd_process.h"
#include "ps/coord/membership.h"
#include "ps/obs/percentile.h"

namespace ps {
namespace {

struct PhaseResult {
  double mbps = 0;
  double p50_ms = 0;
  double p99_ms = 0;
};

using Clients = std::vector<std::unique_ptr<Client>>;

// One thread's calls of a phase: their latencies, or the first error.
struct ThreadCalls {
  std::vector<double> latencies_ms;
  absl::Status error;
};

// What a phase's calls do with the whole table: push a gradient, pull the
// values, or both in one PushPull (a worker's step in one round trip).
enum class Phase { kPush, kPull, kPushPull };

absl::Status CallOnce(Client& client, uint64_t params, Phase phase,
                      const std::vector<float>& grad,
                      std::vector<float>* values) {
  switch (phase) {
    case Phase::kPush:
      return client.Push("bench", 0, params, grad.data());
    case Phase::kPull:
      return client.Pull("bench", 0, params, values->data());
    case Phase::kPushPull:
      return client.PushPull("bench", 0, params, grad.data(), values->data());
  }
  return absl::InternalError("unknown phase");
}

void CallUntil(Client& client, uint64_t params, absl::Duration length,
               Phase phase, absl::Barrier& start, ThreadCalls* out) {
  const std::vector<float> grad(params, 1e-6f);
  std::vector<float> values(params);
  out->latencies_ms.reserve(1 << 16);
  start.Block();
  const absl::Time stop = absl::Now() + length;
  while (absl::Now() < stop) {
    const absl::Time t0 = absl::Now();
    absl::Status s = CallOnce(client, params, phase, grad, &values);
    if (!s.ok()) {
      out->error = s;
      return;
    }
    out->latencies_ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - t0));
  }
}

// All threads start together, run their calls until the phase ends, and
// report the latency of every call; a failed call ends the run with its
// error.
absl::StatusOr<PhaseResult> RunPhase(Clients& clients, uint64_t params,
                                     absl::Duration length, Phase phase) {
  const int n = static_cast<int>(clients.size());
  std::vector<ThreadCalls> calls(n);
  absl::Barrier start(n + 1);
  std::vector<std::thread> threads;
  for (int w = 0; w < n; ++w) {
    threads.emplace_back(CallUntil, std::ref(*clients[w]), params, length,
                         phase, std::ref(start), &calls[w]);
  }
  start.Block();
  const absl::Time begin = absl::Now();
  for (auto& t : threads) t.join();
  const double elapsed = absl::ToDoubleSeconds(absl::Now() - begin);
  std::vector<double> all;
  for (const ThreadCalls& c : calls) {
    if (!c.error.ok()) return c.error;
    all.insert(all.end(), c.latencies_ms.begin(), c.latencies_ms.end());
  }
  PhaseResult r;
  r.mbps = all.size() * params * sizeof(float) / 1e6 / elapsed;
  r.p50_ms = Percentile(all, 0.50);
  r.p99_ms = Percentile(all, 0.99);
  return r;
}

// Servers started for the run, in a temporary directory removed at the end.
// The layout of the client's replicated job once every shard has a
// primary in its etcd.
absl::StatusOr<JobLayout> AwaitLayout(const ClientOptions& client) {
  EtcdOptions e;
  e.endpoint = client.etcd;
  absl::StatusOr<std::unique_ptr<EtcdClient>> etcd = EtcdClient::Create(e);
  if (!etcd.ok()) return etcd.status();
  return AwaitPrimaries(**etcd, client.job, client.num_shards,
                        absl::Seconds(30));
}

class SpawnedServers {
 public:
  SpawnedServers() = default;
  SpawnedServers(const SpawnedServers&) = delete;
  SpawnedServers& operator=(const SpawnedServers&) = delete;
  ~SpawnedServers() {
    servers_.clear();
    std::error_code ignored;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ignored);
  }

  // `n` servers, or with replicas > 1 an etcd and n shards of `replicas`
  // servers each; the client is pointed at them.
  absl::Status Start(int n, int replicas, ClientOptions* client) {
    char dir[] = "/tmp/shardps-bench-XXXXXX";
    if (::mkdtemp(dir) == nullptr) return ErrnoStatus(errno, "create", dir);
    dir_ = dir;
    if (replicas > 1) {
      EtcdProcessOptions e;
      e.data_dir = dir_ + "/etcd";
      e.log_path = dir_ + "/etcd.log";
      absl::StatusOr<std::unique_ptr<EtcdProcess>> etcd = EtcdProcess::Start(e);
      if (!etcd.ok()) return etcd.status();
      etcd_ = *std::move(etcd);
      client->etcd = etcd_->endpoint();
      client->num_shards = n;
    }
    // Replica 0 of every shard first: each becomes its shard's primary,
    // and the others copy from it as they join.
    for (int r = 0; r < replicas; ++r) {
      for (int i = 0; i < n; ++i) {
        std::vector<std::string> args = {absl::StrCat("--job=", client->job)};
        if (replicas > 1) {
          args.insert(args.end(), {absl::StrCat("--etcd=", client->etcd),
                                   absl::StrCat("--shard=", i),
                                   absl::StrCat("--replica=", r)});
        }
        absl::StatusOr<std::string> address =
            Spawn(absl::StrCat("server-", i, "-", r), std::move(args));
        if (!address.ok()) return address.status();
        if (replicas == 1) client->server_addrs.push_back(*address);
      }
      if (r == 0 && replicas > 1) {
        if (absl::Status s = AwaitLayout(*client).status(); !s.ok()) {
          return s;
        }
      }
    }
    return absl::OkStatus();
  }

  absl::Status Stop() {
    for (auto& s : servers_) {
      if (absl::Status st = s->Stop(); !st.ok()) return st;
    }
    return absl::OkStatus();
  }

 private:
  absl::StatusOr<std::string> Spawn(std::string name,
                                    std::vector<std::string> args) {
    ServerProcessOptions o;
    o.binary = SiblingBinary("shardps-server");
    o.run_dir = dir_;
    o.name = std::move(name);
    o.extra_args = std::move(args);
    absl::StatusOr<std::unique_ptr<ServerProcess>> p = ServerProcess::Spawn(o);
    if (!p.ok()) return p.status();
    servers_.push_back(*std::move(p));
    return servers_.back()->address();
  }

  std::string dir_;
  std::unique_ptr<EtcdProcess> etcd_;
  std::vector<std::unique_ptr<ServerProcess>> servers_;
};

absl::StatusOr<Clients> ConnectClients(const BenchOptions& options) {
  Clients clients;
  for (int w = 0; w < options.workers; ++w) {
    ClientOptions o = options.client;
    o.worker = w;
    absl::StatusOr<std::unique_ptr<Client>> c = Client::Connect(o);
    if (!c.ok()) return c.status();
    if (absl::Status s = (*c)->WaitReady(absl::Seconds(20)); !s.ok()) return s;
    TableOptions table;
    table.name = "bench";
    table.num_params = options.params;
    table.optimizer.set_name("sgd");
    table.optimizer.set_learning_rate(0.01f);
    if (absl::Status s = (*c)->CreateTable(table); !s.ok()) return s;
    clients.push_back(*std::move(c));
  }
  return clients;
}

// Bytes on the wire (whole messages) of one direction over all clients.
uint64_t WireBytes(const Clients& clients, bool push) {
  uint64_t n = 0;
  for (const auto& c : clients) n += push ? c->push_bytes() : c->pull_bytes();
  return n;
}

struct Measured {
  PhaseResult push, pull, push_pull;
  double push_wire_mbps = 0, pull_wire_mbps = 0;
};

absl::StatusOr<Measured> Measure(Clients& clients,
                                 const BenchOptions& options) {
  // Warm up connections, flow-control windows and buffer pools.
  const absl::Duration warmup = std::min(absl::Seconds(1), options.length / 5);
  const Phase phases[] = {Phase::kPush, Phase::kPull, Phase::kPushPull};
  for (Phase phase : phases) {
    if (auto r = RunPhase(clients, options.params, warmup, phase); !r.ok()) {
      return r.status();
    }
  }
  Measured m;
  const double seconds = absl::ToDoubleSeconds(options.length);
  for (Phase phase : phases) {
    const bool push = phase == Phase::kPush;
    const uint64_t before = WireBytes(clients, push);
    absl::StatusOr<PhaseResult> r =
        RunPhase(clients, options.params, options.length, phase);
    if (!r.ok()) return r.status();
    const double wire = (WireBytes(clients, push) - before) / seconds / 1e6;
    if (phase == Phase::kPushPull) {
      m.push_pull = *r;
    } else {
      (push ? m.push : m.pull) = *r;
      (push ? m.push_wire_mbps : m.pull_wire_mbps) = wire;
    }
  }
  return m;
}

// `client`: the clients' options, with the chunk sizes they chose.
void Print(const BenchOptions& o, int servers, const ClientOptions& client,
           const Measured& m) {
  const size_t push_kb = client.push_chunk_bytes >> 10;
  const size_t pull_kb = client.chunk_bytes >> 10;
  if (o.json) {
    absl::PrintF(
        "{\"servers\":%d,\"replicas\":%d,\"workers\":%d,\"params\":%d,"
        "\"compression\":\"%s\",\"push_chunk_kb\":%d,\"pull_chunk_kb\":%d,"
        "\"push_MBps\":%.1f,\"pull_MBps\":%.1f,\"push_wire_MBps\":%.1f,"
        "\"pull_wire_MBps\":%.1f,\"push_p50_ms\":%.3f,\"push_p99_ms\":%.3f,"
        "\"pull_p50_ms\":%.3f,\"pull_p99_ms\":%.3f,\"push_pull_MBps\":%.1f,"
        "\"push_pull_p50_ms\":%.3f,\"push_pull_p99_ms\":%.3f}\n",
        servers, o.replicas, o.workers, o.params, o.compression, push_kb,
        pull_kb, m.push.mbps, m.pull.mbps, m.push_wire_mbps, m.pull_wire_mbps,
        m.push.p50_ms, m.push.p99_ms, m.pull.p50_ms, m.pull.p99_ms,
        m.push_pull.mbps, m.push_pull.p50_ms, m.push_pull.p99_ms);
    return;
  }
  absl::PrintF(
      "servers=%d replicas=%d workers=%d params=%d compression=%s "
      "chunks push=%d pull=%d KiB (MB/s of float32 parameters; on the wire "
      "in brackets)\n"
      "  push %8.1f MB/s (%.1f)  p50 %.3f ms  p99 %.3f ms\n"
      "  pull %8.1f MB/s (%.1f)  p50 %.3f ms  p99 %.3f ms\n"
      "  push_pull %8.1f MB/s each way  p50 %.3f ms  p99 %.3f ms\n",
      servers, o.replicas, o.workers, o.params, o.compression, push_kb, pull_kb,
      m.push.mbps, m.push_wire_mbps, m.push.p50_ms, m.push.p99_ms, m.pull.mbps,
      m.pull_wire_mbps, m.pull.p50_ms, m.pull.p99_ms, m.push_pull.mbps,
      m.push_pull.p50_ms, m.push_pull.p99_ms);
}

}  // namespace

absl::Status RunBench(BenchOptions options) {
  if (options.workers < 1 || options.params < 1 ||
      options.length <= absl::ZeroDuration() || options.spawn_servers < 0) {
    return absl::InvalidArgumentError(
        "--workers and --params must be >= 1, --seconds > 0, "
        "--spawn_servers >= 0");
  }
  SpawnedServers spawned;
  if (options.replicas < 1 ||
      (options.replicas > 1 && options.spawn_servers == 0)) {
    return absl::InvalidArgumentError(
        "--replicas must be >= 1, and > 1 only with --spawn_servers");
  }
  if (options.spawn_servers > 0) {
    options.client.server_addrs.clear();
    if (absl::Status s = spawned.Start(options.spawn_servers, options.replicas,
                                       &options.client);
        !s.ok()) {
      return s;
    }
  } else if (!options.client.etcd.empty()) {
    absl::StatusOr<JobLayout> layout = AwaitLayout(options.client);
    if (!layout.ok()) return layout.status();
    options.replicas = static_cast<int>(layout->shards[0].replicas.size());
  }
  absl::StatusOr<Clients> clients = ConnectClients(options);
  if (!clients.ok()) return clients.status();
  absl::StatusOr<Measured> measured = Measure(*clients, options);
  if (!measured.ok()) return measured.status();
  int servers = options.spawn_servers;
  if (servers == 0) {
    servers = options.client.etcd.empty()
                  ? static_cast<int>(options.client.server_addrs.size())
                  : options.client.num_shards;
  }
  Print(options, servers, clients->front()->options(), *measured);
  clients->clear();
  return spawned.Stop();
}

}  // namespace ps
