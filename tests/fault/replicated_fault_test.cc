// Replicated shards under SIGKILL (issue 17): 2 shards of 2 replicas each
// (four shardps-server processes with --etcd, a real etcd) and 2 workers
// pushing integer gradients (SGD, lr 1: every value exact) without pause,
// on an async table, an ssp one, a sparse one and, step by step (pull,
// push), on a sync one.
// Ten times, at a random moment, one server of the four (primary or
// backup) is killed with SIGKILL and started again; it must catch up and
// serve as a backup before the next kill, so the other replica of a shard
// can be the next one killed. At the end every key must equal its initial
// value minus exactly the acknowledged gradients: nothing lost, nothing
// applied twice. Printed: each kill's stall (the longest a push waited
// across it) and the longest push while a replica caught up.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "ps/base/program.h"
#include "ps/base/server_process.h"
#include "ps/client/client.h"
#include "util/etcd.h"
#include "util/files.h"

namespace ps {
namespace {

constexpr char kJob[] = "replicated";
constexpr int kShards = 2;
constexpr int kReplicas = 2;
constexpr int kWorkers = 2;
constexpr int kKills = 10;
constexpr uint64_t kKeys = 4096;

// One push as a worker saw it.
struct PushRecord {
  absl::Time start;
  absl::Time end;
};

// What the workers train: a table of kKeys values (dense keys, or rows of
// a sparse table side by side), each step pulling at its clock and pushing
// worker w's gradient w + 1 onto every value.
struct Workload {
  std::function<absl::Status(Client&)> create;
  std::function<absl::Status(Client&)> open;
  std::function<absl::Status(Client&, int worker, uint64_t clock)> step;
  // Every value, read as worker 0 at clock 0.
  std::function<absl::Status(Client&, std::vector<float>*)> read;
};

class ReplicatedFaultTest : public testutil::EtcdTest {
 protected:
  void SetUp() override {
    testutil::EtcdTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    for (int s = 0; s < kShards; ++s) {
      for (int r = 0; r < kReplicas; ++r) {
        ASSERT_TRUE(StartServer(s, r));
        // The first replica of each shard is its primary before the second
        // joins (and copies from it).
        if (r == 0) {
          ASSERT_TRUE(AwaitRole(s, r, "primary"));
        }
      }
    }
  }

  int Index(int shard, int replica) const {
    return shard * kReplicas + replica;
  }

  bool StartServer(int shard, int replica) {
    ServerProcessOptions o;
    o.binary = SiblingBinary("shardps-server");
    o.run_dir = dir_.path();
    o.name = absl::StrCat("server-", shard, "-", replica, "-", starts_++);
    o.extra_args = {absl::StrCat("--job=", kJob),
                    absl::StrCat("--etcd=", etcd_->endpoint()),
                    absl::StrCat("--shard=", shard),
                    absl::StrCat("--replica=", replica)};
    absl::StatusOr<std::unique_ptr<ServerProcess>> p = ServerProcess::Spawn(o);
    EXPECT_TRUE(p.ok()) << p.status() << Logs();
    if (!p.ok()) return false;
    servers_[Index(shard, replica)] = *std::move(p);
    return true;
  }

  // The end of every server's log, for failures.
  std::string Logs() const {
    std::string out;
    for (const auto& server : servers_) {
      if (server != nullptr) {
        absl::StrAppend(&out, "\n--- ", server->log_path(), ":\n",
                        LogTail(server->log_path(), 8));
      }
    }
    return out;
  }

  // Waits until the server reports `role` in Stats (at most 30 s).
  bool AwaitRole(int shard, int replica, const std::string& role) {
    ClientOptions o;
    o.server_addrs = {servers_[Index(shard, replica)]->address()};
    o.job = kJob;
    o.rpc_timeout = absl::Seconds(5);
    absl::StatusOr<std::unique_ptr<Client>> c = Client::Connect(o);
    if (!c.ok()) return false;
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (absl::Now() < deadline) {
      absl::StatusOr<std::vector<shardps::StatsResponse>> stats = (*c)->Stats();
      if (stats.ok() && (*stats)[0].role() == role) return true;
      absl::SleepFor(absl::Milliseconds(20));  // polling interval
    }
    ADD_FAILURE() << "server " << shard << "/" << replica << " never became "
                  << role;
    return false;
  }

