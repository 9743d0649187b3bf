// Client::WaitReady says why a server is not ready: while it waits, a line
// every few seconds naming the server and the cause of its last failed
// connection; at the end the same cause, not just "Deadline Exceeded".
// Each misconfiguration a new user makes: nothing listening, a name that
// does not resolve, TLS on one side only, the wrong CA, a server that
// starts late.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "ps/client/client.h"
#include "ps/server/server.h"
#include "util/log.h"
#include "util/processes.h"
#include "util/tls.h"

namespace ps {
namespace {

class WaitReadyTest : public testing::Test {
 protected:
  // WaitReady on one server at `address` for `timeout`; *lines gets what it
  // logged meanwhile.
  absl::Status Wait(const std::string& address, absl::Duration timeout,
                    TlsFiles tls = {}) {
    ClientOptions o;
    o.server_addrs = {address};
    o.job = "wait";
    o.tls = std::move(tls);
    o.log = &log_;
    absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(o);
    if (!client.ok()) return client.status();
    const absl::Time start = absl::Now();
    absl::Status s = (*client)->WaitReady(timeout);
    waited_ = absl::Now() - start;
    return s;
  }

  std::unique_ptr<Server> Serve(int port, TlsFiles tls = {},
                                const std::string& host = "127.0.0.1") {
    ServerOptions o;
    o.host = host;
    o.port = port;
    o.job = "wait";
    o.tls = std::move(tls);
    absl::StatusOr<std::unique_ptr<Server>> s = Server::Start(o);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *std::move(s) : nullptr;
  }

  // A progress line about `address` that says `cause` was logged.
  bool Reported(const std::string& address, const std::string& cause) {
    for (const std::string& line : log_.lines()) {
      if (absl::StrContains(line, "still waiting for shard 0 at " + address) &&
          absl::StrContains(line, cause)) {
        return true;
      }
    }
    return false;
  }

  // The wait ended at its deadline, with the cause in its error and in a
  // progress line before it.
  void ExpectCause(const absl::Status& s, const std::string& address,
                   const std::string& cause) {
    EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), address)) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), cause)) << s;
    EXPECT_TRUE(Reported(address, cause));
    EXPECT_LT(waited_, absl::Seconds(6));
  }

  testutil::RecordingLog log_;
  absl::Duration waited_;
};

TEST_F(WaitReadyTest, NothingListeningIsConnectionRefused) {
  const std::string address =
      absl::StrCat("127.0.0.1:", testutil::FreeLoopbackPort());
  ExpectCause(
      Wait(address, absl::Seconds(4)), address,
      "connection refused: is a shardps-server listening at " + address);
}

TEST_F(WaitReadyTest, ANameThatDoesNotResolveIsADnsError) {
  ExpectCause(Wait("nosuchhost.invalid:7070", absl::Seconds(4)),
              "nosuchhost.invalid:7070", "does not resolve (DNS)");
}

TEST_F(WaitReadyTest, AServerStartedLateIsWaitedForAndReported) {
  const int port = testutil::FreeLoopbackPort();
  const std::string address = absl::StrCat("127.0.0.1:", port);
  std::unique_ptr<Server> server;
  std::thread late([&] {
    absl::SleepFor(absl::Seconds(4));
    server = Serve(port);
  });
  const absl::Status s = Wait(address, absl::Seconds(20));
  late.join();
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_TRUE(Reported(address, "connection refused"));
  EXPECT_LT(waited_, absl::Seconds(8));
}

class WaitReadyTlsTest : public WaitReadyTest {
 protected:
  void SetUp() override {
    if (!testutil::HaveOpenssl()) GTEST_SKIP() << testutil::kNoOpenssl;
    absl::Status made = certs_.Make();
    ASSERT_TRUE(made.ok()) << made;
  }

  testutil::TestCertificates certs_{"shardps-wait-tls"};
};

TEST_F(WaitReadyTlsTest, ATlsClientOfAPlainServerIsTold) {
  std::unique_ptr<Server> plain = Serve(0);
  const std::string address = absl::StrCat("localhost:", plain->port());
  ExpectCause(Wait(address, absl::Seconds(4), {"", "", certs_.File("ca.pem")}),
              address, "the server does not speak TLS");
}

TEST_F(WaitReadyTlsTest, APlainClientOfATlsServerIsTold) {
  std::unique_ptr<Server> tls = Serve(0, certs_.Server());
  const std::string address = absl::StrCat("localhost:", tls->port());
  ExpectCause(Wait(address, absl::Seconds(4)), address,
              "it may speak TLS (then give this client --tls_ca)");
}

TEST_F(WaitReadyTlsTest, TheWrongCaIsNamed) {
  std::unique_ptr<Server> tls = Serve(0, certs_.Server());
  const std::string address = absl::StrCat("localhost:", tls->port());
  ExpectCause(
      Wait(address, absl::Seconds(4), {"", "", certs_.File("other.pem")}),
      address, "not signed by --tls_ca");
}

TEST_F(WaitReadyTlsTest, ANameTheCertificateLacksIsNamed) {
  // The certificate names 127.0.0.1 and localhost; 127.0.0.2 reaches the
  // same server on every address.
  std::unique_ptr<Server> tls = Serve(0, certs_.Server(), "0.0.0.0");
  const std::string address = absl::StrCat("127.0.0.2:", tls->port());
  ExpectCause(Wait(address, absl::Seconds(4), {"", "", certs_.File("ca.pem")}),
              address, "certificate does not name the host in " + address);
}

}  // namespace
}  // namespace ps
