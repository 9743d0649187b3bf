#include "ps/obs/metrics_endpoint.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <exception>
#include <thread>
#include <utility>

#include "absl/memory/memory.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace ps {
namespace {

class CallbackCollectable final : public prometheus::Collectable {
 public:
  explicit CallbackCollectable(MetricsEndpoint::Collect collect)
      : collect_(std::move(collect)) {}
  std::vector<prometheus::MetricFamily> Collect() const override {
    return collect_();
  }

 private:
  const MetricsEndpoint::Collect collect_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::Start(
    absl::string_view host, int port) {
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics port ", port, " is not in 0..65535"));
  }
  const std::string address = absl::StrCat(host, ":", port);
  std::unique_ptr<prometheus::Exposer> exposer;
  // prometheus-cpp reports a failed bind by throwing; it stops here.
  try {
    exposer = std::make_unique<prometheus::Exposer>(address, 2);
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat(
        "metrics endpoint cannot listen on ", address,
        " (address in use, or not an address of this host?): ", e.what()));
  }
  const std::vector<int> ports = exposer->GetListeningPorts();
  if (ports.empty()) {
    return absl::UnavailableError(
        absl::StrCat("metrics endpoint on ", address, " reports no port"));
  }
  auto endpoint = absl::WrapUnique(new MetricsEndpoint());
  endpoint->host_ = std::string(host);
  endpoint->port_ = ports[0];
  endpoint->registry_ = std::make_shared<prometheus::Registry>();
  exposer->RegisterCollectable(endpoint->registry_);
  {
    absl::MutexLock lock(&endpoint->mu_);
    endpoint->exposer_ = std::move(exposer);
  }
  return endpoint;
}

// The HTTP threads stop before the collectors and the registry go.
MetricsEndpoint::~MetricsEndpoint() { Stop(); }

void MetricsEndpoint::Stop() {
  std::unique_ptr<prometheus::Exposer> exposer;
  {
    absl::MutexLock lock(&mu_);
    exposer = std::move(exposer_);
  }
  if (exposer == nullptr) return;
  // civetweb's listener sees the stop only when its poll returns, which
  // without a connection takes up to 2 s; connecting wakes it at once.
  std::atomic<bool> stopped{false};
  std::thread waker([this, &stopped] {
    while (!stopped.load()) {
      WakeListener();
      absl::SleepFor(absl::Milliseconds(20));
    }
  });
  // Joins the HTTP threads, outside the lock.
  exposer.reset();
  stopped.store(true);
  waker.join();
}

void MetricsEndpoint::WakeListener() const {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port_));
  // The wildcard address is reached through loopback.
  if (host_ == "0.0.0.0" ||
      inet_pton(AF_INET, host_.c_str(), &address.sin_addr) != 1) {
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  }
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  ::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address);
  ::close(fd);
}

void MetricsEndpoint::AddCollector(Collect collect) {
  auto collectable = std::make_shared<CallbackCollectable>(std::move(collect));
  absl::MutexLock lock(&mu_);
  if (exposer_ == nullptr) return;  // stopped
  exposer_->RegisterCollectable(collectable);
  collectors_.push_back(std::move(collectable));
}

prometheus::MetricFamily MakeFamily(std::string name, std::string help,
                                    prometheus::MetricType type) {
  prometheus::MetricFamily family;
  family.name = std::move(name);
  family.help = std::move(help);
  family.type = type;
  return family;
}

void AddSample(prometheus::MetricFamily& family,
               std::vector<prometheus::ClientMetric::Label> labels,
               double value) {
  prometheus::ClientMetric metric;
  metric.label = std::move(labels);
  if (family.type == prometheus::MetricType::Counter) {
    metric.counter.value = value;
  } else {
    metric.gauge.value = value;
  }
  family.metric.push_back(std::move(metric));
}

std::vector<double> LatencyBuckets() {
  return {5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2,
          5e-2, 0.1,  0.25,   0.5,  1,    2.5,    5,    10};
}

}  // namespace ps
