// ClientMetrics is what a ps::Client reports to Prometheus
// (ps/obs/metrics_endpoint.h), all names prefixed shardps_client_:
//
//   rpcs_total{method,shard}          chunk calls finished (Pull, Push,
//                                     PullRows, PushRows)
//   rpc_errors_total{method,shard}    of those, failed
//   rpc_seconds{method,shard}         a call's time, launch to completion
//   sent_bytes_total{method}          request bytes
//   received_bytes_total{method}      response bytes
//   retries_total                     calls retried after a retryable error
//
// Thread-safety: all methods may be called concurrently.
#ifndef SHARDPS_PS_CLIENT_CLIENT_METRICS_H_
#define SHARDPS_PS_CLIENT_CLIENT_METRICS_H_

#include <array>
#include <cstddef>
#include <vector>

#include "absl/time/time.h"
#include "prometheus/counter.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace ps {

class ClientMetrics {
 public:
  // Registers the families in `registry`, which must outlive this, with a
  // series per shard of `num_shards`.
  ClientMetrics(prometheus::Registry& registry, int num_shards);
  ClientMetrics(const ClientMetrics&) = delete;
  ClientMetrics& operator=(const ClientMetrics&) = delete;

  int num_shards() const { return static_cast<int>(shards_.size()); }
  // What a call moved: the dense calls (a PushPull counts as a push) and
  // the sparse tables' rows.
  enum class Method { kPull, kPush, kPullRows, kPushRows };
  static constexpr int kMethods = 4;
  void RecordCall(Method method, int shard, bool ok, size_t bytes_sent,
                  size_t bytes_received, absl::Duration latency);
  void RecordRetry() { retries_->Increment(); }

 private:
  struct PerCall {
    prometheus::Counter* calls;
    prometheus::Counter* errors;
    prometheus::Histogram* seconds;
  };
  // Per shard, per Method.
  std::vector<std::array<PerCall, kMethods>> shards_;
  std::array<prometheus::Counter*, kMethods> sent_;
  std::array<prometheus::Counter*, kMethods> received_;
  prometheus::Counter* retries_;
};

}  // namespace ps

#endif  // SHARDPS_PS_CLIENT_CLIENT_METRICS_H_
