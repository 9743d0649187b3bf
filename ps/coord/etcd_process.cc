#include "ps/coord/etcd_process.h"

#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "ps/base/free_port.h"
#include "ps/coord/etcd_client.h"

namespace ps {

absl::StatusOr<std::unique_ptr<EtcdProcess>> EtcdProcess::Start(
    EtcdProcessOptions options) {
  if (options.data_dir.empty() || options.client_port < 0 ||
      options.peer_port < 0) {
    return absl::InvalidArgumentError(
        "etcd needs a data directory (and ports >= 0)");
  }
  const bool picking = options.client_port == 0 || options.peer_port == 0;
  for (int attempt = 1;; ++attempt) {
    EtcdProcessOptions o = options;
    for (int* port : {&o.client_port, &o.peer_port}) {
      if (*port != 0) continue;
      absl::StatusOr<int> picked = PickFreePort(o.host);
      if (!picked.ok()) return picked.status();
      *port = *picked;
    }
    absl::StatusOr<std::unique_ptr<EtcdProcess>> etcd = StartOnce(o);
    // A port picked free may be taken before etcd binds it (by any
    // process's outgoing connection): then pick again.
    if (etcd.ok() || !picking || attempt == 3 ||
        !absl::StrContains(etcd.status().message(), "address already in use")) {
      return etcd;
    }
  }
}

absl::StatusOr<std::unique_ptr<EtcdProcess>> EtcdProcess::StartOnce(
    const EtcdProcessOptions& options) {
  const std::string client =
      absl::StrCat("http://", options.host, ":", options.client_port);
  const std::string peer =
      absl::StrCat("http://", options.host, ":", options.peer_port);
  const std::vector<std::string> argv = {
      options.binary,
      "--name=shardps",
      absl::StrCat("--data-dir=", options.data_dir),
      absl::StrCat("--listen-client-urls=", client),
      absl::StrCat("--advertise-client-urls=", client),
      absl::StrCat("--listen-peer-urls=", peer),
      absl::StrCat("--initial-advertise-peer-urls=", peer),
      absl::StrCat("--initial-cluster=shardps=", peer),
      "--heartbeat-interval=50",
      "--election-timeout=250",
      "--log-level=warn"};
  absl::StatusOr<std::unique_ptr<ChildProcess>> child =
      ChildProcess::Start("etcd", argv, options.log_path);
  if (!child.ok()) return child.status();
  std::unique_ptr<EtcdProcess> etcd(
      new EtcdProcess(options, *std::move(child)));
  EtcdOptions client_options;
  client_options.endpoint = etcd->endpoint();
  client_options.timeout = absl::Seconds(1);
  absl::StatusOr<std::unique_ptr<EtcdClient>> probe =
      EtcdClient::Create(client_options);
  if (!probe.ok()) return probe.status();
  const absl::Time deadline = absl::Now() + options.start_timeout;
  while (true) {
    absl::Status answered = (*probe)->Get("/shardps/").status();
    if (answered.ok()) return etcd;
    if (std::optional<absl::Status> ended = etcd->process_->Poll();
        ended.has_value()) {
      return absl::UnavailableError(absl::StrCat(
          options.binary, " exited before serving: ", ended->message(), ": ",
          LogTail(options.log_path)));
    }
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat(options.binary, " did not answer within ",
                       absl::FormatDuration(options.start_timeout), " (",
                       answered.message(), "): ", LogTail(options.log_path)));
    }
    absl::SleepFor(absl::Milliseconds(20));  // polling interval
  }
}

std::string EtcdProcess::endpoint() const {
  return absl::StrCat("http://", options_.host, ":", options_.client_port);
}

}  // namespace ps
