#include "ps/bench/sparse_bench.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/random/zipf_distribution.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "ps/bench/timed_calls.h"
#include "ps/wire/row_partition.h"
#include "ps/wire/value_codec.h"

namespace ps {
namespace {

constexpr char kRows[] = "bench_rows";
constexpr char kDense[] = "bench_dense";
// Batches each worker draws and cycles through.
constexpr int kBatchesPerWorker = 8;

using Clients = std::vector<std::unique_ptr<Client>>;

// One worker's id batches and how many distinct ids each holds (the rows
// its calls move once the client has de-duplicated them).
struct Batches {
  std::vector<std::vector<uint64_t>> ids;
  std::vector<uint64_t> distinct;
};

}  // namespace

absl::Status CheckSparseBenchOptions(const BenchOptions& o) {
  const SparseBenchOptions& s = o.sparse;
  if (s.dim < 1 || s.ids_per_call < 1 || s.id_space < 2) {
    return absl::InvalidArgumentError(
        "--dim and --ids_per_call must be >= 1 and --id_space >= 2");
  }
  if (!(s.zipf == 0 || s.zipf > 1) || !std::isfinite(s.zipf)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--zipf must be 0 (uniform ids) or an exponent > 1, got ", s.zipf));
  }
  return absl::OkStatus();
}

namespace {

// Seeded by the worker, so that runs draw the same ids.
Batches DrawBatches(const SparseBenchOptions& o, int worker) {
  std::mt19937_64 random(0x5eed0000u + worker);
  std::uniform_int_distribution<uint64_t> uniform(0, o.id_space - 1);
  absl::zipf_distribution<uint64_t> zipf(o.id_space - 1,
                                         o.zipf > 1 ? o.zipf : 2.0);
  Batches b;
  for (int i = 0; i < kBatchesPerWorker; ++i) {
    std::vector<uint64_t> ids(o.ids_per_call);
    for (uint64_t& id : ids) id = o.zipf > 1 ? zipf(random) : uniform(random);
    b.distinct.push_back(
        absl::flat_hash_set<uint64_t>(ids.begin(), ids.end()).size());
    b.ids.push_back(std::move(ids));
  }
  return b;
}

absl::Status CreateRows(const SparseBenchOptions& o, Client& client) {
  RowTableOptions table;
  table.name = kRows;
  table.dim = o.dim;
  table.max_rows_per_shard = o.id_space;
  table.sharding = o.sharding;
  table.id_space = o.id_space;
  table.optimizer.set_name("sgd");
  table.optimizer.set_learning_rate(0.01f);
  return client.CreateRowTable(table);
}

// Rows each server has applied (push) or served (pull) for the table.
absl::StatusOr<std::vector<uint64_t>> ServerRows(Client& client, int servers,
                                                 bool push) {
  std::vector<uint64_t> rows;
  for (int s = 0; s < servers; ++s) {
    absl::StatusOr<shardps::StatsResponse> stats = client.ServerStats(s);
    if (!stats.ok()) return stats.status();
    const shardps::TableStats* found = nullptr;
    for (const shardps::TableStats& t : stats->tables()) {
      if (t.table() == kRows) found = &t;
    }
    if (found == nullptr) {
      return absl::NotFoundError(
          absl::StrCat("server ", s, " lost table ", kRows));
    }
    rows.push_back(push ? found->rows_pushed() : found->rows_pulled());
  }
  return rows;
}

struct RowPhase {
  TimedCalls calls;
  uint64_t ids = 0;   // asked for by the calls
  uint64_t rows = 0;  // distinct per call, summed: the rows that travel
  std::vector<uint64_t> server_rows;  // each server's, during the phase
};

absl::StatusOr<RowPhase> RunRowPhase(Clients& clients,
                                     const std::vector<Batches>& batches,
                                     uint32_t dim, absl::Duration length,
                                     bool push, int servers) {
  const int n = static_cast<int>(clients.size());
  const uint64_t per_call = batches[0].ids[0].size();
  const std::vector<float> grads(per_call * dim, 1e-6f);
  std::vector<std::vector<float>> out(n, std::vector<float>(per_call * dim));
  std::vector<uint64_t> rows(n, 0);
  absl::StatusOr<std::vector<uint64_t>> before =
      ServerRows(*clients[0], servers, push);
  if (!before.ok()) return before.status();
  RowPhase phase;
  absl::StatusOr<TimedCalls> calls =
      RunTimedCalls(n, length, [&](int t, uint64_t call) {
        const int b = static_cast<int>(call % kBatchesPerWorker);
        const std::vector<uint64_t>& ids = batches[t].ids[b];
        rows[t] += batches[t].distinct[b];
        return push ? clients[t]->PushRows(kRows, ids, grads.data())
                    : clients[t]->PullRows(kRows, ids, out[t].data());
      });
  if (!calls.ok()) return calls.status();
  absl::StatusOr<std::vector<uint64_t>> after =
      ServerRows(*clients[0], servers, push);
  if (!after.ok()) return after.status();
  phase.calls = *std::move(calls);
  phase.ids = phase.calls.latencies_ms.size() * per_call;
  for (uint64_t r : rows) phase.rows += r;
  for (int s = 0; s < servers; ++s) {
    phase.server_rows.push_back((*after)[s] - (*before)[s]);
  }
  return phase;
}

// Every row the timed calls touch is created here, once.
absl::Status TouchAll(Clients& clients, const std::vector<Batches>& batches,
                      uint32_t dim) {
  for (size_t t = 0; t < clients.size(); ++t) {
    std::vector<float> values(batches[t].ids[0].size() * dim);
    for (const std::vector<uint64_t>& ids : batches[t].ids) {
      if (absl::Status s = clients[t]->PullRows(kRows, ids, values.data());
          !s.ok()) {
        return s;
      }
    }
  }
  return absl::OkStatus();
}

// A dense push of `floats` per call from every client: the bytes a sparse
// push of the same rows moves.
absl::StatusOr<TimedCalls> DensePushOfSameBytes(Clients& clients,
                                                uint64_t floats,
                                                absl::Duration length) {
  for (auto& c : clients) {
    TableOptions table;
    table.name = kDense;
    table.num_params = floats;
    table.optimizer.set_name("sgd");
    table.optimizer.set_learning_rate(0.01f);
    if (absl::Status s = c->CreateTable(table); !s.ok()) return s;
  }
  const std::vector<float> grads(floats, 1e-6f);
  return RunTimedCalls(
      static_cast<int>(clients.size()), length, [&](int t, uint64_t) {
        return clients[t]->Push(kDense, 0, floats, grads.data());
      });
}

struct Load {
  std::vector<double> rows_per_s;   // per server, both phases
  std::vector<double> bytes_per_s;  // ids and values of those rows
  double max_over_mean = 0;
};

Load ServerLoad(const RowPhase& push, const RowPhase& pull, uint32_t dim,
                const ClientOptions& client) {
  const shardps::ValueEncoding push_encoding =
      client.push_encoding == shardps::ONEBIT ? shardps::FLOAT32
                                              : client.push_encoding;
  const double push_row_bytes =
      sizeof(uint64_t) + EncodedBytes(push_encoding, dim);
  const double pull_row_bytes =
      sizeof(uint64_t) + EncodedBytes(client.pull_encoding, dim);
  const double seconds = push.calls.seconds + pull.calls.seconds;
  Load load;
  double sum = 0, most = 0;
  for (size_t s = 0; s < push.server_rows.size(); ++s) {
    const double rows = push.server_rows[s] + pull.server_rows[s];
    load.rows_per_s.push_back(rows / seconds);
    load.bytes_per_s.push_back((push.server_rows[s] * push_row_bytes +
                                pull.server_rows[s] * pull_row_bytes) /
                               seconds);
    sum += rows;
    most = std::max(most, rows);
  }
  load.max_over_mean = sum > 0 ? most * push.server_rows.size() / sum : 0;
  return load;
}

std::string Figures(const std::vector<double>& values) {
  return absl::StrJoin(values, ",", [](std::string* out, double v) {
    absl::StrAppend(out, absl::StrFormat("%.0f", v));
  });
}

}  // namespace

absl::Status RunSparseBench(const BenchOptions& options, int servers) {
  if (absl::Status s = CheckSparseBenchOptions(options); !s.ok()) return s;
  const SparseBenchOptions& o = options.sparse;
  // Rows travel in messages; the dense push they are held against must too.
  BenchOptions in_messages = options;
  in_messages.client.shared_memory = false;
  absl::StatusOr<Clients> clients = ConnectBenchClients(
      in_messages, [&](Client& c) { return CreateRows(o, c); });
  if (!clients.ok()) return clients.status();
  std::vector<Batches> batches;
  double distinct = 0;
  for (int w = 0; w < options.workers; ++w) {
    batches.push_back(DrawBatches(o, w));
    for (uint64_t d : batches.back().distinct) distinct += d;
  }
  distinct /= options.workers * kBatchesPerWorker;
  if (absl::Status s = TouchAll(*clients, batches, o.dim); !s.ok()) return s;
  absl::StatusOr<RowPhase> push =
      RunRowPhase(*clients, batches, o.dim, options.length, true, servers);
  if (!push.ok()) return push.status();
  absl::StatusOr<RowPhase> pull =
      RunRowPhase(*clients, batches, o.dim, options.length, false, servers);
  if (!pull.ok()) return pull.status();
  const uint64_t dense_floats =
      std::max<uint64_t>(1, std::llround(distinct)) * o.dim;
  absl::StatusOr<TimedCalls> dense =
      DensePushOfSameBytes(*clients, dense_floats, options.length);
  if (!dense.ok()) return dense.status();

  const double push_rows_s = push->rows / push->calls.seconds;
  const double pull_rows_s = pull->rows / pull->calls.seconds;
  const double dense_rows_s = dense->latencies_ms.size() *
                              static_cast<double>(dense_floats / o.dim) /
                              dense->seconds;
  const double cost_vs_dense = push_rows_s > 0 ? dense_rows_s / push_rows_s : 0;
  const Load load = ServerLoad(*push, *pull, o.dim, (*clients)[0]->options());
  const char* sharding = RowShardingName(o.sharding);
  if (options.json) {
    absl::PrintF(
        "{\"mode\":\"sparse\",\"servers\":%d,\"workers\":%d,\"sharding\":"
        "\"%s\",\"dim\":%d,\"ids_per_call\":%d,\"id_space\":%d,\"zipf\":%.2f,"
        "\"compression\":\"%s\",\"distinct_per_call\":%.0f,"
        "\"push_ids_per_s\":%.0f,\"push_rows_per_s\":%.0f,\"push_p50_ms\":%.3f,"
        "\"push_p99_ms\":%.3f,\"pull_ids_per_s\":%.0f,\"pull_rows_per_s\":%.0f,"
        "\"pull_p50_ms\":%.3f,\"pull_p99_ms\":%.3f,"
        "\"dense_push_rows_per_s\":%.0f,\"push_cost_vs_dense\":%.3f,"
        "\"server_rows_per_s\":[%s],\"server_bytes_per_s\":[%s],"
        "\"load_max_over_mean\":%.3f}\n",
        servers, options.workers, sharding, o.dim, o.ids_per_call, o.id_space,
        o.zipf, options.compression, distinct, push->ids / push->calls.seconds,
        push_rows_s, push->calls.p50_ms, push->calls.p99_ms,
        pull->ids / pull->calls.seconds, pull_rows_s, pull->calls.p50_ms,
        pull->calls.p99_ms, dense_rows_s, cost_vs_dense,
        Figures(load.rows_per_s), Figures(load.bytes_per_s),
        load.max_over_mean);
    return absl::OkStatus();
  }
  absl::PrintF(
      "sparse: servers=%d workers=%d sharding=%s dim=%d ids_per_call=%d "
      "id_space=%d zipf=%.2f compression=%s (%.0f distinct ids per call)\n"
      "  push rows %10.0f ids/s %10.0f rows/s  p50 %.3f ms  p99 %.3f ms\n"
      "  pull rows %10.0f ids/s %10.0f rows/s  p50 %.3f ms  p99 %.3f ms\n"
      "  dense push of the same bytes %.0f rows/s: a sparse push costs "
      "%.2fx per row\n"
      "  per-server load (rows/s, pushes and pulls): %s  max/mean %.3f\n",
      servers, options.workers, sharding, o.dim, o.ids_per_call, o.id_space,
      o.zipf, options.compression, distinct, push->ids / push->calls.seconds,
      push_rows_s, push->calls.p50_ms, push->calls.p99_ms,
      pull->ids / pull->calls.seconds, pull_rows_s, pull->calls.p50_ms,
      pull->calls.p99_ms, dense_rows_s, cost_vs_dense, Figures(load.rows_per_s),
      load.max_over_mean);
  return absl::OkStatus();
}

}  // namespace ps
