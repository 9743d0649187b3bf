// Client retries: idempotent calls (Stats, Pull, CreateTable) wait out a
// server that is down, with backoff, until the give-up time, then fail
// naming the server; pushes are never retried (they could apply twice).
#include <gtest/gtest.h>

#include <memory>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "ps/client.h"
#include "ps/server.h"
#include "test_util.h"

namespace ps {
namespace {

std::unique_ptr<Server> Serve(int port) {
  ServerOptions o;
  o.host = "127.0.0.1";
  o.port = port;
  o.job = "retry";
  absl::StatusOr<std::unique_ptr<Server>> s = Server::Start(o);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *std::move(s) : nullptr;
}

std::unique_ptr<Client> Connect(const std::string& address,
                                absl::Duration give_up) {
  ClientOptions o;
  o.server_addrs = {address};
  o.job = "retry";
  o.rpc_timeout = absl::Seconds(2);
  o.retry_give_up = give_up;
  return *Client::Connect(o);
}

TableOptions Table() { return testutil::ConstantTable(256, 5.0f); }

TEST(ClientRetryTest, StatsWaitsForARestartedServer) {
  std::unique_ptr<Server> server = Serve(0);
  const int port = server->port();
  const std::string address = server->address();
  std::unique_ptr<Client> client = Connect(address, absl::Seconds(30));
  ASSERT_TRUE(client->Stats().ok());
  server.reset();  // down
  const absl::Time down = absl::Now();
  std::thread restart([&] {
    // The outage the client has to ride out.
    absl::SleepFor(absl::Seconds(1));
    server = Serve(port);
  });
  absl::StatusOr<std::vector<shardps::StatsResponse>> stats = client->Stats();
  restart.join();
  EXPECT_TRUE(stats.ok()) << stats.status();
  EXPECT_GE(absl::Now() - down, absl::Seconds(1));
}

TEST(ClientRetryTest, GivesUpAfterTheLimitNamingTheServer) {
  std::unique_ptr<Server> server = Serve(0);
  const std::string address = server->address();
  std::unique_ptr<Client> client = Connect(address, absl::Seconds(1));
  ASSERT_TRUE(client->CreateTable(Table()).ok());
  server.reset();
  std::vector<float> values(256);
  const absl::Time start = absl::Now();
  absl::Status s = client->Pull("w", 0, 256, values.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_NE(s.message().find(address), std::string::npos) << s;
  EXPECT_NE(s.message().find("gave up retrying the pull"), std::string::npos)
      << s;
  EXPECT_GE(absl::Now() - start, absl::Seconds(1));
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
}

TEST(ClientRetryTest, PushesAreNotRetried) {
  std::unique_ptr<Server> server = Serve(0);
  std::unique_ptr<Client> client =
      Connect(server->address(), absl::Seconds(30));
  ASSERT_TRUE(client->CreateTable(Table()).ok());
  server.reset();
  std::vector<float> grad(256, 1.0f);
  const absl::Time start = absl::Now();
  absl::Status s = client->Push("w", 0, 256, grad.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  // One attempt within its deadline, not 30 s of retries.
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST(ClientRetryTest, NoRetriesByDefault) {
  std::unique_ptr<Server> server = Serve(0);
  ClientOptions o;
  EXPECT_EQ(o.retry_give_up, absl::ZeroDuration());
  std::unique_ptr<Client> client = Connect(server->address(), o.retry_give_up);
  server.reset();
  const absl::Time start = absl::Now();
  EXPECT_EQ(client->Stats().status().code(), absl::StatusCode::kUnavailable);
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

}  // namespace
}  // namespace ps
