// The consistency modes over gRPC: two real servers in this process, one
// ps::Client per worker thread, each pulling and pushing at its own clock.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "model/model_spec.h"
#include "model/network.h"
#include "ps/client/client.h"
#include "ps/server/server.h"
#include "ps/table/updater.h"
#include "util/servers.h"

namespace ps {
namespace {

class ConsistencyClusterTest : public testing::Test {
 protected:
  void SetUp() override {
    servers_ = testutil::StartLocalServers(2, "test", &addrs_);
    ASSERT_EQ(servers_.size(), 2u);
  }

  std::unique_ptr<Client> Connect(uint32_t worker) {
    ClientOptions o;
    o.server_addrs = addrs_;
    o.job = "test";
    o.worker = worker;
    o.chunk_bytes = 256;  // every shard's piece is several pushes
    absl::StatusOr<std::unique_ptr<Client>> c = Client::Connect(o);
    EXPECT_TRUE(c.ok()) << c.status();
    EXPECT_TRUE((*c)->WaitReady(absl::Seconds(10)).ok());
    return *std::move(c);
  }

  std::vector<std::string> addrs_;
  std::vector<std::unique_ptr<Server>> servers_;
};

shardps::ConsistencyConfig Barrier(shardps::ConsistencyMode mode, int workers,
                                   int staleness = 0) {
  shardps::ConsistencyConfig c;
  c.set_mode(mode);
  c.set_num_workers(workers);
  c.set_staleness(staleness);
  c.set_straggler_timeout_seconds(60);
  c.set_straggler_policy(shardps::STRAGGLER_FAIL);
  return c;
}

TEST_F(ConsistencyClusterTest, SyncWorkersReproduceSingleProcessSgd) {
  // N workers with batches of B under BSP make the same updates as one
  // process with the combined batch of N * B: the average of N mean
  // gradients over equal batches is the mean gradient over their union.
  constexpr int kWorkers = 3, kBatch = 8, kSteps = 12;
  const model::Network mlp = *model::Network::FromSpec("mlp:20-16-4");
  const uint64_t p = mlp.num_params();
  std::mt19937 gen(5);
  std::normal_distribution<float> normal;
  // x[step][worker]: that worker's batch at that step.
  std::vector<std::vector<std::vector<float>>> x(
      kSteps, std::vector<std::vector<float>>(kWorkers));
  std::vector<std::vector<std::vector<int32_t>>> y(
      kSteps, std::vector<std::vector<int32_t>>(kWorkers));
  for (int t = 0; t < kSteps; ++t) {
    for (int w = 0; w < kWorkers; ++w) {
      for (int i = 0; i < kBatch * 20; ++i) x[t][w].push_back(normal(gen));
      for (int i = 0; i < kBatch; ++i) y[t][w].push_back(gen() % 4);
    }
  }
  TableOptions table;
  table.name = "bsp";
  table.num_params = p;
  table.optimizer.set_name("momentum");
  table.optimizer.set_learning_rate(0.05f);
  table.optimizer.set_momentum(0.9f);
  table.init.set_kind("uniform");
  table.init.set_scale(0.3f);
  table.init.set_seed(9);
  table.consistency = Barrier(shardps::CONSISTENCY_SYNC, kWorkers);

  std::vector<std::unique_ptr<Client>> clients;
  for (int w = 0; w < kWorkers; ++w) {
    clients.push_back(Connect(w));
    ASSERT_TRUE(clients.back()->CreateTable(table).ok());
  }
  // The single-process reference, from the same initial values.
  std::vector<std::vector<float>> reference(kSteps + 1, std::vector<float>(p));
  ASSERT_TRUE(clients[0]->Pull("bsp", 0, p, reference[0].data(), 0).ok());
  {
    std::unique_ptr<Updater> momentum = *MakeUpdater(table.optimizer, p);
    model::Network::Workspace ws = mlp.MakeWorkspace(kWorkers * kBatch);
    std::vector<float> grad(p);
    for (int t = 0; t < kSteps; ++t) {
      std::vector<float> xs;
      std::vector<int32_t> ys;
      for (int w = 0; w < kWorkers; ++w) {
        xs.insert(xs.end(), x[t][w].begin(), x[t][w].end());
        ys.insert(ys.end(), y[t][w].begin(), y[t][w].end());
      }
      mlp.TrainStep(reference[t].data(), xs.data(), ys.data(),
                    kWorkers * kBatch, grad.data(), &ws);
      reference[t + 1] = reference[t];
      momentum->Apply(0, reference[t + 1].data(), {grad.data(), p}, 1.0f);
    }
  }
  auto expect_close = [&](const std::vector<float>& got, int step, int worker) {
    for (uint64_t k = 0; k < p; ++k) {
      const float want = reference[step][k];
      ASSERT_NEAR(got[k], want, 1e-5f * (1 + std::fabs(want)))
          << "worker " << worker << " step " << step << " key " << k;
    }
  };
  std::vector<std::thread> threads;
  for (int w = 0; w < kWorkers; ++w) {
    threads.emplace_back([&, w] {
      model::Network::Workspace ws = mlp.MakeWorkspace(kBatch);
      std::vector<float> params(p), grad(p);
      for (int t = 0; t < kSteps; ++t) {
        ASSERT_TRUE(clients[w]->Pull("bsp", 0, p, params.data(), t).ok());
        // Every worker sees exactly the model of step t.
        expect_close(params, t, w);
        mlp.TrainStep(params.data(), x[t][w].data(), y[t][w].data(), kBatch,
                      grad.data(), &ws);
        ASSERT_TRUE(clients[w]->Push("bsp", 0, p, grad.data(), t).ok());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  std::vector<float> final_params(p);
  ASSERT_TRUE(clients[0]->Pull("bsp", 0, p, final_params.data(), kSteps).ok());
  expect_close(final_params, kSteps, 0);
  // One update per clock on each shard, however many pieces were pushed.
  absl::StatusOr<std::vector<shardps::StatsResponse>> stats =
      clients[0]->Stats();
  ASSERT_TRUE(stats.ok());
  for (const shardps::StatsResponse& s : *stats) {
    EXPECT_EQ(s.tables(0).version(), static_cast<uint64_t>(kSteps));
    EXPECT_EQ(s.tables(0).consistency_clock(), static_cast<uint64_t>(kSteps));
  }
}

TEST_F(ConsistencyClusterTest, SspNeverExceedsTheBoundAndFastWorkersUseIt) {
  // Each worker adds 1 to its own counter key on each shard at every clock
  // (SGD, lr 1, gradient -1), so a pull shows how many clocks of every
  // worker had been applied when it was answered.
  constexpr int kWorkers = 3, kStaleness = 3, kClocks = 30;
  constexpr uint64_t kKeys = 64;  // shards [0, 32) and [32, 64)
  TableOptions table;
  table.name = "ssp";
  table.num_params = kKeys;
  table.optimizer.set_name("sgd");
  table.optimizer.set_learning_rate(1.0f);
  table.consistency = Barrier(shardps::CONSISTENCY_SSP, kWorkers, kStaleness);
  std::vector<std::unique_ptr<Client>> clients;
  for (int w = 0; w < kWorkers; ++w) {
    clients.push_back(Connect(w));
    ASSERT_TRUE(clients.back()->CreateTable(table).ok());
  }
  struct Observation {
    int worker;
    uint64_t clock;
    std::vector<float> counts;  // per worker, per shard: 2 * kWorkers
  };
  absl::Mutex mu;
  std::vector<Observation> seen;                   // guarded by mu
  std::vector<int64_t> last_pulled(kWorkers, -1);  // guarded by mu
  constexpr int kSlow = kWorkers - 1;
  std::vector<std::thread> threads;
  for (int w = 0; w < kWorkers; ++w) {
    threads.emplace_back([&, w] {
      std::vector<float> values(kKeys), grad(kKeys, 0.0f);
      grad[w] = -1.0f;              // shard 0's counter
      grad[kKeys - 1 - w] = -1.0f;  // shard 1's
      for (uint64_t c = 0; c < kClocks; ++c) {
        ASSERT_TRUE(clients[w]->Pull("ssp", 0, kKeys, values.data(), c).ok());
        Observation o{w, c, {}};
        for (int v = 0; v < kWorkers; ++v) {
          o.counts.push_back(values[v]);
          o.counts.push_back(values[kKeys - 1 - v]);
        }
        {
          absl::MutexLock lock(&mu);
          seen.push_back(std::move(o));
          last_pulled[w] = static_cast<int64_t>(c);
          if (w == kSlow) {
            // The slow worker pushes clock c only once every fast worker
            // has pulled the last clock the bound lets it reach while the
            // slow worker has pushed clocks 0..c-1, which is c+K-1: an
            // event, so the fast workers use the whole bound however the
            // threads are scheduled (a server holding them back sooner
            // times out here).
            const int64_t reach =
                std::min<int64_t>(c + kStaleness - 1, kClocks - 1);
            auto fast_reached = [&] {
              mu.AssertHeld();
              for (int v = 0; v < kSlow; ++v) {
                if (last_pulled[v] < reach) return false;
              }
              return true;
            };
            ASSERT_TRUE(mu.AwaitWithTimeout(absl::Condition(&fast_reached),
                                            absl::Seconds(30)))
                << "the fast workers never pulled clock " << reach
                << " while the slow worker had pushed " << c << " clocks";
          }
        }
        ASSERT_TRUE(clients[w]->Push("ssp", 0, kKeys, grad.data(), c).ok());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  ASSERT_EQ(seen.size(), static_cast<size_t>(kWorkers * kClocks));
  int64_t fast_lead = 0;
  for (const Observation& o : seen) {
    const uint64_t need = o.clock >= kStaleness ? o.clock - kStaleness + 1 : 0;
    float least = kClocks;
    for (float count : o.counts) {
      // The bound: a pull at clock c sees every worker's clocks 0..c-K.
      ASSERT_GE(count, static_cast<float>(need))
          << "worker " << o.worker << " pulled clock " << o.clock;
      least = std::min(least, count);
    }
    if (o.worker != kWorkers - 1) {
      fast_lead = std::max<int64_t>(fast_lead, static_cast<int64_t>(o.clock) -
                                                   static_cast<int64_t>(least));
    }
  }
  // The fast workers ran as far ahead of the slow one as the bound lets
  // them (clock c against c-K+1 clocks pushed), and no further.
  EXPECT_EQ(fast_lead, kStaleness - 1);
}

}  // namespace
}  // namespace ps
