// CheckCluster (shardps-doctor, shardps-launch --check) on a healthy
// 4-server cluster reports all four ready with their shard of each table;
// with each fault injected it names the server, the check that failed and
// the cause, within a few seconds: a server missing, a name that does not
// resolve, another job, a wrong token, servers in the wrong order, tables
// lost or of another cluster size, another wire protocol, and on a TLS
// cluster a plain client, a server without TLS, the wrong CA and a name the
// certificate lacks.
#include "worker/launch/cluster_check.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "ps/base/build_version.h"
#include "ps/client/client.h"
#include "ps/server/server.h"
#include "ps/wire/range_partition.h"
#include "util/future_server.h"
#include "util/processes.h"
#include "util/servers.h"
#include "util/tls.h"

namespace worker {
namespace {

constexpr uint64_t kParams = 10000;

class ClusterCheckTest : public testing::Test {
 protected:
  void SetUp() override {
    servers_ = testutil::StartLocalServers(4, "doc", &addrs_);
    ASSERT_EQ(servers_.size(), 4u);
  }

  // Table "w" on the servers of addrs_, as a worker creates it.
  void CreateTable() {
    ps::ClientOptions o;
    o.server_addrs = addrs_;
    o.job = "doc";
    absl::StatusOr<std::unique_ptr<ps::Client>> c = ps::Client::Connect(o);
    ASSERT_TRUE(c.ok()) << c.status();
    ASSERT_TRUE((*c)->CreateTable(testutil::ConstantTable(kParams, 1)).ok());
  }

  // A server in place of server `s`, of `job`, with `token` and `tls`.
  void Replace(int s, const std::string& job, const std::string& token = "",
               ps::TlsFiles tls = {}, const std::string& host = "127.0.0.1") {
    ps::ServerOptions o;
    o.host = host;
    o.job = job;
    o.auth_token = token;
    o.tls = std::move(tls);
    absl::StatusOr<std::unique_ptr<ps::Server>> server = ps::Server::Start(o);
    ASSERT_TRUE(server.ok()) << server.status();
    addrs_[s] = absl::StrCat("127.0.0.1:", (*server)->port());
    servers_[s] = *std::move(server);
  }

  shardps::ClusterCheckReport Check(ClusterCheckOptions o = {}) {
    o.server_addrs = addrs_;
    if (o.job == "default") o.job = "doc";
    o.timeout = absl::Seconds(3);
    const absl::Time start = absl::Now();
    absl::StatusOr<shardps::ClusterCheckReport> report = CheckCluster(o);
    EXPECT_LT(absl::Now() - start, absl::Seconds(5));
    EXPECT_TRUE(report.ok()) << report.status();
    return report.ok() ? *report : shardps::ClusterCheckReport();
  }

  // Only server `bad` failed, at `stage`, saying `cause`.
  void ExpectOnlyFault(const shardps::ClusterCheckReport& report, int bad,
                       const std::string& stage, const std::string& cause) {
    EXPECT_FALSE(report.ok());
    ASSERT_EQ(report.servers_size(), 4);
    EXPECT_EQ(report.servers_ready(), 3u);
    for (int s = 0; s < 4; ++s) {
      const shardps::ServerCheck& check = report.servers(s);
      EXPECT_EQ(check.address(), addrs_[s]);
      EXPECT_EQ(check.ready(), s != bad) << s << ": " << check.problem();
    }
    const shardps::ServerCheck& check = report.servers(bad);
    EXPECT_EQ(check.stage(), stage) << check.problem();
    EXPECT_TRUE(absl::StrContains(check.problem(), cause)) << check.problem();
    EXPECT_TRUE(absl::StrContains(FormatCheckReport(report),
                                  absl::StrCat("shard ", bad, "  ", addrs_[bad],
                                               "  FAILED at ", stage, ": ")))
        << FormatCheckReport(report);
  }

