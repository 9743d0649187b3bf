// What a new user sees when a worker cannot reach its servers, through the
// real binaries: shardps-worker says within a few seconds, every few
// seconds, which server it waits for and why (nothing listening, a name
// that does not resolve, TLS on one side only, the wrong CA, a name the
// certificate lacks, one of four servers missing), long before its 60 s
// readiness deadline; the final error carries the same cause; a server
// started 5 s after the worker is waited for; a wrong job fails at once.
// The launcher says the same of its servers' health checks.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "ps/base/server_process.h"
#include "util/data.h"
#include "util/processes.h"
#include "util/tls.h"
#include "util/workers.h"

namespace {

class StartupTest : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    data_ = new testutil::ScopedTempDir("shardps-startup-data");
    ASSERT_EQ(testutil::MakeSyntheticData(
                  data_->path(),
                  "--samples 800 --test_fraction 0.25 --features 8 "
                  "--classes 2 --shards 2 --seed 3"),
              0);
  }
  static void TearDownTestSuite() {
    delete data_;
    data_ = nullptr;
  }

  void SetUp() override {
    if (!testutil::HaveOpenssl()) GTEST_SKIP() << testutil::kNoOpenssl;
    absl::Status made = certs_.Make();
    ASSERT_TRUE(made.ok()) << made;
  }

  // A shardps-server process of job "start" with `args`.
  std::unique_ptr<ps::ServerProcess> Spawn(
      std::vector<std::string> args = {}, const std::string& host = "127.0.0.1",
      int port = 0) {
    ps::ServerProcessOptions o;
    o.binary = ps::SiblingBinary("shardps-server");
    o.run_dir = dir_.path();
    o.name = absl::StrCat("server-", ++servers_);
    o.host = host;
    o.port = port;
    o.extra_args = std::move(args);
    o.extra_args.push_back("--job=start");
    absl::StatusOr<std::unique_ptr<ps::ServerProcess>> s =
        ps::ServerProcess::Spawn(o);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *std::move(s) : nullptr;
  }

  // Starts a worker of job "start" with the default 60 s readiness
  // deadline; its output goes to log_.
  std::unique_ptr<ps::ChildProcess> Worker(
      const std::vector<std::string>& addrs, std::vector<std::string> flags) {
    flags.insert(flags.end(),
                 {"--job=start", "--data=" + data_->path(),
                  "--run_dir=" + certs_.File("run"), "--rank=0", "--world=1",
                  "--model=mlp:8-4-2", "--max_steps=3"});
    return testutil::StartWorker(addrs, flags, log_);
  }

  // Waits (at most 10 s) for a progress line about `address` that names
  // `cause`, then stops the worker; true if one came.
  bool SaysWhileWaiting(ps::ChildProcess& worker, const std::string& address,
                        const std::string& cause) {
    const absl::Time start = absl::Now();
    while (absl::Now() < start + absl::Seconds(10)) {
      for (absl::string_view line :
           absl::StrSplit(testutil::ReadFile(log_), '\n')) {
        if (absl::StrContains(line, "still waiting for shard") &&
            absl::StrContains(line, address) &&
            absl::StrContains(line, cause)) {
          worker.Kill();
          return true;
        }
      }
      absl::SleepFor(absl::Milliseconds(100));  // polling the worker's log
    }
    worker.Kill();
    ADD_FAILURE() << "no progress line about " << address << " naming '"
                  << cause << "' in 10 s:\n"
                  << testutil::ReadFile(log_);
    return false;
  }

  static testutil::ScopedTempDir* data_;
  testutil::ScopedTempDir dir_{"shardps-startup"};
  testutil::TestCertificates certs_{"shardps-startup-tls"};
  const std::string log_ = dir_.path() + "/worker.log";
  int servers_ = 0;
};

testutil::ScopedTempDir* StartupTest::data_ = nullptr;

TEST_F(StartupTest, NothingListeningIsConnectionRefused) {
  const std::string address =
      absl::StrCat("127.0.0.1:", testutil::FreeLoopbackPort());
  std::unique_ptr<ps::ChildProcess> worker = Worker({address}, {});
  EXPECT_TRUE(SaysWhileWaiting(
      *worker, address,
      "connection refused: is a shardps-server listening at " + address));
}

TEST_F(StartupTest, TheFinalErrorCarriesTheCause) {
  const std::string address =
      absl::StrCat("127.0.0.1:", testutil::FreeLoopbackPort());
  std::unique_ptr<ps::ChildProcess> worker =
      Worker({address}, {"--ready_timeout_s=4"});
  EXPECT_EQ(testutil::ExitCode(*worker, absl::Seconds(30)), 1);
  EXPECT_TRUE(absl::StrContains(
      testutil::ReadFile(log_),
      absl::StrCat("DEADLINE_EXCEEDED: waiting for readiness on shard 0 at ",
                   address, ": connection refused")))
      << testutil::ReadFile(log_);
}

TEST_F(StartupTest, ANameThatDoesNotResolveIsADnsError) {
  std::unique_ptr<ps::ChildProcess> worker =
      Worker({"nosuchhost.invalid:7070"}, {});
  EXPECT_TRUE(SaysWhileWaiting(*worker, "nosuchhost.invalid:7070",
                               "does not resolve (DNS)"));
}

TEST_F(StartupTest, OneOfFourServersMissingIsNamed) {
  std::vector<std::unique_ptr<ps::ServerProcess>> servers;
  std::vector<std::string> addrs;
  for (int i = 0; i < 3; ++i) {
    servers.push_back(Spawn());
    ASSERT_NE(servers.back(), nullptr);
    addrs.push_back(servers.back()->address());
  }
  addrs.push_back(absl::StrCat("127.0.0.1:", testutil::FreeLoopbackPort()));
  std::unique_ptr<ps::ChildProcess> worker = Worker(addrs, {});
  EXPECT_TRUE(SaysWhileWaiting(*worker, "shard 3 at " + addrs[3],
                               "connection refused"));
}

