// Client::PushPull against in-process servers: one round trip per piece
// that applies the gradient and answers the keys' values after it, under
// every consistency mode, with retries of lost replies applied once, and a
// refused request that changes nothing.
#include <gtest/gtest.h>

#include <limits>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "ps/client/client.h"
#include "ps/server/server.h"
#include "util/servers.h"

namespace ps {
namespace {

using testutil::Calls;

// Run over TCP (false) and, as a client on its servers' host does by
// default, through shared memory (true).
class PushPullTest : public testing::TestWithParam<bool> {
 protected:
  void Start(int servers, double drop_reply_fraction = 0) {
    for (int i = 0; i < servers; ++i) {
      ServerOptions o;
      o.host = "127.0.0.1";
      o.port = 0;
      o.job = "pp";
      o.drop_reply_fraction = drop_reply_fraction;
      absl::StatusOr<std::unique_ptr<Server>> s = Server::Start(o);
      ASSERT_TRUE(s.ok()) << s.status();
      addrs_.push_back((*s)->address());
      servers_.push_back(*std::move(s));
    }
  }

  std::unique_ptr<Client> Connect(
      size_t chunk_bytes, uint32_t worker = 0,
      shardps::ValueEncoding pull_encoding = shardps::FLOAT32) {
    ClientOptions o;
    o.server_addrs = addrs_;
    o.job = "pp";
    o.worker = worker;
    o.chunk_bytes = chunk_bytes;
    o.pull_encoding = pull_encoding;
    o.shared_memory = GetParam();
    o.rpc_timeout = absl::Seconds(10);
    o.retry_give_up = absl::Seconds(30);
    absl::StatusOr<std::unique_ptr<Client>> c = Client::Connect(o);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *std::move(c) : nullptr;
  }