  std::vector<std::unique_ptr<ps::Server>> servers_;
  std::vector<std::string> addrs_;
};

TEST_F(ClusterCheckTest, AHealthyClusterIsAllReadyWithItsShards) {
  CreateTable();
  const shardps::ClusterCheckReport report = Check();
  EXPECT_TRUE(report.ok());
  EXPECT_EQ(report.servers_ready(), 4u);
  const ps::RangePartition partition(kParams, 4);
  for (int s = 0; s < 4; ++s) {
    const shardps::ServerCheck& check = report.servers(s);
    EXPECT_TRUE(check.ready()) << check.problem();
    EXPECT_EQ(check.build_version(), ps::BuildVersion());
    ASSERT_EQ(check.tables_size(), 1);
    EXPECT_EQ(check.tables(0).table(), "w");
    EXPECT_EQ(check.tables(0).begin(), partition.shard_range(s).begin);
    EXPECT_EQ(check.tables(0).end(), partition.shard_range(s).end);
  }
  EXPECT_TRUE(
      absl::StrContains(FormatCheckReport(report),
                        "4 of 4 servers ready (job 'doc', plain TCP)\n"))
      << FormatCheckReport(report);
}

TEST_F(ClusterCheckTest, AMissingServerIsConnectionRefused) {
  servers_[3].reset();
  ExpectOnlyFault(
      Check(), 3, "connect",
      "connection refused: is a shardps-server listening at " + addrs_[3]);
}

TEST_F(ClusterCheckTest, ANameThatDoesNotResolveIsADnsError) {
  addrs_[1] = "nosuchhost.invalid:7070";
  ExpectOnlyFault(Check(), 1, "resolve",
                  "the name 'nosuchhost.invalid' does not resolve (DNS)");
}

TEST_F(ClusterCheckTest, AServerOfAnotherJobIsNamed) {
  Replace(2, "other");
  ExpectOnlyFault(Check(), 2, "job",
                  "request for job 'doc' reached a server of job 'other'");
}

TEST_F(ClusterCheckTest, AWrongTokenIsAnAuthenticationFailure) {
  Replace(0, "doc", "secret");
  const shardps::ClusterCheckReport report = Check();
  EXPECT_FALSE(report.servers(0).ready());
  EXPECT_EQ(report.servers(0).stage(), "authenticate")
      << report.servers(0).problem();
}

TEST_F(ClusterCheckTest, ServersInTheWrongOrderAreNamed) {
  CreateTable();
  std::swap(addrs_[1], addrs_[2]);
  const shardps::ClusterCheckReport report = Check();
  EXPECT_FALSE(report.ok());
  EXPECT_EQ(report.servers_ready(), 2u);
  EXPECT_EQ(report.servers(1).stage(), "tables");
  EXPECT_TRUE(
      absl::StrContains(report.servers(1).problem(),
                        "table 'w' holds shard 2, but this is server 1"))
      << report.servers(1).problem();
}

TEST_F(ClusterCheckTest, AServerThatLostItsTablesIsNamed) {
  CreateTable();
  Replace(3, "doc");  // restarted without its checkpoint: up, but empty
  ExpectOnlyFault(Check(), 3, "tables",
                  "table 'w' is missing (held by shards 0, 1, 2)");
}

TEST_F(ClusterCheckTest, AClusterOfAnotherSizeIsNamed) {
  CreateTable();
  addrs_.pop_back();  // a worker told only three of the four servers
  ClusterCheckOptions o;
  o.server_addrs = addrs_;
  o.job = "doc";
  absl::StatusOr<shardps::ClusterCheckReport> report = CheckCluster(o);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->servers_ready(), 0u);
  EXPECT_TRUE(absl::StrContains(
      report->servers(0).problem(),
      "table 'w' is split into 4 shards, but the cluster has 3 servers"))
      << report->servers(0).problem();
}

TEST_F(ClusterCheckTest, AServerOfAnotherProtocolIsNamed) {
  testutil::FutureServer future;
  addrs_[1] = future.address();
  ExpectOnlyFault(Check(), 1, "version",
                  "(shardps 9.9.9) speaks wire protocol 99");
}

// A cluster of four TLS servers, checked by a client that trusts their CA
// unless a test says otherwise.
class ClusterCheckTlsTest : public ClusterCheckTest {
 protected:
  void SetUp() override {
    ClusterCheckTest::SetUp();
    if (!testutil::HaveOpenssl()) GTEST_SKIP() << testutil::kNoOpenssl;
    absl::Status made = certs_.Make();
    ASSERT_TRUE(made.ok()) << made;
    // On every address, so that 127.0.0.2 reaches them too.
    for (int s = 0; s < 4; ++s)
      Replace(s, "doc", "", certs_.Server(), "0.0.0.0");
  }
  shardps::ClusterCheckReport CheckWithCa(const std::string& ca) {
    ClusterCheckOptions o;
    o.tls.ca = certs_.File(ca);
    return Check(o);
  }
  // Every server failed the handshake, saying `cause`.
  void ExpectAllHandshakesFail(const shardps::ClusterCheckReport& report,
                               const std::string& cause) {
    EXPECT_EQ(report.servers_ready(), 0u);
    for (const shardps::ServerCheck& server : report.servers()) {
      EXPECT_EQ(server.stage(), "handshake") << server.problem();
      EXPECT_TRUE(absl::StrContains(server.problem(), cause))
          << server.problem();
    }
  }
  testutil::TestCertificates certs_{"shardps-check-tls"};
};

TEST_F(ClusterCheckTlsTest, AHealthyTlsClusterIsAllReady) {
  const shardps::ClusterCheckReport report = CheckWithCa("ca.pem");
  EXPECT_TRUE(report.ok()) << FormatCheckReport(report);
  EXPECT_TRUE(absl::StrContains(FormatCheckReport(report),
                                "4 of 4 servers ready (job 'doc', TLS)"));
}

TEST_F(ClusterCheckTlsTest, APlainClientOfTlsServersIsTold) {
  ExpectAllHandshakesFail(Check(),
                          "it may speak TLS (then give this client --tls_ca)");
}

TEST_F(ClusterCheckTlsTest, AServerWithoutTlsIsNamed) {
  Replace(3, "doc");
  ExpectOnlyFault(CheckWithCa("ca.pem"), 3, "handshake",
                  "the server does not speak TLS");
}

TEST_F(ClusterCheckTlsTest, TheWrongCaIsNamed) {
  ExpectAllHandshakesFail(CheckWithCa("other.pem"), "not signed by --tls_ca");
}

TEST_F(ClusterCheckTlsTest, ANameTheCertificateLacksIsNamed) {
  // The certificate names 127.0.0.1 and localhost, not 127.0.0.2.
  addrs_[1] = absl::StrCat("127.0.0.2:", servers_[1]->port());
  ExpectOnlyFault(CheckWithCa("ca.pem"), 1, "handshake",
                  "certificate does not name the host in " + addrs_[1]);
}

}  // namespace
}  // namespace worker