  std::unique_ptr<Client> Connect(uint32_t worker) {
    ClientOptions o;
    o.etcd = etcd_->endpoint();
    o.num_shards = kShards;
    o.job = kJob;
    o.worker = worker;
    o.rpc_timeout = absl::Seconds(10);
    o.retry_give_up = absl::Seconds(60);
    o.log = &quiet_;
    absl::StatusOr<std::unique_ptr<Client>> c = Client::Connect(o);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *std::move(c) : nullptr;
  }

  // Retries are expected here; their lines would drown the figures.
  class Quiet : public LogSink {
   public:
    void Write(absl::string_view) override {}
  } quiet_;
  // Creates the workload's table, trains it with two workers while ten
  // servers are killed and restarted (printing each kill's stall), and
  // returns each worker's acknowledged steps; a step at clock c pulls at c
  // (sync: waits for clock c - 1) and pushes. At the end every worker
  // finishes the clock the most advanced one reached, then *values gets
  // the table.
  void TrainThroughKills(const Workload& work, int64_t* acknowledged,
                         std::vector<float>* values);

  std::unique_ptr<ServerProcess> servers_[kShards * kReplicas];
  int starts_ = 0;
};

void ReplicatedFaultTest::TrainThroughKills(const Workload& work,
                                            int64_t* acknowledged,
                                            std::vector<float>* values) {
  std::unique_ptr<Client> admin = Connect(99);
  ASSERT_NE(admin, nullptr);
  ASSERT_TRUE(work.create(*admin).ok());

  // Workers step until they have pushed clock last_clock.
  std::atomic<int64_t> last_clock{INT64_MAX};
  absl::Mutex mu;
  std::vector<PushRecord> records[kWorkers];
  absl::Status failed[kWorkers];
  std::vector<std::thread> workers;
  // Joined however the test ends (an assertion returns early).
  absl::Cleanup join = [&] {
    {
      absl::MutexLock lock(&mu);
      last_clock = *std::max_element(acknowledged, acknowledged + kWorkers);
    }
    for (std::thread& t : workers) t.join();
  };
  for (int w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&, w] {
      std::unique_ptr<Client> client = Connect(w);
      if (client == nullptr) return;
      if (absl::Status s = work.open(*client); !s.ok()) {
        failed[w] = s;
        return;
      }
      for (int64_t clock = 0; clock <= last_clock.load(); ++clock) {
        const absl::Time start = absl::Now();
        const absl::Status s =
            work.step(*client, w, static_cast<uint64_t>(clock));
        if (!s.ok()) {
          failed[w] = s;
          return;
        }
        absl::MutexLock lock(&mu);
        ++acknowledged[w];
        records[w].push_back({start, absl::Now()});
      }
    });
  }

