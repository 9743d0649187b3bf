#include "worker/launch/cluster_check.h"

#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <map>
#include <memory>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "ps/base/build_version.h"
#include "ps/base/log.h"
#include "ps/base/tcp_probe.h"
#include "ps/client/client.h"
#include "ps/client/fan_out.h"
#include "ps/client/server_addrs.h"
#include "ps/wire/protocol_version.h"
#include "ps/wire/range_partition.h"

namespace worker {
namespace {

// The client's progress lines while it waits: the check reports the cause
// once, in its own line.
class QuietLog final : public ps::LogSink {
 public:
  void Write(absl::string_view) override {}
};

void Fail(shardps::ServerCheck* check, absl::string_view stage,
          absl::string_view problem) {
  check->set_ready(false);
  check->set_stage(std::string(stage));
  check->set_problem(std::string(problem));
}

// The first IPv4 address `host` resolves to ("" when it resolves to IPv6
// only), or the resolver's error.
absl::StatusOr<std::string> Resolve(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(host.c_str(), nullptr, &hints, &found); rc != 0) {
    return absl::NotFoundError(gai_strerror(rc));
  }
  std::string ipv4;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    char text[NI_MAXHOST];
    if (a->ai_family == AF_INET &&
        getnameinfo(a->ai_addr, a->ai_addrlen, text, sizeof(text), nullptr, 0,
                    NI_NUMERICHOST) == 0) {
      ipv4 = text;
      break;
    }
  }
  freeaddrinfo(found);
  return ipv4;
}

// The cause in a client error about `shard` at `address`, without the
// "... on shard S at ADDRESS: " the report's line already says.
std::string CauseOf(const absl::Status& s, int shard,
                    absl::string_view address) {
  const std::string named =
      absl::StrCat("shard ", shard, " at ", address, ": ");
  const size_t at = s.message().find(named);
  return std::string(at == absl::string_view::npos
                         ? s.message()
                         : s.message().substr(at + named.size()));
}

// Which check a failed WaitReady stopped at, from its status code (and for
// FAILED_PRECONDITION, which of the two refusals it carries).
absl::string_view StageOf(const absl::Status& s) {
  if (absl::IsUnauthenticated(s) || absl::IsPermissionDenied(s)) {
    return "authenticate";
  }
  if (absl::IsFailedPrecondition(s)) {
    return absl::StrContains(s.message(), "wire protocol") ? "version" : "job";
  }
  return "handshake";
}

// Resolve, connect, then WaitReady (handshake, health, version, job, token)
// and Stats for the tables.
void CheckServer(const ClusterCheckOptions& options, ps::Client* client,
                 int shard, shardps::ServerCheck* check) {
  const absl::Time deadline = absl::Now() + options.timeout;
  const std::string& address = options.server_addrs[shard];
  check->set_shard(shard);
  check->set_address(address);
  check->set_ready(true);
  absl::StatusOr<ps::HostPort> split = ps::SplitServerAddress(address);
  if (!split.ok()) return Fail(check, "address", split.status().message());
  const std::string& host = split->host;
  absl::StatusOr<std::string> ipv4 = Resolve(host);
  if (!ipv4.ok()) {
    return Fail(
        check, "resolve",
        absl::StrCat("the name '", host,
                     "' does not resolve (DNS): ", ipv4.status().message(),
                     "; check the host name and the DNS of this machine"));
  }
  if (!ipv4->empty()) {
    absl::StatusOr<ps::ProbeResult> probe =
        ps::ProbeTcp(absl::StrCat(*ipv4, ":", split->port), options.timeout);
    if (probe.ok() && *probe == ps::ProbeResult::kRefused) {
      return Fail(check, "connect",
                  absl::StrCat("connection refused: is a shardps-server "
                               "listening at ",
                               address, "?"));
    }
    if (probe.ok() && *probe == ps::ProbeResult::kNoAnswer) {
      return Fail(
          check, "connect",
          absl::StrCat("no answer from ", address, " (", *ipv4, ") within ",
                       absl::FormatDuration(options.timeout),
                       ": a firewall, no route, or the host is down"));
    }
  }
  if (absl::Status ready =
          client->WaitServerReady(shard, deadline - absl::Now());
      !ready.ok()) {
    return Fail(check, StageOf(ready), CauseOf(ready, shard, address));
  }
  absl::StatusOr<shardps::StatsResponse> answer = client->ServerStats(shard);
  if (!answer.ok()) {
    return Fail(check, "tables", CauseOf(answer.status(), shard, address));
  }
  check->set_build_version(answer->build_version());
  check->set_protocol_version(answer->protocol_version());
  for (const shardps::TableStats& t : answer->tables()) {
    shardps::TableShardCheck* table = check->add_tables();
    table->set_table(t.table());
    table->set_num_params(t.num_params());
    table->set_num_shards(t.num_shards());
    table->set_shard_index(t.shard_index());
    table->set_begin(t.begin());
    table->set_end(t.end());
  }
}

