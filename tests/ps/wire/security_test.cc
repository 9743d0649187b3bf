// TLS, mutual TLS and the job token on real gRPC channels, with
// certificates made by openssl at test time: only a client with the right
// CA, certificate and token gets in; everyone else is refused, clearly,
// and changes nothing.
#include "ps/wire/security.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/generic/generic_stub.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "ps/base/program.h"
#include "ps/base/server_process.h"
#include "ps/client/client.h"
#include "ps/server/server.h"
#include "util/files.h"
#include "util/processes.h"
#include "util/servers.h"
#include "util/tls.h"

namespace ps {
namespace {

TEST(ConstantTimeEqualsTest, ComparesWholeStrings) {
  EXPECT_TRUE(ConstantTimeEquals("Bearer abc", "Bearer abc"));
  EXPECT_FALSE(ConstantTimeEquals("Bearer abc", "Bearer abd"));
  EXPECT_FALSE(ConstantTimeEquals("Bearer abc", "Bearer ab"));
  EXPECT_FALSE(ConstantTimeEquals("Bearer abc", "Bearer abcd"));
  EXPECT_FALSE(ConstantTimeEquals("abc", ""));
  EXPECT_TRUE(ConstantTimeEquals("", ""));
}

class SecurityTest : public testing::Test {
 protected:
  void SetUp() override {
    if (!testutil::HaveOpenssl()) GTEST_SKIP() << testutil::kNoOpenssl;
    absl::Status made = certs_.Make();
    ASSERT_TRUE(made.ok()) << made;
  }

  std::unique_ptr<Server> Serve(TlsFiles tls, std::string token) {
    ServerOptions o;
    o.host = "127.0.0.1";
    o.job = "secure";
    o.tls = std::move(tls);
    o.auth_token = std::move(token);
    absl::StatusOr<std::unique_ptr<Server>> s = Server::Start(o);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *std::move(s) : nullptr;
  }

  std::unique_ptr<Client> Connect(const Server& server, TlsFiles tls,
                                  std::string token) {
    ClientOptions o;
    // The certificate names 127.0.0.1 and localhost.
    o.server_addrs = {absl::StrCat("localhost:", server.port())};
    o.job = "secure";
    o.tls = std::move(tls);
    o.auth_token = std::move(token);
    o.rpc_timeout = absl::Seconds(5);
    absl::StatusOr<std::unique_ptr<Client>> c = Client::Connect(o);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *std::move(c) : nullptr;
  }

  static TableOptions Table() { return testutil::ConstantTable(64, 2.0f); }

  testutil::TestCertificates certs_{"shardps-tls"};
};

TEST_F(SecurityTest, MutualTlsAndTokenAdmitOnlyTheRightClient) {
  std::unique_ptr<Server> server =
      Serve({certs_.File("server.pem"), certs_.File("server.key"),
             certs_.File("ca.pem")},
            "s3cret");
  ASSERT_NE(server, nullptr);
  const TlsFiles good = {certs_.File("client.pem"), certs_.File("client.key"),
                         certs_.File("ca.pem")};
  std::unique_ptr<Client> client = Connect(*server, good, "s3cret");
  ASSERT_TRUE(client->CreateTable(Table()).ok());
  std::vector<float> ones(64, 1.0f), values(64);

  // A wrong or missing token: UNAUTHENTICATED for every method (the
  // client cannot even learn the table's shape).
  TableOptions other = Table();
  other.init.set_value(9.0f);  // would conflict, were it looked at
  for (const std::string token : {"guess", ""}) {
    std::unique_ptr<Client> c = Connect(*server, good, token);
    absl::Status s = c->CreateTable(other);
    EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated) << s;
    EXPECT_NE(s.message().find(token.empty() ? "needs the job's auth token"
                                             : "wrong auth token"),
              std::string::npos)
        << s;
    EXPECT_EQ(c->Stats().status().code(), absl::StatusCode::kUnauthenticated);
  }
  // No TLS at all, TLS without a client certificate, or trusting another
  // CA: the handshake fails, nothing is sent.
  const std::vector<TlsFiles> strangers = {
      {},
      {"", "", certs_.File("ca.pem")},
      {certs_.File("client.pem"), certs_.File("client.key"),
       certs_.File("other.pem")}};
  for (const TlsFiles& tls : strangers) {
    std::unique_ptr<Client> c = Connect(*server, tls, "s3cret");
    absl::Status s = c->CreateTable(other);
    EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable)
        << "ca=" << tls.ca << " cert=" << tls.cert << ": " << s;
  }
  // The right client still reads the untouched table, then updates it.
  ASSERT_TRUE(client->Pull("w", 0, 64, values.data()).ok());
  EXPECT_EQ(values, std::vector<float>(64, 2.0f));
  ASSERT_TRUE(client->Push("w", 0, 64, ones.data()).ok());
  ASSERT_TRUE(client->Pull("w", 0, 64, values.data()).ok());
  EXPECT_EQ(values, std::vector<float>(64, 1.0f));  // 2 - 1.0 * 1
}