TEST_F(StartupTest, ATlsWorkerOfAPlainServerIsTold) {
  std::unique_ptr<ps::ServerProcess> plain = Spawn();
  ASSERT_NE(plain, nullptr);
  const std::string address = absl::StrCat("localhost:", plain->port());
  std::unique_ptr<ps::ChildProcess> worker =
      Worker({address}, {"--tls_ca=" + certs_.File("ca.pem")});
  EXPECT_TRUE(
      SaysWhileWaiting(*worker, address, "the server does not speak TLS"));
}

TEST_F(StartupTest, APlainWorkerOfATlsServerIsTold) {
  std::unique_ptr<ps::ServerProcess> tls =
      Spawn({"--tls_cert=" + certs_.File("server.pem"),
             "--tls_key=" + certs_.File("server.key")});
  ASSERT_NE(tls, nullptr);
  const std::string address = absl::StrCat("localhost:", tls->port());
  std::unique_ptr<ps::ChildProcess> worker = Worker({address}, {});
  EXPECT_TRUE(SaysWhileWaiting(
      *worker, address, "it may speak TLS (then give this client --tls_ca)"));
}

TEST_F(StartupTest, TheWrongCaIsNamed) {
  std::unique_ptr<ps::ServerProcess> tls =
      Spawn({"--tls_cert=" + certs_.File("server.pem"),
             "--tls_key=" + certs_.File("server.key")});
  ASSERT_NE(tls, nullptr);
  const std::string address = absl::StrCat("localhost:", tls->port());
  std::unique_ptr<ps::ChildProcess> worker =
      Worker({address}, {"--tls_ca=" + certs_.File("other.pem")});
  EXPECT_TRUE(SaysWhileWaiting(*worker, address, "not signed by --tls_ca"));
}

TEST_F(StartupTest, ANameTheCertificateLacksIsNamed) {
  // The certificate names 127.0.0.1 and localhost; 127.0.0.2 reaches the
  // same server when it listens on every address.
  std::unique_ptr<ps::ServerProcess> tls =
      Spawn({"--tls_cert=" + certs_.File("server.pem"),
             "--tls_key=" + certs_.File("server.key")},
            "0.0.0.0");
  ASSERT_NE(tls, nullptr);
  const std::string address = absl::StrCat("127.0.0.2:", tls->port());
  std::unique_ptr<ps::ChildProcess> worker =
      Worker({address}, {"--tls_ca=" + certs_.File("ca.pem")});
  EXPECT_TRUE(SaysWhileWaiting(
      *worker, address, "certificate does not name the host in " + address));
}

TEST_F(StartupTest, AServerStartedFiveSecondsLateIsWaitedFor) {
  const int port = testutil::FreeLoopbackPort();
  const std::string address = absl::StrCat("127.0.0.1:", port);
  std::unique_ptr<ps::ChildProcess> worker = Worker({address}, {});
  absl::SleepFor(absl::Seconds(5));  // the late start the test is about
  std::unique_ptr<ps::ServerProcess> late = Spawn({}, "127.0.0.1", port);
  ASSERT_NE(late, nullptr);
  EXPECT_EQ(testutil::ExitCode(*worker, absl::Seconds(120)), 0)
      << testutil::ReadFile(log_);
  EXPECT_TRUE(
      absl::StrContains(testutil::ReadFile(log_),
                        absl::StrCat("still waiting for shard 0 at ", address)))
      << testutil::ReadFile(log_);
}

TEST_F(StartupTest, AnotherJobFailsAtOnce) {
  std::unique_ptr<ps::ServerProcess> server = Spawn();
  ASSERT_NE(server, nullptr);
  std::unique_ptr<ps::ChildProcess> worker =
      testutil::StartWorker({server->address()},
                            {"--job=elsewhere", "--data=" + data_->path(),
                             "--run_dir=" + certs_.File("run")},
                            log_);
  const absl::Time start = absl::Now();
  EXPECT_EQ(testutil::ExitCode(*worker, absl::Seconds(30)), 1);
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  EXPECT_TRUE(absl::StrContains(
      testutil::ReadFile(log_),
      "request for job 'elsewhere' reached a server of job 'start'"))
      << testutil::ReadFile(log_);
}

TEST_F(StartupTest, TheLauncherNamesWhyItsServersAreNotHealthy) {
  // Servers given TLS behind the launcher's back: its plain health checks
  // cannot get through, and it says why.
  auto [code, output] = testutil::RunCommand(
      {ps::SiblingBinary("shardps-launch"), "--servers=2", "--workers=1",
       "--run_dir=" + certs_.File("launch"), "--data=" + data_->path(),
       "--ready_timeout_s=5",
       "--server_flags=--tls_cert=" + certs_.File("server.pem") +
           " --tls_key=" + certs_.File("server.key")},
      absl::Seconds(60));
  EXPECT_EQ(code, 1) << output;
  EXPECT_TRUE(absl::StrContains(output, "still waiting for shard")) << output;
  EXPECT_TRUE(absl::StrContains(
      output,
      "servers not healthy within 5s (--ready_timeout_s): waiting for "
      "readiness on shard"))
      << output;
  EXPECT_TRUE(absl::StrContains(
      output, "it may speak TLS (then give this client --tls_ca)"))
      << output;
}

}  // namespace
