// What a parameter server reports to Prometheus (ps/obs/metrics_endpoint.h),
// all names prefixed shardps_server_. ServerMetrics counts per call what
// the server's Stats do not keep:
//
//   errors_total{method,code}         calls answered with an error
//   request_seconds{method}           arrival to answer (a histogram); for a
//                                     pull that waited for other workers under
//                                     sync or ssp, the wait included
//
// and StatsFamilies turns the Stats into the rest at each scrape:
//
//   requests_total{method}            calls answered, by RPC method
//   received_bytes_total{method}      request bytes (the gradient's wire
//   sent_bytes_total{method}          bytes for a push, the values' for a pull)
//   table_keys{table}                 keys this shard owns
//   applied_updates_total{table}      updates applied since the server started
//   worker_clock{table,worker}        the highest clock the worker pushed
//   worker_clock_lag{table,worker}    how far it is behind the table's
//                                     fastest worker, in clocks
//   consistency_clock{table}          sync: clocks applied; ssp: clocks every
//                                     worker has pushed
//   dropped_workers{table}            stragglers left out of the barrier
//   duplicate_pushes_total            retried pushes acknowledged, not applied
//   checkpoints_written_total
//
// Thread-safety: RecordCall may be called concurrently.
#ifndef SHARDPS_PS_SERVER_SERVER_METRICS_H_
#define SHARDPS_PS_SERVER_SERVER_METRICS_H_

#include <array>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/histogram.h"
#include "prometheus/metric_family.h"
#include "prometheus/registry.h"
#include "proto/shardps.pb.h"

namespace ps {

enum class RpcMethod {
  kCreateTable,
  kPull,
  kPush,
  kStats,
  kPushPull,
  kAssign,
  kPullRows,
  kPushRows,
  kAttachMemory,
  kDetachMemory
};
inline constexpr int kNumRpcMethods = 10;
const char* RpcMethodName(RpcMethod method);

class ServerMetrics {
 public:
  // Registers the families in `registry`, which must outlive this.
  explicit ServerMetrics(prometheus::Registry& registry);
  ServerMetrics(const ServerMetrics&) = delete;
  ServerMetrics& operator=(const ServerMetrics&) = delete;

  void RecordCall(RpcMethod method, absl::StatusCode code,
                  absl::Duration latency);

 private:
  prometheus::Family<prometheus::Counter>& errors_;
  // Resolved once: a call touches no label map on its way.
  std::array<prometheus::Histogram*, kNumRpcMethods> seconds_;
};

// The scrape-time families above, from a server's Stats.
std::vector<prometheus::MetricFamily> StatsFamilies(
    const shardps::StatsResponse& stats);

}  // namespace ps

#endif  // SHARDPS_PS_SERVER_SERVER_METRICS_H_