TEST_F(SecurityTest, TokenWithoutTls) {
  std::unique_ptr<Server> server = Serve({}, "plain-token");
  ASSERT_NE(server, nullptr);
  EXPECT_TRUE(Connect(*server, {}, "plain-token")->CreateTable(Table()).ok());
  EXPECT_EQ(Connect(*server, {}, "other")->CreateTable(Table()).code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(Connect(*server, {}, "other")->Stats().status().code(),
            absl::StatusCode::kUnauthenticated);
}

TEST_F(SecurityTest, IncompleteOrBadTlsFilesAreClearErrors) {
  ServerOptions o;
  o.host = "127.0.0.1";
  o.tls = {certs_.File("server.pem"), "", ""};
  EXPECT_EQ(Server::Start(o).status().code(),
            absl::StatusCode::kInvalidArgument);
  o.tls = {certs_.File("server.ext"), certs_.File("server.key"),
           ""};  // not PEM
  absl::Status s = Server::Start(o).status();
  EXPECT_NE(s.message().find(certs_.File("server.ext")), std::string::npos)
      << s;
  o.tls = {certs_.File("missing.pem"), certs_.File("server.key"), ""};
  EXPECT_EQ(Server::Start(o).status().code(), absl::StatusCode::kNotFound);

  ClientOptions c;
  c.server_addrs = {"127.0.0.1:1"};
  c.tls = {certs_.File("client.pem"), "",
           certs_.File("ca.pem")};  // cert without key
  EXPECT_EQ(Client::Connect(c).status().code(),
            absl::StatusCode::kInvalidArgument);
  testutil::WriteFile(certs_.File("token"), "\n  \n");
  EXPECT_NE(
      ReadTokenFile(certs_.File("token")).status().message().find("is empty"),
      std::string::npos);
  testutil::WriteFile(certs_.File("token"), "  tok3n \n");
  EXPECT_EQ(*ReadTokenFile(certs_.File("token")), "tok3n");
  EXPECT_EQ(*ReadTokenFile(""), "");  // no token asked for
}

// Every method checks the token, each in its own handler: a pull or push
// without it (from a client written from the proto alone) is refused and
// changes nothing; the health service stays open for readiness probes.
TEST(TokenTest, EveryMethodRefusesAMissingTokenAndChangesNothing) {
  ServerOptions so;
  so.host = "127.0.0.1";
  so.job = "secure";
  so.auth_token = "s3cret";
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(so);
  ASSERT_TRUE(server.ok()) << server.status();
  ClientOptions co;
  co.server_addrs = {(*server)->address()};
  co.job = "secure";
  co.auth_token = "s3cret";
  std::unique_ptr<Client> owner = *Client::Connect(co);
  ASSERT_TRUE(owner->CreateTable(testutil::ConstantTable(64, 2.0f)).ok());
  std::vector<float> ones(64, 1.0f), values(64);
  ASSERT_TRUE(owner->Push("w", 0, 64, ones.data()).ok());  // version 1

  auto stub = shardps::ParameterServer::NewStub(grpc::CreateChannel(
      (*server)->address(), grpc::InsecureChannelCredentials()));
  for (const char* token : {"", "Bearer guess"}) {
    SCOPED_TRACE(token);
    auto call = [&](grpc::ClientContext* context) {
      if (*token != '\0') context->AddMetadata("authorization", token);
    };
    shardps::PushRequest push;
    push.set_job("secure");
    push.set_table("w");
    push.set_begin(0);
    push.set_end(64);
    push.set_gradient(std::string(reinterpret_cast<const char*>(ones.data()),
                                  64 * sizeof(float)));
    grpc::ClientContext push_context;
    call(&push_context);
    shardps::PushResponse pushed;
    EXPECT_EQ(stub->Push(&push_context, push, &pushed).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    shardps::PullRequest pull;
    pull.set_job("secure");
    pull.set_table("w");
    pull.set_begin(0);
    pull.set_end(64);
    grpc::ClientContext pull_context;
    call(&pull_context);
    shardps::PullResponse pulled;
    const grpc::Status refused = stub->Pull(&pull_context, pull, &pulled);
    EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_TRUE(pulled.values().empty());
  }
  // Nothing changed: the owner sees version 1 and 2 - 1 everywhere.
  ASSERT_TRUE(owner->Pull("w", 0, 64, values.data()).ok());
  EXPECT_EQ(values, std::vector<float>(64, 1.0f));
  absl::StatusOr<std::vector<shardps::StatsResponse>> stats = owner->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ((*stats)[0].tables(0).version(), 1u);
  // The health service (what Kubernetes probes) needs no token: an empty
  // HealthCheckRequest is answered SERVING (08 01).
  grpc::GenericStub health(grpc::CreateChannel(
      (*server)->address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext health_context;
  grpc::Slice empty;
  grpc::ByteBuffer request(&empty, 1), response;
  absl::Notification answered;
  grpc::Status health_status;
  health.UnaryCall(&health_context, "/grpc.health.v1.Health/Check",
                   grpc::StubOptions(), &request, &response,
                   [&](grpc::Status s) {
                     health_status = std::move(s);
                     answered.Notify();
                   });
  answered.WaitForNotification();
  ASSERT_TRUE(health_status.ok()) << health_status.error_message();
  grpc::Slice reply;
  ASSERT_TRUE(response.DumpToSingleSlice(&reply).ok());
  EXPECT_EQ(
      std::string(reinterpret_cast<const char*>(reply.begin()), reply.size()),
      std::string("\x08\x01", 2));
  // A client's WaitReady, which also checks token, job and version, is
  // refused at once without the token.
  co.auth_token = "";
  EXPECT_EQ((*Client::Connect(co))->WaitReady(absl::Seconds(10)).code(),
            absl::StatusCode::kUnauthenticated);
}

TEST(LimitsTest, OversizedRequestIsResourceExhaustedAndChangesNothing) {
  ServerOptions so;
  so.host = "127.0.0.1";
  so.job = "limits";
  so.max_message_bytes = 64 << 10;
  auto server = *Server::Start(so);
  ClientOptions co;
  co.server_addrs = {server->address()};
  co.job = "limits";
  co.chunk_bytes = 256 << 10;  // one call carries the whole 128 KiB
  co.shared_memory = false;    // which must then travel in the message
  auto client = *Client::Connect(co);
  const TableOptions t = testutil::ConstantTable(32 << 10, 3.0f);
  ASSERT_TRUE(client->CreateTable(t).ok());
  std::vector<float> grad(t.num_params, 1.0f), values(t.num_params);
  absl::Status s = client->Push("w", 0, t.num_params, grad.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  // Small requests still work and see the table untouched.
  ASSERT_TRUE(client->Pull("w", 0, 1024, values.data()).ok());
  EXPECT_EQ(values[0], 3.0f);
  EXPECT_EQ(values[1023], 3.0f);
}

TEST_F(SecurityTest, ServerRefusesOpenNonLoopbackUnlessTold) {
  ServerProcessOptions o;
  o.binary = SiblingBinary("shardps-server");
  o.run_dir = certs_.path();
  o.host = "0.0.0.0";
  absl::Status refused = ServerProcess::Spawn(o).status();
  EXPECT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("refusing to listen on 0.0.0.0"),
            std::string::npos)
      << refused;
  EXPECT_NE(refused.message().find("--allow_insecure"), std::string::npos);
  testutil::WriteFile(certs_.File("token"), "t0ken\n");
  for (const std::vector<std::string>& extra :
       std::vector<std::vector<std::string>>{
           {"--allow_insecure"},
           {"--auth_token_file=" + certs_.File("token")},
           {"--tls_cert=" + certs_.File("server.pem"),
            "--tls_key=" + certs_.File("server.key")}}) {
    o.extra_args = extra;
    absl::StatusOr<std::unique_ptr<ServerProcess>> p = ServerProcess::Spawn(o);
    ASSERT_TRUE(p.ok()) << extra[0] << ": " << p.status();
    EXPECT_TRUE((*p)->Stop().ok());
  }
  // Loopback needs none of them.
  o.host = "127.0.0.1";
  o.extra_args = {};
  EXPECT_TRUE(ServerProcess::Spawn(o).ok());
}

}  // namespace
}  // namespace ps