// The problems of one server's shard of a table, against RangePartition
// over the cluster's servers and the table's size on the other servers.
std::vector<std::string> TableProblems(
    const shardps::TableShardCheck& t, int shard, int num_servers,
    const std::map<std::string, uint64_t>& num_params) {
  std::vector<std::string> problems;
  const std::string name = absl::StrCat("table '", t.table(), "'");
  if (t.num_params() != num_params.at(t.table())) {
    problems.push_back(absl::StrCat(
        name, " has ", t.num_params(), " parameters here but ",
        num_params.at(t.table()), " on the first server holding it"));
  }
  if (static_cast<int>(t.num_shards()) != num_servers) {
    problems.push_back(absl::StrCat(name, " is split into ", t.num_shards(),
                                    " shards, but the cluster has ",
                                    num_servers, " servers"));
    return problems;
  }
  if (static_cast<int>(t.shard_index()) != shard) {
    problems.push_back(absl::StrCat(
        name, " holds shard ", t.shard_index(), ", but this is server ", shard,
        " in the address list (the order must be the servers' shard order)"));
    return problems;
  }
  const ps::KeyRange want =
      ps::RangePartition(t.num_params(), num_servers).shard_range(shard);
  if (t.begin() != want.begin || t.end() != want.end) {
    problems.push_back(absl::StrFormat(
        "%s holds keys [%d, %d), but RangePartition(%d, %d) gives shard %d "
        "[%d, %d)",
        name, t.begin(), t.end(), t.num_params(), num_servers, shard,
        want.begin, want.end));
  }
  return problems;
}

// Cross-checks the ready servers' tables: each one on every ready server,
// of one size, holding the shard RangePartition gives it.
void CheckTables(shardps::ClusterCheckReport* report) {
  const int n = report->servers_size();
  std::map<std::string, uint64_t> num_params;
  std::map<std::string, std::vector<int>> held_by;
  for (const shardps::ServerCheck& server : report->servers()) {
    for (const shardps::TableShardCheck& t : server.tables()) {
      num_params.emplace(t.table(), t.num_params());
      held_by[t.table()].push_back(static_cast<int>(server.shard()));
    }
  }
  for (shardps::ServerCheck& server : *report->mutable_servers()) {
    if (!server.ready()) continue;
    std::vector<std::string> problems;
    for (const auto& [table, holders] : held_by) {
      if (std::find(holders.begin(), holders.end(),
                    static_cast<int>(server.shard())) == holders.end()) {
        problems.push_back(absl::StrCat("table '", table,
                                        "' is missing (held by shard",
                                        holders.size() > 1 ? "s " : " ",
                                        absl::StrJoin(holders, ", "), ")"));
      }
    }
    for (const shardps::TableShardCheck& t : server.tables()) {
      std::vector<std::string> more =
          TableProblems(t, static_cast<int>(server.shard()), n, num_params);
      problems.insert(problems.end(), more.begin(), more.end());
    }
    if (!problems.empty()) {
      Fail(&server, "tables", absl::StrJoin(problems, "; "));
    }
  }
}

}  // namespace

