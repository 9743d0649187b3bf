// shardps-doctor: checks a cluster's servers once, with the cluster flags a
// worker would get, and says per server what is wrong (worker/launch/
// cluster_check.h). A pre-flight step before workers start:
//   shardps-doctor --server_addrs=h1:7070,h2:7070 --job=J
//       [--tls_ca=ca.pem] [--auth_token_file=F] [--report=check.json]
// With --wait_s it may start with the servers: it checks again while they
// are still coming up. Prints one line per server; --report writes the
// JSON report ("-": standard output, the lines then go to standard error).
// Exit code 0 when every server is ready, 1 when one is not, 2 on a bad
// flag.
#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "ps/base/json_file.h"
#include "ps/base/program.h"
#include "ps/client/server_addrs.h"
#include "ps/wire/security_flags.h"
#include "worker/launch/cluster_check.h"

ABSL_FLAG(std::string, server_addrs, "",
          "The servers, as workers get them: host:port,... in shard order, "
          "or a pattern with {i} plus --num_servers.");
ABSL_FLAG(int, num_servers, 0, "Server count for a {i} --server_addrs.");
ABSL_FLAG(std::string, job, "default", "Job id the servers were started with.");
ABSL_FLAG(double, timeout_s, 5,
          "Seconds each server gets to pass every check (they are checked at "
          "once).");
ABSL_FLAG(double, wait_s, 0,
          "Check again every 2 s for up to this many seconds while the only "
          "problems are ones a server still starting has (name not yet in "
          "DNS, connection refused, handshake); a refused job, token or "
          "protocol, or inconsistent tables, end the wait at once.");
ABSL_FLAG(std::string, report, "",
          "Also write the JSON report here ('-': standard output).");

namespace {

int BadFlag(const std::string& flag, const absl::Status& s) {
  absl::FPrintF(stderr, "shardps-doctor: %s: %s\n", flag, s.message());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  ps::GrpcRuntime grpc_runtime;
  ps::InitProgram(argc, argv,
                  "checks that every server of a cluster is reachable and "
                  "ready, and says why one is not.\n"
                  "  shardps-doctor --server_addrs=h1:7070,h2:7070 --job=J");
  worker::ClusterCheckOptions options;
  absl::StatusOr<std::vector<std::string>> addrs = ps::ParseServerAddrs(
      absl::GetFlag(FLAGS_server_addrs), absl::GetFlag(FLAGS_num_servers));
  if (!addrs.ok()) return BadFlag("--server_addrs", addrs.status());
  options.server_addrs = *std::move(addrs);
  options.job = absl::GetFlag(FLAGS_job);
  const double timeout_s = absl::GetFlag(FLAGS_timeout_s);
  if (!(timeout_s > 0 && timeout_s <= 3600)) {
    return BadFlag("--timeout_s",
                   absl::InvalidArgumentError("must be in (0, 3600]"));
  }
  options.timeout = absl::Seconds(timeout_s);
  absl::StatusOr<ps::Security> security = ps::SecurityFromFlags();
  if (!security.ok()) {
    absl::FPrintF(stderr, "shardps-doctor: %s\n", security.status().message());
    return 2;
  }
  options.tls = security->tls;
  options.auth_token = security->auth_token;

  const double wait_s = absl::GetFlag(FLAGS_wait_s);
  if (!(wait_s >= 0 && wait_s <= 86400)) {
    return BadFlag("--wait_s",
                   absl::InvalidArgumentError("must be in [0, 86400]"));
  }
  const absl::Time give_up = absl::Now() + absl::Seconds(wait_s);
  absl::StatusOr<shardps::ClusterCheckReport> checked =
      worker::CheckClusterUntil(
          options, give_up, [&](const shardps::ClusterCheckReport& report) {
            absl::FPrintF(stderr,
                          "shardps-doctor: %d of %d servers ready, waiting "
                          "(%.0f s left); first not ready: %s\n",
                          report.servers_ready(), report.servers_size(),
                          absl::ToDoubleSeconds(give_up - absl::Now()),
                          worker::FirstProblem(report));
          });
  if (!checked.ok()) {
    absl::FPrintF(stderr, "shardps-doctor: %s\n", checked.status().message());
    return 2;
  }
  const shardps::ClusterCheckReport& report = *checked;
  const std::string report_path = absl::GetFlag(FLAGS_report);
  std::FILE* lines = report_path == "-" ? stderr : stdout;
  absl::FPrintF(lines, "%s", worker::FormatCheckReport(report));
  if (report_path == "-") {
    absl::StatusOr<std::string> json = ps::ToJson(report);
    if (!json.ok()) return BadFlag("--report", json.status());
    absl::PrintF("%s\n", *json);
  } else if (!report_path.empty()) {
    if (absl::Status s = ps::WriteJsonFile(report, report_path); !s.ok()) {
      return BadFlag("--report", s);
    }
  }
  return report.ok() ? 0 : 1;
}
