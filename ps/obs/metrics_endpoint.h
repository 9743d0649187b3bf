// MetricsEndpoint serves Prometheus metrics over HTTP (GET /metrics, the
// text exposition format) from a thread of its own: the --metrics_port of
// shardps-server and shardps-worker. Metrics that change on a hot path
// (counters, histograms) live in registry(), created once and updated in
// place; metrics of state that is cheaper to read than to track (table
// versions, worker clocks) come from collectors, called at each scrape.
//
//   auto endpoint = ps::MetricsEndpoint::Start("0.0.0.0", 9100);
//   prometheus::BuildCounter().Name("x_total").Register(endpoint->registry());
//
// Thread-safety: all methods are safe to call concurrently. Stop (or
// destroying the endpoint) stops the HTTP server; no collector runs after
// it returns.
#ifndef SHARDPS_PS_OBS_METRICS_ENDPOINT_H_
#define SHARDPS_PS_OBS_METRICS_ENDPOINT_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "prometheus/exposer.h"
#include "prometheus/metric_family.h"
#include "prometheus/registry.h"

namespace ps {

class MetricsEndpoint {
 public:
  // Listens on host:port (port 0: any free port). UNAVAILABLE naming the
  // address when it cannot (port in use, not an address of this host).
  static absl::StatusOr<std::unique_ptr<MetricsEndpoint>> Start(
      absl::string_view host, int port);
  MetricsEndpoint(const MetricsEndpoint&) = delete;
  MetricsEndpoint& operator=(const MetricsEndpoint&) = delete;
  ~MetricsEndpoint();

  // Stops serving; the registry stays valid. Idempotent. Whoever owns what
  // a collector reads calls this before destroying it.
  void Stop();

  prometheus::Registry& registry() { return *registry_; }
  int port() const { return port_; }

  // Families returned by `collect` are added to every scrape. It runs on the
  // endpoint's HTTP threads, so it must be thread-safe and stay callable
  // until the endpoint is destroyed.
  using Collect = std::function<std::vector<prometheus::MetricFamily>()>;
  void AddCollector(Collect collect);

 private:
  MetricsEndpoint() = default;
  // Opens and closes a connection to the endpoint.
  void WakeListener() const;

  std::shared_ptr<prometheus::Registry> registry_;
  absl::Mutex mu_;
  std::vector<std::shared_ptr<prometheus::Collectable>> collectors_
      ABSL_GUARDED_BY(mu_);
  std::unique_ptr<prometheus::Exposer> exposer_ ABSL_GUARDED_BY(mu_);
  std::string host_;
  int port_ = 0;
};

// Builders for collectors: a family of `type`, and one sample of it.
prometheus::MetricFamily MakeFamily(std::string name, std::string help,
                                    prometheus::MetricType type);
void AddSample(prometheus::MetricFamily& family,
               std::vector<prometheus::ClientMetric::Label> labels,
               double value);

// Upper bounds of every latency histogram's buckets (servers, clients,
// workers alike, so that their figures compare), 50 us to 10 s.
std::vector<double> LatencyBuckets();

}  // namespace ps

#endif  // SHARDPS_PS_OBS_METRICS_ENDPOINT_H_