  std::vector<std::string> addrs_;
  std::vector<std::unique_ptr<Server>> servers_;
};

TEST_P(PushPullTest, AnswersTheValuesAfterItsPushInThePiecesOfItsPlan) {
  // As ClientTest.ARangeMovesInTheCallsOfItsPlan: keys [5, 995) of 1000 over
  // 3 shards in 64-key chunks are 6 calls per shard, here 6 PushPulls and
  // no Push or Pull.
  Start(3);
  std::unique_ptr<Client> client = Connect(256);
  ASSERT_TRUE(client->CreateTable(testutil::ConstantTable(1000, 2.0f)).ok());
  std::vector<float> grad(990), out(990, -7.0f);
  for (size_t i = 0; i < grad.size(); ++i) grad[i] = static_cast<float>(5 + i);
  ASSERT_TRUE(client->PushPull("w", 5, 995, grad.data(), out.data(), 0).ok());
  for (size_t i = 0; i < out.size(); ++i) {
    ASSERT_EQ(out[i], 2.0f - static_cast<float>(5 + i)) << i;
  }
  // In place: the answer overwrites the gradient it was computed from.
  ASSERT_TRUE(client->PushPull("w", 5, 995, grad.data(), grad.data(), 1).ok());
  for (size_t i = 0; i < grad.size(); ++i) {
    ASSERT_EQ(grad[i], 2.0f - 2.0f * static_cast<float>(5 + i)) << i;
  }
  std::vector<float> pulled(1000);
  ASSERT_TRUE(client->Pull("w", 0, 1000, pulled.data()).ok());
  EXPECT_EQ(pulled[0], 2.0f);
  EXPECT_EQ(pulled[999], 2.0f);
  for (size_t i = 0; i < grad.size(); ++i) ASSERT_EQ(pulled[5 + i], grad[i]);
  absl::StatusOr<std::vector<shardps::StatsResponse>> stats = client->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  for (int s = 0; s < 3; ++s) {
    EXPECT_EQ((*stats)[s].push_pull_requests(), 12u) << s;
    EXPECT_EQ(Calls((*stats)[s], "PushPull"), 12u) << s;
    EXPECT_EQ(Calls((*stats)[s], "Push"), 0u) << s;
    EXPECT_EQ(Calls((*stats)[s], "Pull"), 6u) << s;  // the check's
    EXPECT_EQ((*stats)[s].tables(0).version(), 12u) << s;
  }
  // Both directions are counted as the client's traffic: in the messages,
  // or (two PushPulls each way and a Pull) through shared memory.
  if (GetParam()) {
    EXPECT_EQ(client->memory_bytes(), (4 * 990 + 1000) * sizeof(float));
  } else {
    EXPECT_GT(client->push_bytes(), 2 * 990 * sizeof(float));
    EXPECT_GT(client->pull_bytes(), 3 * 990 * sizeof(float));
    EXPECT_EQ(client->memory_bytes(), 0u);
  }
}

TEST_P(PushPullTest, ValuesComeBackInThePullEncoding) {
  Start(2);
  std::unique_ptr<Client> client = Connect(0, 0, shardps::BF16);
  ASSERT_TRUE(client->CreateTable(testutil::ConstantTable(300, 1.0f)).ok());
  std::vector<float> grad(300, 0.25f), out(300);
  ASSERT_TRUE(client->PushPull("w", 0, 300, grad.data(), out.data()).ok());
  for (float v : out) ASSERT_EQ(v, 0.75f);  // exact in bfloat16
}

TEST_P(PushPullTest, ARefusedGradientSendsNothing) {
  Start(2);
  std::unique_ptr<Client> client = Connect(256);
  ASSERT_TRUE(client->CreateTable(testutil::ConstantTable(500, 1.0f)).ok());
  std::vector<float> grad(500, 1.0f), out(500, 9.0f);
  grad[450] = std::numeric_limits<float>::quiet_NaN();
  absl::Status s = client->PushPull("w", 0, 500, grad.data(), out.data());
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find("NaN or Inf; nothing was sent"), std::string::npos)
      << s;
  for (float v : out) ASSERT_EQ(v, 9.0f);
  s = client->PushPull("w", 400, 600, grad.data(), out.data());
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  absl::StatusOr<std::vector<shardps::StatsResponse>> stats = client->Stats();
  ASSERT_TRUE(stats.ok());
  for (const shardps::StatsResponse& server : *stats) {
    EXPECT_EQ(server.push_pull_requests(), 0u);
    EXPECT_EQ(server.tables(0).version(), 0u);
  }
}

TEST_P(PushPullTest, ANonFiniteValueInAnyChunkSendsNothing) {
  // 17 chunks of up to 64 keys (aligned to 64: the second server's keys
  // start at 496) and one call in flight per server: the first calls'
  // gradients are checked as they are copied, the rest before any is sent.
  Start(2);
  ClientOptions o;
  o.server_addrs = addrs_;
  o.job = "pp";
  o.chunk_bytes = 256;
  o.max_inflight_per_server = 1;
  o.shared_memory = GetParam();
  o.rpc_timeout = absl::Seconds(10);
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(o);
  ASSERT_TRUE(client.ok()) << client.status();
  Client& c = **client;
  ASSERT_TRUE(c.CreateTable(testutil::ConstantTable(1000, 1.0f)).ok());
  // Calls that carry values, and the tables' versions, over both servers.
  auto sent = [&c] {
    absl::StatusOr<std::vector<shardps::StatsResponse>> stats = c.Stats();
    EXPECT_TRUE(stats.ok()) << stats.status();
    std::pair<uint64_t, uint64_t> calls_and_versions{0, 0};
    for (const shardps::StatsResponse& server : *stats) {
      calls_and_versions.first += Calls(server, "PushPull") +
                                  Calls(server, "Push") +
                                  Calls(server, "Assign");
      calls_and_versions.second += server.tables(0).version();
    }
    return calls_and_versions;
  };
  const std::pair<uint64_t, uint64_t> before = sent();
  const uint64_t push_bytes = c.push_bytes();
  std::vector<float> grad(1000, 0.25f), out(1000, 9.0f);
  for (size_t where : {0u, 63u, 64u, 500u, 999u}) {
    for (float bad : {std::numeric_limits<float>::quiet_NaN(),
                      -std::numeric_limits<float>::infinity()}) {
      grad[where] = bad;
      absl::Status s = c.PushPull("w", 0, 1000, grad.data(), out.data());
      EXPECT_TRUE(absl::IsInvalidArgument(s)) << where << " " << s;
      EXPECT_TRUE(absl::StrContains(s.message(), "nothing was sent")) << s;
      s = c.Push("w", 0, 1000, grad.data());
      EXPECT_TRUE(absl::IsInvalidArgument(s)) << where << " " << s;
      s = c.Assign("w", 0, 1000, grad.data());
      EXPECT_TRUE(absl::IsInvalidArgument(s)) << where << " " << s;
      grad[where] = 0.25f;
    }
  }
  for (float v : out) ASSERT_EQ(v, 9.0f);
  EXPECT_EQ(sent(), before);
  EXPECT_EQ(c.push_bytes(), push_bytes);
  EXPECT_EQ(c.memory_bytes(), 0u);
  // A good push then goes whole, through shared memory when it may: the
  // refused pushes gave their slots back.
  ASSERT_TRUE(c.PushPull("w", 0, 1000, grad.data(), out.data()).ok());
  for (float v : out) ASSERT_EQ(v, 0.75f);
  EXPECT_EQ(c.memory_bytes() > 0, GetParam());
  const std::pair<uint64_t, uint64_t> after = sent();
  EXPECT_EQ(after.first, before.first + 17);
  EXPECT_EQ(after.second, before.second + 17);
}

TEST_P(PushPullTest, LostRepliesAreRetriedAndEachPushAppliedOnce) {
  // A third of the replies is lost after the call was carried out; every
  // retry finds its push applied and still answers the values.
  Start(2, /*drop_reply_fraction=*/0.3);
  std::unique_ptr<Client> client = Connect(1024);
  constexpr uint64_t kParams = 2000;
  ASSERT_TRUE(client->CreateTable(testutil::ConstantTable(kParams, 0)).ok());
  std::vector<float> grad(kParams), out(kParams);
  for (int step = 1; step <= 10; ++step) {
    for (uint64_t k = 0; k < kParams; ++k) grad[k] = static_cast<float>(k % 7);
    ASSERT_TRUE(
        client->PushPull("w", 0, kParams, grad.data(), out.data(), step).ok());
    for (uint64_t k = 0; k < kParams; ++k) {
      ASSERT_EQ(out[k], -static_cast<float>(step * (k % 7)))
          << "step " << step << " key " << k;
    }
  }
  absl::StatusOr<std::vector<shardps::StatsResponse>> stats = client->Stats();
  ASSERT_TRUE(stats.ok());
  uint64_t duplicates = 0;
  for (const shardps::StatsResponse& s : *stats) {
    duplicates += s.duplicate_pushes();
  }
  EXPECT_GT(duplicates, 5u);
}

TEST_P(PushPullTest, AssignSetsExactValuesOnEveryShardOnce) {
  // fp16 pushes, lost replies: the values still land exactly, once.
  Start(3, /*drop_reply_fraction=*/0.3);
  ClientOptions o;
  o.server_addrs = addrs_;
  o.job = "pp";
  o.chunk_bytes = 512;
  o.push_encoding = shardps::FP16;
  o.shared_memory = GetParam();
  o.retry_give_up = absl::Seconds(30);
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(o);
  ASSERT_TRUE(client.ok()) << client.status();
  constexpr uint64_t kParams = 1000;
  ASSERT_TRUE(
      (*client)->CreateTable(testutil::ConstantTable(kParams, 5.0f)).ok());
  std::vector<float> assigned(kParams);
  for (uint64_t k = 0; k < kParams; ++k) assigned[k] = 1.0f / (k + 3);
  ASSERT_TRUE((*client)->Assign("w", 10, kParams, assigned.data() + 10).ok());
  std::vector<float> values(kParams);
  ASSERT_TRUE((*client)->Pull("w", 0, kParams, values.data()).ok());
  for (uint64_t k = 0; k < kParams; ++k) {
    ASSERT_EQ(values[k], k < 10 ? 5.0f : assigned[k]) << k;
  }
  // A push after it moves the assigned values (rate 1, gradient 1).
  std::vector<float> ones(kParams, 1.0f);
  ASSERT_TRUE((*client)->Push("w", 0, kParams, ones.data()).ok());
  ASSERT_TRUE((*client)->Pull("w", 0, kParams, values.data()).ok());
  EXPECT_EQ(values[500], assigned[500] - 1.0f);
  uint64_t assign_calls = 0;
  absl::StatusOr<std::vector<shardps::StatsResponse>> stats =
      (*client)->Stats();
  ASSERT_TRUE(stats.ok());
  for (const shardps::StatsResponse& s : *stats) {
    assign_calls += Calls(s, "Assign");
  }
  EXPECT_GE(assign_calls, 8u);  // 990 keys in 128-key pieces, and retries
  // Values with a NaN are refused before anything is sent.
  assigned[999] = std::numeric_limits<float>::quiet_NaN();
  const absl::Status nan = (*client)->Assign("w", 0, kParams, assigned.data());
  EXPECT_TRUE(absl::IsInvalidArgument(nan)) << nan;
  EXPECT_NE(nan.message().find("values for 'w' keys [0, 1000) contains NaN"),
            std::string::npos)
      << nan;
}

// Workers of a sync or ssp table: clock c's PushPull answers what a pull at
// clock c + 1 reads. Pieces outnumber the client's usual window per shard
// (4): a sync answer waits for the clock's every piece, the worker's own
// later pieces among them.
void RunBarrierWorkers(PushPullTest* test, std::vector<std::string> addrs,
                       shardps::ConsistencyConfig consistency, int workers,
                       int clocks, std::vector<std::vector<float>>* seen) {
  constexpr uint64_t kParams = 1000;
  TableOptions table = testutil::ConstantTable(kParams, 0);
  table.consistency = consistency;
  std::vector<std::unique_ptr<Client>> clients;
  for (int w = 0; w < workers; ++w) {
    ClientOptions o;
    o.server_addrs = addrs;
    o.job = "pp";
    o.worker = w;
    o.chunk_bytes = 256;  // 64 keys: 8 pieces per shard
    o.rpc_timeout = absl::Seconds(20);
    clients.push_back(*Client::Connect(o));
    ASSERT_TRUE(clients.back()->CreateTable(table).ok());
  }
  seen->assign(workers * clocks, {});
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] {
      std::vector<float> grad(kParams, static_cast<float>(w + 1));
      for (int c = 0; c < clocks; ++c) {
        std::vector<float>& out = (*seen)[w * clocks + c];
        out.resize(kParams);
        absl::Status s =
            clients[w]->PushPull("w", 0, kParams, grad.data(), out.data(), c);
        ASSERT_TRUE(s.ok()) << "worker " << w << " clock " << c << ": " << s;
      }
    });
  }
  for (std::thread& t : threads) t.join();
}

