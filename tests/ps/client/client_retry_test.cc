// Client retries: calls wait out a server that is down, with backoff, until
// the give-up time, then fail naming the server. Pushes are retried too, and
// the servers' push ledgers apply each exactly once: across a restart from a
// checkpoint and through a storm of lost replies.
#include <gtest/gtest.h>

#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "ps/client/client.h"
#include "ps/server/server.h"
#include "ps/wire/range_partition.h"
#include "util/files.h"
#include "util/log.h"
#include "util/servers.h"

namespace ps {
namespace {

std::unique_ptr<Server> Serve(int port, const std::string& checkpoint_dir = "",
                              double drop_reply_fraction = 0) {
  ServerOptions o;
  o.host = "127.0.0.1";
  o.port = port;
  o.job = "retry";
  o.checkpoint.dir = checkpoint_dir;
  o.drop_reply_fraction = drop_reply_fraction;
  absl::StatusOr<std::unique_ptr<Server>> s = Server::Start(o);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *std::move(s) : nullptr;
}

std::unique_ptr<Client> Connect(std::vector<std::string> addresses,
                                absl::Duration give_up,
                                size_t chunk_bytes = 1 << 20,
                                uint32_t worker = 0, LogSink* log = nullptr) {
  ClientOptions o;
  o.log = log;
  o.worker = worker;
  o.server_addrs = std::move(addresses);
  o.chunk_bytes = chunk_bytes;
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
  testutil::RecordingLog log;
  std::unique_ptr<Client> client =
      Connect({address}, absl::Seconds(30), 1 << 20, 0, &log);
  ASSERT_TRUE(client->Stats().ok());
  server.reset();  // down
  std::thread restart([&] {
    // Back only once the client has found it down and is waiting.
    EXPECT_TRUE(log.AwaitLine(address, absl::Seconds(20)));
    server = Serve(port);
  });
  absl::StatusOr<std::vector<shardps::StatsResponse>> stats = client->Stats();
  restart.join();
  EXPECT_TRUE(stats.ok()) << stats.status();
  EXPECT_TRUE(log.Has("retry in")) << absl::StrJoin(log.lines(), "\n");
}

TEST(ClientRetryTest, GivesUpAfterTheLimitNamingTheServer) {
  std::unique_ptr<Server> server = Serve(0);
  const std::string address = server->address();
  std::unique_ptr<Client> client = Connect({address}, absl::Seconds(1));
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

TEST(ClientRetryTest, APushWaitsForARestoredServerAndAppliesOnce) {
  testutil::ScopedTempDir dir;
  std::unique_ptr<Server> server = Serve(0, dir.path());
  const int port = server->port();
  const std::string address = server->address();
  testutil::RecordingLog log;
  std::unique_ptr<Client> client =
      Connect({address}, absl::Seconds(30), 1 << 20, 0, &log);
  ASSERT_TRUE(client->CreateTable(Table()).ok());
  std::vector<float> grad(256, 1.0f);
  ASSERT_TRUE(client->Push("w", 0, 256, grad.data()).ok());
  server.reset();  // down, after its last checkpoint
  std::thread restart([&] {
    // Back only once the push has found it down and is waiting.
    EXPECT_TRUE(log.AwaitLine(address, absl::Seconds(20)));
    server = Serve(port, dir.path());
  });
  absl::Status pushed = client->Push("w", 0, 256, grad.data());
  restart.join();
  ASSERT_TRUE(pushed.ok()) << pushed;
  ASSERT_NE(server, nullptr);
  EXPECT_TRUE(server->checkpointer()->restored());
  std::vector<float> values(256);
  ASSERT_TRUE(client->Pull("w", 0, 256, values.data()).ok());
  EXPECT_EQ(values, std::vector<float>(256, 3.0f));  // 5 - 1 - 1
}

TEST(ClientRetryTest, ARestartedServerWithoutACheckpointSaysTheTableIsGone) {
  std::unique_ptr<Server> server = Serve(0);  // no checkpoint directory
  const int port = server->port();
  std::unique_ptr<Client> client =
      Connect({server->address()}, absl::Seconds(30));
  ASSERT_TRUE(client->CreateTable(Table()).ok());
  std::vector<float> grad(256, 1.0f);
  ASSERT_TRUE(client->Push("w", 0, 256, grad.data()).ok());
  server.reset();
  server = Serve(port);  // empty: nothing to restore
  ASSERT_NE(server, nullptr);
  absl::Status pushed = client->Push("w", 0, 256, grad.data());
  EXPECT_EQ(pushed.code(), absl::StatusCode::kNotFound) << pushed;
  EXPECT_NE(pushed.message().find("'w'"), std::string::npos) << pushed;
  std::vector<float> values(256);
  absl::Status pulled = client->Pull("w", 0, 256, values.data());
  EXPECT_EQ(pulled.code(), absl::StatusCode::kNotFound) << pulled;
  EXPECT_NE(pulled.message().find("'w'"), std::string::npos) << pulled;
  // The push was refused, not applied to a table made up on the spot.
  absl::StatusOr<std::vector<shardps::StatsResponse>> stats = client->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ((*stats)[0].tables_size(), 0);
}

TEST(ClientRetryTest, ARetryResendsOnlyTheUnfinishedChunks) {
  // Server A is down when a push starts; B is up. B's chunks succeed in the
  // first attempts and must not be sent again by the retries that wait for
  // A: B gets exactly its own 8 chunk calls, and A, once restored, its 8.
  testutil::ScopedTempDir dir;
  std::unique_ptr<Server> a = Serve(0, dir.path());
  std::unique_ptr<Server> b = Serve(0);
  const int a_port = a->port();
  const std::string a_address = a->address();
  testutil::RecordingLog log;
  // 1024 keys: 512 per shard, in 64-key (256-byte) chunks.
  std::unique_ptr<Client> client =
      Connect({a_address, b->address()}, absl::Seconds(30), 256, 0, &log);
  ASSERT_TRUE(client->CreateTable(testutil::ConstantTable(1024, 0.0f)).ok());
  a.reset();  // down, after its last checkpoint
  std::thread restart([&] {
    // Back only once the push has found it down and is waiting.
    EXPECT_TRUE(log.AwaitLine(a_address, absl::Seconds(20)));
    a = Serve(a_port, dir.path());
  });
  std::vector<float> grad(1024, 1.0f);
  absl::Status pushed = client->Push("w", 0, 1024, grad.data());
  restart.join();
  ASSERT_TRUE(pushed.ok()) << pushed;
  absl::StatusOr<std::vector<shardps::StatsResponse>> stats = client->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  for (int s = 0; s < 2; ++s) {
    EXPECT_EQ((*stats)[s].push_requests(), 8u) << "server " << s;
    EXPECT_EQ((*stats)[s].duplicate_pushes(), 0u) << "server " << s;
  }
  std::vector<float> values(1024);
  ASSERT_TRUE(client->Pull("w", 0, 1024, values.data()).ok());
  EXPECT_EQ(values, std::vector<float>(1024, -1.0f));
}

// Integer-valued gradients sum exactly in float32, so any push applied twice
// (or lost) shows in the final values.
TEST(ClientRetryTest, RetryStormAppliesEveryPushExactlyOnce) {
  constexpr int kServers = 3, kClients = 4, kPushes = 20;
  constexpr uint64_t kParams = 3000;
  std::vector<std::unique_ptr<Server>> servers;
  std::vector<std::string> addresses;
  for (int i = 0; i < kServers; ++i) {
    servers.push_back(Serve(0, "", /*drop_reply_fraction=*/0.3));
    addresses.push_back(servers.back()->address());
  }
  // 1 KiB chunks: every push is 14 pieces, each dropped on its own.
  std::vector<std::unique_ptr<Client>> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.push_back(Connect(addresses, absl::Seconds(60), 1024, c));
  }
  ASSERT_TRUE(
      clients[0]->CreateTable(testutil::ConstantTable(kParams, 0)).ok());
  for (int c = 1; c < kClients; ++c) {
    ASSERT_TRUE(
        clients[c]
            ->OpenTable(testutil::ConstantTable(kParams, 0), absl::Seconds(10))
            .ok());
  }
  auto gradient = [](int c, int i, uint64_t k) {
    return static_cast<float>(static_cast<int>((k + 3 * c + 7 * i) % 9) - 4);
  };
  std::vector<std::thread> threads;
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&, c] {
      std::vector<float> grad(kParams);
      for (int i = 0; i < kPushes; ++i) {
        for (uint64_t k = 0; k < kParams; ++k) grad[k] = gradient(c, i, k);
        absl::Status s = clients[c]->Push("w", 0, kParams, grad.data());
        ASSERT_TRUE(s.ok()) << s;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  std::vector<float> values(kParams);
  ASSERT_TRUE(clients[0]->Pull("w", 0, kParams, values.data()).ok());
  for (uint64_t k = 0; k < kParams; ++k) {
    float want = 0;
    for (int c = 0; c < kClients; ++c) {
      for (int i = 0; i < kPushes; ++i) want -= gradient(c, i, k);
    }
    ASSERT_EQ(values[k], want) << "key " << k;
  }
  absl::StatusOr<std::vector<shardps::StatsResponse>> stats =
      clients[0]->Stats();
  ASSERT_TRUE(stats.ok());
  uint64_t duplicates = 0, versions = 0;
  for (const shardps::StatsResponse& s : *stats) {
    duplicates += s.duplicate_pushes();
    versions += s.tables(0).version();
  }
  // Retries happened and were caught; each piece was applied once.
  EXPECT_GT(duplicates, 30u);
  uint64_t pieces = 0;  // per push: 256-key chunks of each shard's range
  for (int s = 0; s < kServers; ++s) {
    const KeyRange r = RangePartition(kParams, kServers).shard_range(s);
    pieces += (r.end - 1) / 256 - r.begin / 256 + 1;
  }
  EXPECT_EQ(versions, uint64_t{kClients} * kPushes * pieces);
}

TEST(ClientRetryTest, NoRetriesByDefault) {
  std::unique_ptr<Server> server = Serve(0);
  ClientOptions o;
  EXPECT_EQ(o.retry_give_up, absl::ZeroDuration());
  std::unique_ptr<Client> client =
      Connect({server->address()}, o.retry_give_up);
  server.reset();
  const absl::Time start = absl::Now();
  EXPECT_EQ(client->Stats().status().code(), absl::StatusCode::kUnavailable);
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

}  // namespace
}  // namespace ps