  std::mt19937 random(testing::UnitTest::GetInstance()->random_seed());
  std::vector<std::pair<absl::Time, absl::Time>> catch_ups;
  std::vector<absl::Time> kills;
  // Waits until every worker has had `n` more pushes acknowledged: the
  // last kill's outage is over and training flows again.
  auto await_progress = [&](int64_t n) {
    absl::MutexLock lock(&mu);
    const std::vector<int64_t> from(acknowledged, acknowledged + kWorkers);
    auto moved = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
      for (int w = 0; w < kWorkers; ++w) {
        if (!failed[w].ok() || acknowledged[w] < from[w] + n) {
          return !failed[w].ok();
        }
      }
      return true;
    };
    return mu.AwaitWithTimeout(absl::Condition(&moved), absl::Seconds(60));
  };
  int last_shard = -1, last_replica = -1;
  for (int k = 0; k < kKills; ++k) {
    ASSERT_TRUE(await_progress(20)) << "training did not resume";
    absl::SleepFor(
        absl::Milliseconds(std::uniform_int_distribution<int>(0, 500)(random)));
    // Every other kill takes the other replica of the shard just killed
    // (the first kill's replica has caught up by then): a second failure
    // of the shard is survived too. The rest are random.
    int shard = std::uniform_int_distribution<int>(0, kShards - 1)(random);
    int replica = std::uniform_int_distribution<int>(0, kReplicas - 1)(random);
    if (k % 2 == 1) {
      shard = last_shard;
      replica = 1 - last_replica;
    }
    last_shard = shard;
    last_replica = replica;
    kills.push_back(absl::Now());
    servers_[Index(shard, replica)]->Kill();
    std::printf("kill %d: shard %d replica %d\n", k + 1, shard, replica);
    const absl::Time restarted = absl::Now();
    ASSERT_TRUE(StartServer(shard, replica));
    ASSERT_TRUE(AwaitRole(shard, replica, "backup"));
    catch_ups.push_back({restarted, absl::Now()});
  }
  ASSERT_TRUE(await_progress(20));
  kills.push_back(absl::Now());  // the end of the last kill's window
  absl::SleepFor(absl::Milliseconds(300));
  std::move(join).Invoke();
  for (int w = 0; w < kWorkers; ++w) {
    ASSERT_TRUE(failed[w].ok()) << "worker " << w << ": " << failed[w];
  }
  // Read as worker 0 at clock 0 (a sync barrier knows no other id; such a
  // pull never waits).
  std::unique_ptr<Client> reader = Connect(0);
  ASSERT_NE(reader, nullptr);
  ASSERT_TRUE(work.open(*reader).ok());
  const absl::Status read = work.read(*reader, values);
  ASSERT_TRUE(read.ok()) << read;

  // Each kill's stall: the longest any worker went without an acknowledged
  // push between the kill and the next one; and the longest push that
  // began and ended while the restarted replica caught up.
  std::vector<double> stalls;
  double catch_up_worst = 0;
  for (size_t k = 0; k + 1 < kills.size(); ++k) {
    double stall = 0;
    double during_catch_up = 0;
    for (int w = 0; w < kWorkers; ++w) {
      absl::Time previous = kills[k];
      for (const PushRecord& p : records[w]) {
        if (p.end < kills[k] || p.end > kills[k + 1]) continue;
        stall = std::max(stall, absl::ToDoubleSeconds(p.end - previous));
        previous = p.end;
        if (p.start >= catch_ups[k].first && p.end <= catch_ups[k].second) {
          during_catch_up =
              std::max(during_catch_up, absl::ToDoubleSeconds(p.end - p.start));
        }
      }
    }
    stalls.push_back(stall);
    catch_up_worst = std::max(catch_up_worst, during_catch_up);
    std::printf(
        "kill %zu: stall %.3f s; catch-up took %.3f s, longest push "
        "meanwhile %.3f s\n",
        k + 1, stall,
        absl::ToDoubleSeconds(catch_ups[k].second - catch_ups[k].first),
        during_catch_up);
  }
  std::vector<double> sorted = stalls;
  std::sort(sorted.begin(), sorted.end());
  std::printf(
      "pushes acknowledged: %lld + %lld; stall per kill: median %.3f s, max "
      "%.3f s; longest push during a catch-up %.3f s\n",
      static_cast<long long>(acknowledged[0]),
      static_cast<long long>(acknowledged[1]), sorted[sorted.size() / 2],
      sorted.back(), catch_up_worst);
  // Training resumed after every kill (await_progress) and nothing hung: a
  // stall is the failover (etcd lease, 1 s) plus retries, far below this.
  EXPECT_LT(sorted.back(), 10.0);
}

TableOptions SgdTable(const std::string& name) {
  TableOptions table;
  table.name = name;
  table.num_params = kKeys;
  table.optimizer.set_name("sgd");
  table.optimizer.set_learning_rate(1.0f);
  return table;
}

// Dense `table`: a step pulls every key at its clock, then pushes.
Workload DenseWorkload(const TableOptions& table) {
  Workload work;
  work.create = [table](Client& c) { return c.CreateTable(table); };
  work.open = [table](Client& c) {
    return c.OpenTable(table, absl::Seconds(30));
  };
  work.step = [name = table.name](Client& c, int worker, uint64_t clock) {
    std::vector<float> pulled(kKeys);
    if (absl::Status s = c.Pull(name, 0, kKeys, pulled.data(), clock);
        !s.ok()) {
      return s;
    }
    const std::vector<float> grad(kKeys, static_cast<float>(worker + 1));
    return c.Push(name, 0, kKeys, grad.data(), clock);
  };
  work.read = [name = table.name](Client& c, std::vector<float>* values) {
    values->resize(kKeys);
    return c.Pull(name, 0, kKeys, values->data());
  };
  return work;
}