TEST_P(PushPullTest, SyncAnswersEveryWorkerTheClocksAveragedUpdate) {
  Start(2);
  shardps::ConsistencyConfig sync;
  sync.set_mode(shardps::CONSISTENCY_SYNC);
  sync.set_num_workers(3);
  sync.set_straggler_timeout_seconds(20);
  std::vector<std::vector<float>> seen;
  RunBarrierWorkers(this, addrs_, sync, 3, 4, &seen);
  // Gradients 1, 2, 3 average to 2: after clock c every key is -2 (c + 1).
  for (int w = 0; w < 3; ++w) {
    for (int c = 0; c < 4; ++c) {
      const std::vector<float>& out = seen[w * 4 + c];
      ASSERT_EQ(out.size(), 1000u);
      for (size_t k = 0; k < out.size(); ++k) {
        ASSERT_EQ(out[k], -2.0f * (c + 1))
            << "worker " << w << " clock " << c << " key " << k;
      }
    }
  }
}

TEST_P(PushPullTest, SspAnswersNoOlderThanTheBoundAllows) {
  Start(2);
  shardps::ConsistencyConfig ssp;
  ssp.set_mode(shardps::CONSISTENCY_SSP);
  ssp.set_staleness(1);
  ssp.set_num_workers(2);
  ssp.set_straggler_timeout_seconds(20);
  std::vector<std::vector<float>> seen;
  RunBarrierWorkers(this, addrs_, ssp, 2, 5, &seen);
  // Pushes of 1 and 2 apply on arrival. The answer to clock c is read once
  // both workers pushed clocks 0..c, (c + 1 - 1 staleness): it includes at
  // least (c + 1) pushes of each, at most all 5 of each.
  for (int w = 0; w < 2; ++w) {
    for (int c = 0; c < 5; ++c) {
      const float v = seen[w * 5 + c][0];
      EXPECT_LE(v, -3.0f * (c + 1)) << "worker " << w << " clock " << c;
      EXPECT_GE(v, -15.0f) << "worker " << w << " clock " << c;
      for (float x : seen[w * 5 + c]) ASSERT_LE(x, -3.0f * (c + 1));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, PushPullTest, testing::Bool(),
                         [](const testing::TestParamInfo<bool>& info) {
                           return info.param ? "SharedMemory" : "Tcp";
                         });

}  // namespace
}  // namespace ps
