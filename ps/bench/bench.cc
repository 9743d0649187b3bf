#include "ps/bench/bench.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/strings/str_format.h"
#include "ps/bench/sparse_bench.h"
#include "ps/bench/spawned_servers.h"
#include "ps/bench/timed_calls.h"

namespace ps {
namespace {

struct PhaseResult {
  double mbps = 0;
  double p50_ms = 0;
  double p99_ms = 0;
};

using Clients = std::vector<std::unique_ptr<Client>>;

// What a phase's calls do with the whole table: push a gradient, pull the
// values, or both in one PushPull (a worker's step in one round trip).
enum class Phase { kPush, kPull, kPushPull };

absl::Status CallOnce(Client& client, uint64_t params, Phase phase,
                      const std::vector<float>& grad, float* values) {
  switch (phase) {
    case Phase::kPush:
      return client.Push("bench", 0, params, grad.data());
    case Phase::kPull:
      return client.Pull("bench", 0, params, values);
    case Phase::kPushPull:
      return client.PushPull("bench", 0, params, grad.data(), values);
  }
  return absl::InternalError("unknown phase");
}

// Every client calls with the whole table until the phase ends; a failed
// call ends the run with its error.
absl::StatusOr<PhaseResult> RunPhase(Clients& clients, uint64_t params,
                                     absl::Duration length, Phase phase) {
  const std::vector<float> grad(params, 1e-6f);
  std::vector<std::vector<float>> values(clients.size(),
                                         std::vector<float>(params));
  absl::StatusOr<TimedCalls> calls = RunTimedCalls(
      static_cast<int>(clients.size()), length, [&](int t, uint64_t) {
        return CallOnce(*clients[t], params, phase, grad, values[t].data());
      });
  if (!calls.ok()) return calls.status();
  PhaseResult r;
  r.mbps = calls->latencies_ms.size() * params * sizeof(float) / 1e6 /
           calls->seconds;
  r.p50_ms = calls->p50_ms;
  r.p99_ms = calls->p99_ms;
  return r;
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

absl::StatusOr<std::vector<std::unique_ptr<Client>>> ConnectBenchClients(
    const BenchOptions& options,
    absl::FunctionRef<absl::Status(Client&)> create_table) {
  std::vector<std::unique_ptr<Client>> clients;
  for (int w = 0; w < options.workers; ++w) {
    ClientOptions o = options.client;
    o.worker = w;
    absl::StatusOr<std::unique_ptr<Client>> c = Client::Connect(o);
    if (!c.ok()) return c.status();
    if (absl::Status s = (*c)->WaitReady(absl::Seconds(20)); !s.ok()) return s;
    if (absl::Status s = create_table(**c); !s.ok()) return s;
    clients.push_back(*std::move(c));
  }
  return clients;
}

absl::Status RunBench(BenchOptions options) {
  if (options.workers < 1 || options.params < 1 ||
      options.length <= absl::ZeroDuration() || options.spawn_servers < 0) {
    return absl::InvalidArgumentError(
        "--workers and --params must be >= 1, --seconds > 0, "
        "--spawn_servers >= 0");
  }
  if (options.sparse.enabled) {
    if (absl::Status s = CheckSparseBenchOptions(options); !s.ok()) return s;
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
  int servers = options.spawn_servers;
  if (servers == 0) {
    servers = options.client.etcd.empty()
                  ? static_cast<int>(options.client.server_addrs.size())
                  : options.client.num_shards;
  }
  if (options.sparse.enabled) {
    if (absl::Status s = RunSparseBench(options, servers); !s.ok()) return s;
    return spawned.Stop();
  }
  absl::StatusOr<Clients> clients =
      ConnectBenchClients(options, [&](Client& c) {
        TableOptions table;
        table.name = "bench";
        table.num_params = options.params;
        table.optimizer.set_name("sgd");
        table.optimizer.set_learning_rate(0.01f);
        return c.CreateTable(table);
      });
  if (!clients.ok()) return clients.status();
  absl::StatusOr<Measured> measured = Measure(*clients, options);
  if (!measured.ok()) return measured.status();
  Print(options, servers, clients->front()->options(), *measured);
  clients->clear();
  return spawned.Stop();
}

}  // namespace ps
