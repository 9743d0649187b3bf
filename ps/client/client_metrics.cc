#include "ps/client/client_metrics.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "ps/obs/metrics_endpoint.h"

namespace ps {

ClientMetrics::ClientMetrics(prometheus::Registry& registry, int num_shards)
    : shards_(num_shards) {
  auto& calls = prometheus::BuildCounter()
                    .Name("shardps_client_rpcs_total")
                    .Help("Chunk calls finished, by method and shard.")
                    .Register(registry);
  auto& errors = prometheus::BuildCounter()
                     .Name("shardps_client_rpc_errors_total")
                     .Help("Chunk calls failed, by method and shard.")
                     .Register(registry);
  auto& seconds = prometheus::BuildHistogram()
                      .Name("shardps_client_rpc_seconds")
                      .Help(
                          "A chunk call's time from launch to completion, "
                          "by method and shard.")
                      .Register(registry);
  auto& sent = prometheus::BuildCounter()
                   .Name("shardps_client_sent_bytes_total")
                   .Help("Request bytes of chunk calls, by method.")
                   .Register(registry);
  auto& received = prometheus::BuildCounter()
                       .Name("shardps_client_received_bytes_total")
                       .Help("Response bytes of chunk calls, by method.")
                       .Register(registry);
  const char* const methods[kMethods] = {"Pull", "Push", "PullRows",
                                         "PushRows"};
  for (int shard = 0; shard < num_shards; ++shard) {
    for (int m = 0; m < kMethods; ++m) {
      const prometheus::Labels labels{{"method", methods[m]},
                                      {"shard", absl::StrCat(shard)}};
      shards_[shard][m] = {&calls.Add(labels), &errors.Add(labels),
                           &seconds.Add(labels, LatencyBuckets())};
    }
  }
  for (int m = 0; m < kMethods; ++m) {
    sent_[m] = &sent.Add({{"method", methods[m]}});
    received_[m] = &received.Add({{"method", methods[m]}});
  }
  retries_ = &prometheus::BuildCounter()
                  .Name("shardps_client_retries_total")
                  .Help(
                      "Pull, push and table calls retried after a "
                      "retryable error.")
                  .Register(registry)
                  .Add({});
}

void ClientMetrics::RecordCall(Method method, int shard, bool ok,
                               size_t bytes_sent, size_t bytes_received,
                               absl::Duration latency) {
  const int m = static_cast<int>(method);
  PerCall& call = shards_[shard][m];
  call.calls->Increment();
  if (!ok) call.errors->Increment();
  call.seconds->Observe(absl::ToDoubleSeconds(latency));
  sent_[m]->Increment(static_cast<double>(bytes_sent));
  received_[m]->Increment(static_cast<double>(bytes_received));
}

}  // namespace ps
