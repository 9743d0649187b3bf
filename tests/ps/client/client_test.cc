// ps::Client against in-process servers: a range is moved in exactly the
// chunk calls its plan says, each shard gets its own keys, and a spec no
// server would take is refused before anything is sent.
#include "ps/client/client.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ps/server/server.h"
#include "util/servers.h"

namespace ps {
namespace {

using testutil::Calls;

class ClientTest : public testing::Test {
 protected:
  void SetUp() override {
    servers_ = testutil::StartLocalServers(3, "client", &addrs_);
    ASSERT_EQ(servers_.size(), 3u);
  }

  std::unique_ptr<Client> Connect(size_t chunk_bytes) {
    ClientOptions o;
    o.server_addrs = addrs_;
    o.job = "client";
    o.chunk_bytes = chunk_bytes;
    absl::StatusOr<std::unique_ptr<Client>> c = Client::Connect(o);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *std::move(c) : nullptr;
  }

  std::vector<std::string> addrs_;
  std::vector<std::unique_ptr<Server>> servers_;
};

TEST_F(ClientTest, ARangeMovesInTheCallsOfItsPlan) {
  // 1000 keys over 3 shards: [0, 336), [336, 672), [672, 1000). With 64-key
  // (256-byte) chunks on a global grid, keys [5, 995) make 6 calls per
  // shard: [5, 64) ... [320, 336); [336, 384) ... [640, 672);
  // [672, 704) ... [960, 995).
  std::unique_ptr<Client> client = Connect(256);
  ASSERT_TRUE(client->CreateTable(testutil::ConstantTable(1000, 0.0f)).ok());
  std::vector<float> grad(990);
  for (size_t i = 0; i < grad.size(); ++i) grad[i] = static_cast<float>(5 + i);
  ASSERT_TRUE(client->Push("w", 5, 995, grad.data()).ok());
  std::vector<float> values(1000, 1.0f);
  ASSERT_TRUE(client->Pull("w", 0, 1000, values.data()).ok());
  for (uint64_t k = 0; k < 1000; ++k) {
    // Rate 1: a key moves by minus its own gradient, here minus itself.
    ASSERT_EQ(values[k], k >= 5 && k < 995 ? -static_cast<float>(k) : 0.0f)
        << k;
  }
  absl::StatusOr<std::vector<shardps::StatsResponse>> stats = client->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  const uint64_t shard_begin[] = {0, 336, 672};
  for (int s = 0; s < 3; ++s) {
    EXPECT_EQ((*stats)[s].tables(0).begin(), shard_begin[s]);
    EXPECT_EQ(Calls((*stats)[s], "Push"), 6u) << s;
    // [0, 1000) is 6 cells per shard too; the last is [960, 1000).
    EXPECT_EQ(Calls((*stats)[s], "Pull"), 6u) << s;
  }
}

TEST_F(ClientTest, PushesToReplicatedServersHaveSmallerChunksByDefault) {
  std::unique_ptr<Client> client = Connect(0);
  ASSERT_NE(client, nullptr);
  EXPECT_EQ(client->options().chunk_bytes, kChunkBytes);
  EXPECT_EQ(client->options().push_chunk_bytes, kChunkBytes);
  // With etcd (unreachable here: the given primaries are used meanwhile).
  ClientOptions o;
  o.etcd = "http://127.0.0.1:1";
  o.num_shards = 3;
  o.server_addrs = addrs_;
  absl::StatusOr<std::unique_ptr<Client>> replicated = Client::Connect(o);
  ASSERT_TRUE(replicated.ok()) << replicated.status();
  EXPECT_EQ((*replicated)->options().chunk_bytes, kChunkBytes);
  EXPECT_EQ((*replicated)->options().push_chunk_bytes,
            kReplicatedPushChunkBytes);
  EXPECT_LT(kReplicatedPushChunkBytes, kChunkBytes);
  o.chunk_bytes = 4096;  // a given size holds for both
  replicated = Client::Connect(o);
  ASSERT_TRUE(replicated.ok()) << replicated.status();
  EXPECT_EQ((*replicated)->options().chunk_bytes, 4096u);
  EXPECT_EQ((*replicated)->options().push_chunk_bytes, 4096u);
  o.push_chunk_bytes = 1000;
  replicated = Client::Connect(o);
  EXPECT_EQ(replicated.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(replicated.status().message().find("push_chunk_bytes"),
            std::string::npos)
      << replicated.status();
}

TEST_F(ClientTest, PushChunksFollowTheirOwnSize) {
  // One shard's 1000 keys pulled in 1 KiB chunks (4 calls) and pushed in
  // 256-byte ones (16 calls).
  ClientOptions o;
  o.server_addrs = {addrs_[0]};
  o.job = "client";
  o.chunk_bytes = 1024;
  o.push_chunk_bytes = 256;
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(o);
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->CreateTable(testutil::ConstantTable(1000, 0.0f)).ok());
  std::vector<float> values(1000, 1.0f);
  ASSERT_TRUE((*client)->Pull("w", 0, 1000, values.data()).ok());
  ASSERT_TRUE((*client)->Push("w", 0, 1000, values.data()).ok());
  absl::StatusOr<std::vector<shardps::StatsResponse>> stats =
      (*client)->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(Calls((*stats)[0], "Pull"), 4u);
  EXPECT_EQ(Calls((*stats)[0], "Push"), 16u);
}

TEST_F(ClientTest, ABadSpecIsRefusedBeforeAnythingIsSent) {
  std::unique_ptr<Client> client = Connect(1 << 20);
  TableOptions bad = testutil::ConstantTable(100, 0.0f);
  bad.optimizer.set_name("lbfgs");
  absl::Status s = client->CreateTable(bad);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find("table 'w': unknown optimizer 'lbfgs'"),
            std::string::npos)
      << s;
  absl::StatusOr<std::vector<shardps::StatsResponse>> stats = client->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  for (const shardps::StatsResponse& server : *stats) {
    EXPECT_EQ(Calls(server, "CreateTable"), 0u);
  }
  // Unknown to this client: refused locally, naming the table.
  std::vector<float> v(10);
  EXPECT_TRUE(absl::IsNotFound(client->Pull("x", 0, 10, v.data())));
  ASSERT_TRUE(client->CreateTable(testutil::ConstantTable(100, 0.0f)).ok());
  absl::Status outside = client->Pull("w", 90, 101, v.data());
  EXPECT_TRUE(absl::IsInvalidArgument(outside)) << outside;
  EXPECT_NE(outside.message().find("[90, 101)"), std::string::npos);
}

}  // namespace
}  // namespace ps