// A sparse SGD table of kKeys / kDim rows with ids spread over uint64 (so
// both shards hold some): a step pulls every row, creating those not held
// yet, then pushes.
constexpr uint32_t kDim = 8;
Workload SparseWorkload() {
  RowTableOptions table;
  table.name = "rows";
  table.dim = kDim;
  table.max_rows_per_shard = kKeys / kDim;
  table.optimizer.set_name("sgd");
  table.optimizer.set_learning_rate(1.0f);
  std::vector<uint64_t> ids(kKeys / kDim);
  for (size_t i = 0; i < ids.size(); ++i) {
    ids[i] = (i + 1) * 0x9e3779b97f4a7c15;
  }
  Workload work;
  work.create = [table](Client& c) { return c.CreateRowTable(table); };
  work.open = [](Client& c) { return c.OpenRowTable("rows"); };
  work.step = [ids](Client& c, int worker, uint64_t) {
    std::vector<float> pulled(kKeys);
    if (absl::Status s = c.PullRows("rows", ids, pulled.data()); !s.ok()) {
      return s;
    }
    const std::vector<float> grad(kKeys, static_cast<float>(worker + 1));
    return c.PushRows("rows", ids, grad.data());
  };
  work.read = [ids](Client& c, std::vector<float>* values) {
    values->resize(kKeys);
    return c.PullRows("rows", ids, values->data(), /*create=*/false);
  };
  return work;
}

// Each push applied once, as it came: the values are minus every
// acknowledged gradient (async and ssp tables).
void ExpectEveryPushOnce(const int64_t* acknowledged,
                         const std::vector<float>& values) {
  // Exactly the acknowledged gradients, once each.
  float expect = 0;
  for (int w = 0; w < kWorkers; ++w) {
    expect -= static_cast<float>((w + 1) * acknowledged[w]);
  }
  for (uint64_t k = 0; k < kKeys; ++k) {
    ASSERT_EQ(values[k], expect) << "key " << k << " after " << acknowledged[0]
                                 << " + " << acknowledged[1] << " pushes";
  }
}

TEST_F(ReplicatedFaultTest, TenKillsLoseNoAcknowledgedPushAndApplyNoneTwice) {
  int64_t acknowledged[kWorkers] = {};
  std::vector<float> values;
  ASSERT_NO_FATAL_FAILURE(
      TrainThroughKills(DenseWorkload(SgdTable("w")), acknowledged, &values));
  ExpectEveryPushOnce(acknowledged, values);
}

TEST_F(ReplicatedFaultTest, ASparseTableLosesNoRowPushThroughTenKills) {
  int64_t acknowledged[kWorkers] = {};
  std::vector<float> values;
  ASSERT_NO_FATAL_FAILURE(
      TrainThroughKills(SparseWorkload(), acknowledged, &values));
  ExpectEveryPushOnce(acknowledged, values);
}

// SgdTable under `mode`, a barrier of the kWorkers workers (straggler
// policy fail, far beyond any failover).
TableOptions BarrierTable(const std::string& name,
                          shardps::ConsistencyMode mode) {
  TableOptions table = SgdTable(name);
  table.consistency.set_mode(mode);
  table.consistency.set_num_workers(kWorkers);
  table.consistency.set_straggler_timeout_seconds(60);
  return table;
}

TEST_F(ReplicatedFaultTest, AnSspTableLosesNoPushThroughTenKills) {
  TableOptions table = BarrierTable("ssp", shardps::CONSISTENCY_SSP);
  table.consistency.set_staleness(2);
  int64_t acknowledged[kWorkers] = {};
  std::vector<float> values;
  ASSERT_NO_FATAL_FAILURE(
      TrainThroughKills(DenseWorkload(table), acknowledged, &values));
  ExpectEveryPushOnce(acknowledged, values);
}

TEST_F(ReplicatedFaultTest, ASyncTableLosesNoClockThroughTenKills) {
  const TableOptions table = BarrierTable("bsp", shardps::CONSISTENCY_SYNC);
  int64_t acknowledged[kWorkers] = {};
  std::vector<float> values;
  ASSERT_NO_FATAL_FAILURE(
      TrainThroughKills(DenseWorkload(table), acknowledged, &values));
  // Both workers pushed the same clocks; each clock applied the mean of
  // their gradients (1 and 2) once: a push lost from a clock would have
  // hung it, one counted twice would have moved it by more.
  ASSERT_EQ(acknowledged[0], acknowledged[1]);
  const float expect = -1.5f * static_cast<float>(acknowledged[0]);
  for (uint64_t k = 0; k < kKeys; ++k) {
    ASSERT_EQ(values[k], expect)
        << "key " << k << " after " << acknowledged[0] << " clocks";
  }
}

}  // namespace
}  // namespace ps
