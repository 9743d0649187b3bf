#include "ps/server/server_metrics.h"

#include <algorithm>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "ps/obs/metrics_endpoint.h"

namespace ps {

const char* RpcMethodName(RpcMethod method) {
  switch (method) {
    case RpcMethod::kCreateTable:
      return "CreateTable";
    case RpcMethod::kPull:
      return "Pull";
    case RpcMethod::kPush:
      return "Push";
    case RpcMethod::kStats:
      return "Stats";
    case RpcMethod::kPushPull:
      return "PushPull";
    case RpcMethod::kAssign:
      return "Assign";
    case RpcMethod::kPullRows:
      return "PullRows";
    case RpcMethod::kPushRows:
      return "PushRows";
    case RpcMethod::kAttachMemory:
      return "AttachMemory";
    case RpcMethod::kDetachMemory:
      return "DetachMemory";
  }
  return "unknown";
}

ServerMetrics::ServerMetrics(prometheus::Registry& registry)
    : errors_(prometheus::BuildCounter()
                  .Name("shardps_server_errors_total")
                  .Help("Calls answered with an error, by method and status "
                        "code.")
                  .Register(registry)) {
  auto& seconds =
      prometheus::BuildHistogram()
          .Name("shardps_server_request_seconds")
          .Help(
              "Time from a call's arrival to its answer, by method (a "
              "pull's wait for other workers under sync or ssp included).")
          .Register(registry);
  for (int m = 0; m < kNumRpcMethods; ++m) {
    seconds_[m] =
        &seconds.Add({{"method", RpcMethodName(static_cast<RpcMethod>(m))}},
                     LatencyBuckets());
  }
}

void ServerMetrics::RecordCall(RpcMethod method, absl::StatusCode code,
                               absl::Duration latency) {
  seconds_[static_cast<int>(method)]->Observe(absl::ToDoubleSeconds(latency));
  if (code != absl::StatusCode::kOk) {
    // Rare: the label lookup is fine here.
    errors_
        .Add({{"method", RpcMethodName(method)},
              {"code", absl::StatusCodeToString(code)}})
        .Increment();
  }
}

std::vector<prometheus::MetricFamily> StatsFamilies(
    const shardps::StatsResponse& stats) {
  using prometheus::MetricType;
  auto requests = MakeFamily("shardps_server_requests_total",
                             "Calls answered, by method.", MetricType::Counter);
  auto received =
      MakeFamily("shardps_server_received_bytes_total",
                 "Request bytes received, by method.", MetricType::Counter);
  auto sent =
      MakeFamily("shardps_server_sent_bytes_total",
                 "Response bytes sent, by method.", MetricType::Counter);
  for (const shardps::MethodStats& m : stats.methods()) {
    AddSample(requests, {{"method", m.method()}},
              static_cast<double>(m.requests()));
    AddSample(received, {{"method", m.method()}},
              static_cast<double>(m.bytes_received()));
    AddSample(sent, {{"method", m.method()}},
              static_cast<double>(m.bytes_sent()));
  }
  auto keys =
      MakeFamily("shardps_server_table_keys",
                 "Keys of the table this shard owns.", MetricType::Gauge);
  auto applied = MakeFamily(
      "shardps_server_applied_updates_total",
      "Updates applied to the table since the server started (under sync, "
      "one per clock).",
      MetricType::Counter);
  auto clock =
      MakeFamily("shardps_server_worker_clock",
                 "The highest clock the worker has pushed.", MetricType::Gauge);
  auto lag =
      MakeFamily("shardps_server_worker_clock_lag",
                 "Clocks the worker is behind the table's fastest worker.",
                 MetricType::Gauge);
  auto consistency = MakeFamily(
      "shardps_server_consistency_clock",
      "sync: clocks applied; ssp: clocks every worker has pushed; 0: async.",
      MetricType::Gauge);
  auto dropped = MakeFamily("shardps_server_dropped_workers",
                            "Stragglers left out of the table's barrier.",
                            MetricType::Gauge);
  for (const shardps::TableStats& t : stats.tables()) {
    const std::string& table = t.table();
    AddSample(keys, {{"table", table}},
              static_cast<double>(t.end() - t.begin()));
    AddSample(applied, {{"table", table}},
              static_cast<double>(t.version() - t.restored_version()));
    AddSample(consistency, {{"table", table}},
              static_cast<double>(t.consistency_clock()));
    AddSample(dropped, {{"table", table}},
              static_cast<double>(t.dropped_workers_size()));
    uint64_t fastest = 0;
    for (const shardps::WorkerClock& w : t.worker_clocks()) {
      fastest = std::max(fastest, w.clock());
    }
    for (const shardps::WorkerClock& w : t.worker_clocks()) {
      const std::string worker = absl::StrCat(w.worker());
      AddSample(clock, {{"table", table}, {"worker", worker}},
                static_cast<double>(w.clock()));
      AddSample(lag, {{"table", table}, {"worker", worker}},
                static_cast<double>(fastest - w.clock()));
    }
  }
  auto duplicates =
      MakeFamily("shardps_server_duplicate_pushes_total",
                 "Retried pushes acknowledged without being applied again.",
                 MetricType::Counter);
  AddSample(duplicates, {}, static_cast<double>(stats.duplicate_pushes()));
  auto checkpoints =
      MakeFamily("shardps_server_checkpoints_written_total",
                 "Checkpoints written since start.", MetricType::Counter);
  AddSample(checkpoints, {}, static_cast<double>(stats.checkpoints_written()));
  return {std::move(requests),   std::move(received),    std::move(sent),
          std::move(keys),       std::move(applied),     std::move(clock),
          std::move(lag),        std::move(consistency), std::move(dropped),
          std::move(duplicates), std::move(checkpoints)};
}

}  // namespace ps
