// Client and server tell each other their wire protocol and build in
// Stats; two that cannot speak to each other fail at once, each side
// naming both versions. A wrong job or token, which waiting cannot mend,
// also ends Client::WaitReady at once.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "proto/shardps.grpc.pb.h"
#include "ps/base/build_version.h"
#include "ps/client/client.h"
#include "ps/server/server.h"
#include "ps/wire/protocol_version.h"
#include "ps/wire/security.h"
#include "util/future_server.h"

namespace ps {
namespace {

TEST(CheckPeerProtocolTest, AcceptsItsOwnAndAnUnstatedVersion) {
  EXPECT_TRUE(CheckPeerProtocol("peer", kProtocolVersion, "x").ok());
  EXPECT_TRUE(CheckPeerProtocol("peer", 0, "").ok());
}

TEST(CheckPeerProtocolTest, RefusesANewerOneNamingBoth) {
  const absl::Status s =
      CheckPeerProtocol("shard 3 at h:1", kProtocolVersion + 1, "shardps 9.0");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(
      s.message(), absl::StrCat("shard 3 at h:1 (shardps 9.0) speaks wire "
                                "protocol ",
                                kProtocolVersion + 1)))
      << s;
  EXPECT_TRUE(absl::StrContains(
      s.message(), absl::StrCat("this side (", BuildVersion(),
                                ") speaks wire protocol ", kProtocolVersion)))
      << s;
}

TEST(VersionCheckTest, AClientOfAServerItCannotSpeakToFailsAtOnce) {
  testutil::FutureServer future;
  ClientOptions o;
  o.server_addrs = {future.address()};
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(o);
  ASSERT_TRUE(client.ok()) << client.status();
  const absl::Time start = absl::Now();
  const absl::Status s = (*client)->WaitReady(absl::Seconds(30));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_TRUE(absl::StrContains(
      s.message(), absl::StrCat("shard 0 at ", future.address(),
                                " (shardps 9.9.9) speaks wire protocol 99")))
      << s;
  EXPECT_TRUE(absl::StrContains(s.message(), BuildVersion())) << s;
}

class RealServerTest : public testing::Test {
 protected:
  void SetUp() override {
    ServerOptions o;
    o.host = "127.0.0.1";
    o.job = "versions";
    o.auth_token = "secret";
    absl::StatusOr<std::unique_ptr<Server>> s = Server::Start(o);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = *std::move(s);
    address_ = absl::StrCat("127.0.0.1:", server_->port());
  }

  // WaitReady with `job` and `token`, which must end well before its 30 s.
  absl::Status Wait(const std::string& job, const std::string& token) {
    ClientOptions o;
    o.server_addrs = {address_};
    o.job = job;
    o.auth_token = token;
    absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(o);
    if (!client.ok()) return client.status();
    const absl::Time start = absl::Now();
    absl::Status s = (*client)->WaitReady(absl::Seconds(30));
    EXPECT_LT(absl::Now() - start, absl::Seconds(5));
    return s;
  }

  std::unique_ptr<Server> server_;
  std::string address_;
};

TEST_F(RealServerTest, AClientOfAnotherProtocolIsRefusedNamingBoth) {
  // Built from the proto alone, as another release's client would be.
  std::unique_ptr<shardps::ParameterServer::Stub> stub =
      shardps::ParameterServer::NewStub(
          grpc::CreateChannel(address_, grpc::InsecureChannelCredentials()));
  shardps::StatsRequest request;
  request.set_job("versions");
  request.set_protocol_version(99);
  request.set_build_version("shardps 9.9.9");
  shardps::StatsResponse response;
  grpc::ClientContext context;
  context.AddMetadata(kAuthMetadataKey, "Bearer secret");
  const grpc::Status s = stub->Stats(&context, request, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_TRUE(absl::StrContains(
      s.error_message(), "the client (shardps 9.9.9) speaks wire protocol 99"))
      << s.error_message();
  EXPECT_TRUE(absl::StrContains(s.error_message(), BuildVersion()))
      << s.error_message();

  // A client that does not state its version is served, and told the
  // server's.
  request.clear_protocol_version();
  grpc::ClientContext again;
  again.AddMetadata(kAuthMetadataKey, "Bearer secret");
  ASSERT_TRUE(stub->Stats(&again, request, &response).ok());
  EXPECT_EQ(response.protocol_version(), kProtocolVersion);
  EXPECT_EQ(response.build_version(), BuildVersion());
}

TEST_F(RealServerTest, TheRightJobAndTokenAreReady) {
  EXPECT_TRUE(Wait("versions", "secret").ok());
}

TEST_F(RealServerTest, AnotherJobFailsAtOnce) {
  const absl::Status s = Wait("other", "secret");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_TRUE(
      absl::StrContains(s.message(),
                        "request for job 'other' reached a server of job "
                        "'versions'"))
      << s;
  EXPECT_TRUE(absl::StrContains(s.message(), address_)) << s;
}

TEST_F(RealServerTest, AWrongTokenFailsAtOnce) {
  const absl::Status s = Wait("versions", "guess");
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), address_)) << s;
}

}  // namespace
}  // namespace ps