absl::StatusOr<shardps::ClusterCheckReport> CheckCluster(
    const ClusterCheckOptions& options) {
  QuietLog quiet;
  ps::ClientOptions co;
  co.server_addrs = options.server_addrs;
  co.job = options.job;
  co.tls = options.tls;
  co.auth_token = options.auth_token;
  co.rpc_timeout = options.timeout;
  co.log = &quiet;
  absl::StatusOr<std::unique_ptr<ps::Client>> client = ps::Client::Connect(co);
  if (!client.ok()) return client.status();
  shardps::ClusterCheckReport report;
  report.set_job(options.job);
  report.set_client_build_version(std::string(ps::BuildVersion()));
  report.set_client_protocol_version(ps::kProtocolVersion);
  report.set_tls(options.tls.enabled());
  const int n = static_cast<int>(options.server_addrs.size());
  for (int s = 0; s < n; ++s) report.add_servers();
  ps::ForEachServer(n, [&](int s) {
    const absl::Time start = absl::Now();
    shardps::ServerCheck* check = report.mutable_servers(s);
    CheckServer(options, client->get(), s, check);
    check->set_seconds(absl::ToDoubleSeconds(absl::Now() - start));
    return absl::OkStatus();
  }).IgnoreError();
  CheckTables(&report);
  int ready = 0;
  for (const shardps::ServerCheck& server : report.servers()) {
    ready += server.ready() ? 1 : 0;
  }
  report.set_servers_ready(ready);
  report.set_ok(n > 0 && ready == n);
  return report;
}

bool WorthWaitingFor(const shardps::ClusterCheckReport& report) {
  for (const shardps::ServerCheck& s : report.servers()) {
    if (!s.ready() && s.stage() != "resolve" && s.stage() != "connect" &&
        s.stage() != "handshake") {
      return false;
    }
  }
  return !report.ok();
}

absl::StatusOr<shardps::ClusterCheckReport> CheckClusterUntil(
    const ClusterCheckOptions& options, absl::Time give_up,
    absl::FunctionRef<void(const shardps::ClusterCheckReport&)> waiting) {
  constexpr absl::Duration kAgainEvery = absl::Seconds(2);
  absl::StatusOr<shardps::ClusterCheckReport> report = CheckCluster(options);
  while (report.ok() && WorthWaitingFor(*report) &&
         absl::Now() + kAgainEvery < give_up) {
    waiting(*report);
    absl::SleepFor(kAgainEvery);  // a server starting takes seconds
    report = CheckCluster(options);
  }
  return report;
}

std::string FirstProblem(const shardps::ClusterCheckReport& report) {
  for (const shardps::ServerCheck& s : report.servers()) {
    if (!s.ready()) {
      return absl::StrCat("shard ", s.shard(), " at ", s.address(), ": ",
                          s.problem());
    }
  }
  return "";
}

std::string FormatCheckReport(const shardps::ClusterCheckReport& report) {
  std::string out;
  for (const shardps::ServerCheck& s : report.servers()) {
    if (s.ready()) {
      std::vector<std::string> tables;
      for (const shardps::TableShardCheck& t : s.tables()) {
        tables.push_back(
            absl::StrCat(t.table(), " [", t.begin(), ", ", t.end(), ")"));
      }
      absl::StrAppendFormat(
          &out, "shard %d  %s  ready  %s, wire protocol %d, %d table%s%s\n",
          s.shard(), s.address(), s.build_version(), s.protocol_version(),
          s.tables_size(), s.tables_size() == 1 ? "" : "s",
          tables.empty() ? ""
                         : absl::StrCat(": ", absl::StrJoin(tables, ", ")));
    } else {
      absl::StrAppendFormat(&out, "shard %d  %s  FAILED at %s: %s\n", s.shard(),
                            s.address(), s.stage(), s.problem());
    }
  }
  absl::StrAppendFormat(&out, "%d of %d servers ready (job '%s', %s)%s\n",
                        report.servers_ready(), report.servers_size(),
                        report.job(), report.tls() ? "TLS" : "plain TCP",
                        report.ok() ? "" : ": the cluster is not ready");
  return out;
}

}  // namespace worker
