// Replicated shards in this process (ps/server/replicator.h) with a real
// etcd: the primary forwards what it applies, a backup refuses clients and
// stale primaries, a failover keeps every acknowledged push exactly once,
// and a replica that comes back copies the state before it serves; for
// dense and sparse tables alike.
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "proto/replication.grpc.pb.h"
#include "proto/shardps.grpc.pb.h"
#include "ps/coord/membership.h"
#include "ps/server/server.h"
#include "util/etcd.h"
#include "util/files.h"
#include "util/log.h"
#include "util/processes.h"

namespace ps {
namespace {

constexpr char kJob[] = "rjob";
constexpr uint64_t kKeys = 64;

shardps::PushRequest PushOf(uint64_t session, uint64_t sequence, float g) {
  shardps::PushRequest push;
  push.set_job(kJob);
  push.set_table("w");
  push.set_end(kKeys);
  push.set_session(session);
  push.set_sequence(sequence);
  push.set_acked_below(sequence);
  const std::vector<float> gradient(kKeys, g);
  push.set_gradient(std::string(reinterpret_cast<const char*>(gradient.data()),
                                kKeys * sizeof(float)));
  return push;
}

// An async table of kKeys keys on one shard, SGD lr 1, every value 100.
shardps::CreateTableRequest AsyncSpec(const std::string& name) {
  shardps::CreateTableRequest spec;
  spec.set_job(kJob);
  spec.set_table(name);
  spec.set_num_params(kKeys);
  spec.set_num_shards(1);
  spec.mutable_optimizer()->set_name("sgd");
  spec.mutable_optimizer()->set_learning_rate(1.0f);
  spec.mutable_init()->set_kind("constant");
  spec.mutable_init()->set_value(100.0f);
  return spec;
}

// The same under sync, of `workers` workers (straggler policy fail).
shardps::CreateTableRequest SyncSpec(const std::string& name,
                                     uint32_t workers) {
  shardps::CreateTableRequest spec = AsyncSpec(name);
  spec.mutable_consistency()->set_mode(shardps::CONSISTENCY_SYNC);
  spec.mutable_consistency()->set_num_workers(workers);
  spec.mutable_consistency()->set_straggler_timeout_seconds(60);
  return spec;
}

// Worker `worker`'s whole push of `clock` to sync table "s" (session
// 100 + worker, one push per clock).
shardps::PushRequest SyncPush(uint32_t worker, uint64_t clock, float g) {
  shardps::PushRequest push = PushOf(100 + worker, clock + 1, g);
  push.set_table("s");
  push.set_worker(worker);
  push.set_clock(clock);
  return push;
}

// Worker `worker`'s pull of all of sync table "s" at `clock`.
shardps::PullRequest SyncPull(uint32_t worker, uint64_t clock) {
  shardps::PullRequest pull;
  pull.set_job(kJob);
  pull.set_table("s");
  pull.set_end(kKeys);
  pull.set_worker(worker);
  pull.set_clock(clock);
  return pull;
}

// A sparse table of rows of kDim on one shard, SGD lr 1, every value 100.
constexpr uint32_t kDim = 4;
shardps::CreateTableRequest SparseSpec() {
  shardps::CreateTableRequest spec;
  spec.set_job(kJob);
  spec.set_table("e");
  spec.set_dim(kDim);
  spec.set_max_rows(1000);
  spec.set_num_shards(1);
  spec.mutable_optimizer()->set_name("sgd");
  spec.mutable_optimizer()->set_learning_rate(1.0f);
  spec.mutable_init()->set_kind("constant");
  spec.mutable_init()->set_value(100.0f);
  return spec;
}

// Row ids spread over uint64, as hashed ids are.
std::vector<uint64_t> RowIds() { return {3, 1000000007, 0xfedcba9876543210}; }

// A push of gradient g to every row of `ids` in sparse table "e".
shardps::PushRowsRequest PushRowsOf(uint64_t session, uint64_t sequence,
                                    const std::vector<uint64_t>& ids, float g) {
  shardps::PushRowsRequest push;
  push.set_job(kJob);
  push.set_table("e");
  for (uint64_t id : ids) push.add_ids(id);
  push.set_session(session);
  push.set_sequence(sequence);
  push.set_acked_below(sequence);
  const std::vector<float> grads(ids.size() * kDim, g);
  push.set_gradients(std::string(reinterpret_cast<const char*>(grads.data()),
                                 grads.size() * sizeof(float)));
  return push;
}

// How many lines of `log` contain `text`.
int Lines(testutil::RecordingLog& log, absl::string_view text) {
  int n = 0;
  for (const std::string& line : log.lines())
    n += absl::StrContains(line, text);
  return n;
}

class ReplicationTest : public testutil::EtcdTest {
 protected:
  std::unique_ptr<Server> StartReplica(uint32_t replica, LogSink* log = nullptr,
                                       const std::string& checkpoint_dir = "") {
    ServerOptions o;
    o.log = log;
    o.checkpoint.dir = checkpoint_dir;
    o.host = "127.0.0.1";
    o.job = kJob;
    o.replication.etcd = etcd_->endpoint();
    o.replication.shard = 0;
    o.replication.replica = replica;
    o.replication.token = replication_token_;
    absl::StatusOr<std::unique_ptr<Server>> s = Server::Start(o);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *std::move(s) : nullptr;
  }

  // Replica 0 as the primary, replica 1 as its backup, table "w" created.
  void StartPrimaryAndBackup(std::unique_ptr<Server>* a,
                             std::unique_ptr<Server>* b) {
    *a = StartReplica(0);
    ASSERT_NE(*a, nullptr);
    AwaitRole(**a, "primary");
    *b = StartReplica(1);
    ASSERT_NE(*b, nullptr);
    AwaitRole(**b, "backup");
    ASSERT_TRUE(CreateTable(**a).ok());
  }

  // StartPrimaryAndBackup without the table, replica r logging to logs[r].
  void StartLoggedPrimaryAndBackup(testutil::RecordingLog logs[2],
                                   std::unique_ptr<Server> servers[2]) {
    servers[0] = StartReplica(0, &logs[0]);
    ASSERT_NE(servers[0], nullptr);
    AwaitRole(*servers[0], "primary");
    servers[1] = StartReplica(1, &logs[1]);
    ASSERT_NE(servers[1], nullptr);
    AwaitRole(*servers[1], "backup");
  }

  static std::unique_ptr<shardps::ParameterServer::Stub> Stub(
      const Server& server) {
    return shardps::ParameterServer::NewStub(grpc::CreateChannel(
        server.address(), grpc::InsecureChannelCredentials()));
  }

  static shardps::StatsResponse Stats(const Server& server) {
    grpc::ClientContext context;
    shardps::StatsRequest request;
    request.set_job(kJob);
    shardps::StatsResponse response;
    EXPECT_TRUE(Stub(server)->Stats(&context, request, &response).ok());
    return response;
  }

  // The replicas' own token for replicas started from now on.
  std::string replication_token_;

  // Ends replica `replica`'s lease in etcd while its process lives on (a
  // pause or a partition longer than the lease).
  void LoseLease(uint32_t replica) {
    absl::StatusOr<shardps::etcd::RangeResponse> key =
        client_->Get(ReplicaKey(kJob, 0, replica));
    ASSERT_TRUE(key.ok() && !key->kvs().empty()) << key.status();
    ASSERT_TRUE(client_->RevokeLease(key->kvs(0).lease()).ok());
  }

  // Stops `*dying` (the primary), waits until `survivor` takes over and
  // expects every key of "w" there to be `value`.
  void ExpectFailoverKeeps(std::unique_ptr<Server>* dying,
                           const Server& survivor, float value) {
    dying->reset();
    AwaitRole(survivor, "primary");
    std::vector<float> values;
    ASSERT_TRUE(Pull(survivor, &values).ok());
    EXPECT_EQ(values, std::vector<float>(kKeys, value));
  }

  // Waits until the replica logging to `log` has caught up `times` times.
  static void AwaitCaughtUp(testutil::RecordingLog& log, int times) {
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (Lines(log, "caught up from") < times && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(20));  // polling interval
    }
    ASSERT_EQ(Lines(log, "caught up from"), times)
        << absl::StrJoin(log.lines(), "\n");
  }

  // Waits until `server` reports `role`.
  static void AwaitRole(const Server& server, const std::string& role) {
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (Stats(server).role() != role && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(20));  // polling interval
    }
    ASSERT_EQ(Stats(server).role(), role) << server.address();
  }

  static grpc::Status Push(const Server& server,
                           const shardps::PushRequest& push,
                           shardps::PushResponse* reply) {
    grpc::ClientContext context;
    return Stub(server)->Push(&context, push, reply);
  }

  static grpc::Status Pull(const Server& server, std::vector<float>* values) {
    grpc::ClientContext context;
    shardps::PullRequest pull;
    pull.set_job(kJob);
    pull.set_table("w");
    pull.set_end(kKeys);
    shardps::PullResponse response;
    grpc::Status s = Stub(server)->Pull(&context, pull, &response);
    if (s.ok()) {
      values->resize(kKeys);
      std::memcpy(values->data(), response.values().data(),
                  kKeys * sizeof(float));
    }
    return s;
  }

  static grpc::Status PushRows(const Server& server,
                               const shardps::PushRowsRequest& push,
                               shardps::PushRowsResponse* reply) {
    grpc::ClientContext context;
    return Stub(server)->PushRows(&context, push, reply);
  }

  // Rows `ids` of "e" into *values (creating those not held yet when
  // `create`).
  static grpc::Status PullRows(const Server& server, std::vector<float>* values,
                               const std::vector<uint64_t>& ids = RowIds(),
                               bool create = false) {
    grpc::ClientContext context;
    shardps::PullRowsRequest pull;
    pull.set_job(kJob);
    pull.set_table("e");
    for (uint64_t id : ids) pull.add_ids(id);
    pull.set_create(create);
    shardps::PullRowsResponse response;
    grpc::Status s = Stub(server)->PullRows(&context, pull, &response);
    if (s.ok()) {
      values->resize(ids.size() * kDim);
      EXPECT_EQ(response.values().size(), values->size() * sizeof(float));
      std::memcpy(
          values->data(), response.values().data(),
          std::min(response.values().size(), values->size() * sizeof(float)));
    }
    return s;
  }

  // The sparse table's stats on `server`.
  static shardps::TableStats SparseStats(const Server& server) {
    const shardps::StatsResponse stats = Stats(server);
    for (const shardps::TableStats& t : stats.tables()) {
      if (t.table() == "e") return t;
    }
    ADD_FAILURE() << "no sparse table on " << server.address();
    return {};
  }

  static grpc::Status CreateSparseTable(const Server& server) {
    grpc::ClientContext context;
    shardps::CreateTableResponse response;
    return Stub(server)->CreateTable(&context, SparseSpec(), &response);
  }

  static grpc::Status CreateTable(const Server& server) {
    grpc::ClientContext context;
    shardps::CreateTableResponse response;
    return Stub(server)->CreateTable(&context, AsyncSpec("w"), &response);
  }
};

TEST_F(ReplicationTest, ReplicasStartingAtOnceElectOnePrimaryTheOtherCopies) {
  // As compose or a cluster scheduler starts them: both at the same time,
  // neither finding a primary. Only one may call the empty state the
  // shard's; the other must copy from it, or pushes made before it said
  // it was ready would be on one replica only.
  testutil::RecordingLog logs[2];
  std::unique_ptr<Server> servers[2];
  std::thread starting([&] { servers[1] = StartReplica(1, &logs[1]); });
  servers[0] = StartReplica(0, &logs[0]);
  starting.join();
  ASSERT_NE(servers[0], nullptr);
  ASSERT_NE(servers[1], nullptr);
  const int primary = Stats(*servers[0]).role() == "primary" ? 0 : 1;
  const int backup = 1 - primary;
  EXPECT_EQ(Stats(*servers[primary]).role(), "primary");
  EXPECT_EQ(Stats(*servers[backup]).role(), "backup");
  EXPECT_TRUE(logs[backup].Has(
      absl::StrCat("caught up from ", servers[primary]->address())))
      << absl::StrJoin(logs[backup].lines(), "\n");
  EXPECT_FALSE(logs[primary].Has("caught up"));
  // And the backup gets every push from the first on.
  ASSERT_TRUE(CreateTable(*servers[primary]).ok());
  shardps::PushResponse reply;
  ASSERT_TRUE(Push(*servers[primary], PushOf(3, 1, 2.0f), &reply).ok());
  ExpectFailoverKeeps(&servers[primary], *servers[backup], 98.0f);
}

TEST_F(ReplicationTest, EveryAcknowledgedPushSurvivesEachReplicaInTurn) {
  std::unique_ptr<Server> a, b;
  ASSERT_NO_FATAL_FAILURE(StartPrimaryAndBackup(&a, &b));
  shardps::PushResponse reply;
  for (uint64_t seq = 1; seq <= 5; ++seq) {
    ASSERT_TRUE(Push(*a, PushOf(7, seq, 1.0f), &reply).ok());
  }
  // The backup answers no client, names why, and has every push.
  std::vector<float> values;
  const grpc::Status refused = Pull(*b, &values);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(refused.error_message().find("not its primary"), std::string::npos)
      << refused.error_message();
  EXPECT_EQ(Stats(*b).tables(0).version(), 5u);

  // The primary goes; the backup takes over with every push, and a retry
  // of the last one is a duplicate there.
  const int64_t first_epoch = Stats(*a).epoch();
  a.reset();
  AwaitRole(*b, "primary");
  EXPECT_GT(Stats(*b).epoch(), first_epoch);
  ASSERT_TRUE(Pull(*b, &values).ok());
  EXPECT_EQ(values, std::vector<float>(kKeys, 95.0f));
  ASSERT_TRUE(Push(*b, PushOf(7, 5, 1.0f), &reply).ok());
  EXPECT_TRUE(reply.duplicate());
  for (uint64_t seq = 6; seq <= 8; ++seq) {
    ASSERT_TRUE(Push(*b, PushOf(7, seq, 1.0f), &reply).ok());
  }

  // Replica 0 comes back empty, copies the state from the new primary, and
  // takes what follows; then the other replica goes in turn.
  a = StartReplica(0);
  ASSERT_NE(a, nullptr);
  AwaitRole(*a, "backup");
  ASSERT_TRUE(Push(*b, PushOf(7, 9, 1.0f), &reply).ok());
  ASSERT_TRUE(Push(*b, PushOf(8, 1, 2.0f), &reply).ok());
  b.reset();
  AwaitRole(*a, "primary");
  ASSERT_TRUE(Pull(*a, &values).ok());
  EXPECT_EQ(values, std::vector<float>(kKeys, 100.0f - 9 - 2));
  EXPECT_EQ(Stats(*a).tables(0).version(), 10u);
  ASSERT_TRUE(Push(*a, PushOf(8, 1, 2.0f), &reply).ok());
  EXPECT_TRUE(reply.duplicate());
}

TEST_F(ReplicationTest, APushPullIsAnsweredOnceTheBackupHasItsPush) {
  std::unique_ptr<Server> a, b;
  ASSERT_NO_FATAL_FAILURE(StartPrimaryAndBackup(&a, &b));
  const shardps::PushRequest push = PushOf(7, 1, 3.0f);
  shardps::PushPullRequest request;
  request.set_job(kJob);
  request.set_table("w");
  request.set_end(kKeys);
  request.set_session(7);
  request.set_sequence(1);
  request.set_acked_below(1);
  request.set_gradient(push.gradient());
  shardps::PushPullResponse response;
  {
    grpc::ClientContext context;
    const grpc::Status s = Stub(*a)->PushPull(&context, request, &response);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  std::vector<float> values(kKeys);
  ASSERT_EQ(response.values().size(), kKeys * sizeof(float));
  std::memcpy(values.data(), response.values().data(), kKeys * sizeof(float));
  EXPECT_EQ(values, std::vector<float>(kKeys, 97.0f));
  // Answered only after the backup applied it; the backup refuses
  // PushPulls from clients as it refuses pushes.
  EXPECT_EQ(Stats(*b).tables(0).version(), 1u);
  {
    grpc::ClientContext context;
    const grpc::Status s = Stub(*b)->PushPull(&context, request, &response);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
  }
  // After a failover the new primary has the push once: the retry is a
  // duplicate answered with the same values.
  a.reset();
  AwaitRole(*b, "primary");
  {
    grpc::ClientContext context;
    const grpc::Status s = Stub(*b)->PushPull(&context, request, &response);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  EXPECT_TRUE(response.duplicate());
  std::memcpy(values.data(), response.values().data(), kKeys * sizeof(float));
  EXPECT_EQ(values, std::vector<float>(kKeys, 97.0f));
}

TEST_F(ReplicationTest, AnAssignIsAcknowledgedOnceTheBackupHasIt) {
  std::unique_ptr<Server> a, b;
  ASSERT_NO_FATAL_FAILURE(StartPrimaryAndBackup(&a, &b));
  // Built from the proto alone, as any client would.
  shardps::AssignRequest request;
  request.set_job(kJob);
  request.set_table("w");
  request.set_end(kKeys);
  request.set_session(9);
  request.set_sequence(1);
  request.set_acked_below(1);
  std::vector<float> assigned(kKeys);
  for (uint64_t k = 0; k < kKeys; ++k) assigned[k] = 0.25f * k;
  request.set_values(std::string(reinterpret_cast<const char*>(assigned.data()),
                                 kKeys * sizeof(float)));
  shardps::AssignResponse response;
  {
    grpc::ClientContext context;
    const grpc::Status s = Stub(*a)->Assign(&context, request, &response);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  EXPECT_FALSE(response.duplicate());
  EXPECT_EQ(Stats(*b).tables(0).version(), 1u);
  {
    grpc::ClientContext context;
    const grpc::Status s = Stub(*b)->Assign(&context, request, &response);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
  }
  a.reset();
  AwaitRole(*b, "primary");
  {
    grpc::ClientContext context;
    const grpc::Status s = Stub(*b)->Assign(&context, request, &response);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  EXPECT_TRUE(response.duplicate());
  std::vector<float> values;
  ASSERT_TRUE(Pull(*b, &values).ok());
  EXPECT_EQ(values, assigned);
}

TEST_F(ReplicationTest, ReplicasThatLoseTheirLeaseWhileAliveCopyTheShardAgain) {
  // A pause or a partition longer than the lease: etcd forgets a replica
  // whose process lives on. It must not stay out of the chain for good.
  testutil::RecordingLog logs[2];
  std::unique_ptr<Server> servers[2];
  ASSERT_NO_FATAL_FAILURE(StartLoggedPrimaryAndBackup(logs, servers));
  ASSERT_TRUE(CreateTable(*servers[0]).ok());
  uint64_t sequence = 0;
  auto push_to = [&](int server) {
    shardps::PushResponse reply;
    ASSERT_TRUE(
        Push(*servers[server], PushOf(9, ++sequence, 1.0f), &reply).ok());
  };
  for (int i = 0; i < 3; ++i) push_to(0);
  // The backup: forgotten, registered again, it copies the shard again.
  ASSERT_NO_FATAL_FAILURE(LoseLease(1));
  ASSERT_NO_FATAL_FAILURE(AwaitCaughtUp(logs[1], 2));
  AwaitRole(*servers[1], "backup");
  for (int i = 0; i < 2; ++i) push_to(0);
  // The primary: the backup takes over; the old primary copies from it.
  ASSERT_NO_FATAL_FAILURE(LoseLease(0));
  AwaitRole(*servers[1], "primary");
  ASSERT_NO_FATAL_FAILURE(AwaitCaughtUp(logs[0], 1));
  AwaitRole(*servers[0], "backup");
  for (int i = 0; i < 4; ++i) push_to(1);
  // Each holds every push: the other can die now.
  ExpectFailoverKeeps(&servers[1], *servers[0], 100.0f - 9);
}

TEST_F(ReplicationTest, WhenEveryReplicaDiedTheFirstBackServesItsCheckpoint) {
  // Replicas with checkpoints: when all of a shard's replicas are gone,
  // the first to come back serves what its checkpoint holds, and the next
  // copies from it, replacing its own (older) checkpoint's state; for a
  // dense and a sparse table side by side.
  const std::string dirs[2] = {dir_.path() + "/ckpt-0",
                               dir_.path() + "/ckpt-1"};
  std::unique_ptr<Server> servers[2];
  servers[0] = StartReplica(0, nullptr, dirs[0]);
  ASSERT_NE(servers[0], nullptr);
  AwaitRole(*servers[0], "primary");
  servers[1] = StartReplica(1, nullptr, dirs[1]);
  ASSERT_NE(servers[1], nullptr);
  AwaitRole(*servers[1], "backup");
  ASSERT_TRUE(CreateTable(*servers[0]).ok());
  ASSERT_TRUE(CreateSparseTable(*servers[0]).ok());
  // Push `seq` of gradient g to both tables; *duplicate: both said so.
  auto push = [](const Server& to, uint64_t seq, float g,
                 bool* duplicate = nullptr) {
    shardps::PushResponse reply;
    ASSERT_TRUE(Push(to, PushOf(5, seq, g), &reply).ok());
    shardps::PushRowsResponse rows_reply;
    ASSERT_TRUE(
        PushRows(to, PushRowsOf(6, seq, RowIds(), g), &rows_reply).ok());
    if (duplicate != nullptr) {
      *duplicate = reply.duplicate() && rows_reply.duplicate();
    }
  };
  // Every key of "w" and every value of the rows of "e" is `value`.
  auto expect_all = [](const Server& at, float value) {
    std::vector<float> values;
    ASSERT_TRUE(Pull(at, &values).ok());
    EXPECT_EQ(values, std::vector<float>(kKeys, value));
    ASSERT_TRUE(PullRows(at, &values).ok());
    EXPECT_EQ(values, std::vector<float>(RowIds().size() * kDim, value));
  };
  for (uint64_t seq = 1; seq <= 3; ++seq) {
    ASSERT_NO_FATAL_FAILURE(push(*servers[0], seq, 1.0f));
  }
  // Replica 0 stops (its last checkpoint: 97); replica 1 takes over,
  // takes one more push, and stops too (its checkpoint: 96).
  servers[0].reset();
  AwaitRole(*servers[1], "primary");
  ASSERT_NO_FATAL_FAILURE(push(*servers[1], 4, 1.0f));
  servers[1].reset();
  // Replica 0 is back first: it serves its checkpoint.
  servers[0] = StartReplica(0, nullptr, dirs[0]);
  ASSERT_NE(servers[0], nullptr);
  AwaitRole(*servers[0], "primary");
  ASSERT_NO_FATAL_FAILURE(expect_all(*servers[0], 97.0f));
  // The push its checkpoint holds is a duplicate; a new one is applied.
  bool duplicate = false;
  ASSERT_NO_FATAL_FAILURE(push(*servers[0], 3, 1.0f, &duplicate));
  EXPECT_TRUE(duplicate);
  ASSERT_NO_FATAL_FAILURE(push(*servers[0], 5, 2.0f));
  // Replica 1 copies from it: its own checkpoint's 96 is replaced.
  servers[1] = StartReplica(1, nullptr, dirs[1]);
  ASSERT_NE(servers[1], nullptr);
  AwaitRole(*servers[1], "backup");
  servers[0].reset();
  AwaitRole(*servers[1], "primary");
  ASSERT_NO_FATAL_FAILURE(expect_all(*servers[1], 95.0f));
}

TEST_F(ReplicationTest, PushesGoOnWhileEtcdIsAway) {
  std::unique_ptr<Server> a, b;
  ASSERT_NO_FATAL_FAILURE(StartPrimaryAndBackup(&a, &b));
  const EtcdProcessOptions ports = etcd_->options();
  etcd_->Kill();
  auto held = std::make_unique<testutil::HeldPorts>(
      std::initializer_list<int>{ports.client_port, ports.peer_port});
  // Three lease TTLs without etcd: the primary stays primary, forwards to
  // its backup and acknowledges; the backup stays a backup.
  absl::SleepFor(absl::Seconds(3));
  shardps::PushResponse reply;
  for (uint64_t seq = 1; seq <= 4; ++seq) {
    ASSERT_TRUE(Push(*a, PushOf(3, seq, 1.0f), &reply).ok());
  }
  EXPECT_EQ(Stats(*a).role(), "primary");
  EXPECT_EQ(Stats(*b).role(), "backup");
  EXPECT_EQ(Stats(*b).tables(0).version(), 4u);
  // etcd back: nothing changed, and a failover works again.
  etcd_.reset();
  held.reset();
  etcd_ = testutil::StartEtcd(dir_.path(), ports.client_port, ports.peer_port);
  ASSERT_NE(etcd_, nullptr);
  ExpectFailoverKeeps(&a, *b, 96.0f);
}

TEST_F(ReplicationTest, AStalePrimaryCannotHaveAPushAcknowledged) {
  std::unique_ptr<Server> a, b;
  ASSERT_NO_FATAL_FAILURE(StartPrimaryAndBackup(&a, &b));
  const int64_t epoch = Stats(*a).epoch();
  // A forward carrying an epoch older than the backup has seen is refused.
  grpc::ClientContext context;
  context.AddMetadata("x-shardps-epoch", absl::StrCat(epoch - 1));
  context.AddMetadata("x-shardps-position", "1");
  shardps::PushResponse reply;
  const grpc::Status stale =
      Stub(*b)->Push(&context, PushOf(9, 1, 1.0f), &reply);
  EXPECT_EQ(stale.error_code(), grpc::StatusCode::FAILED_PRECONDITION)
      << stale.error_message();
  EXPECT_EQ(Stats(*b).tables(0).version(), 0u);
  // So is a forwarded row push; and a call posing as a forward to the
  // primary itself is refused, not applied unforwarded.
  ASSERT_TRUE(CreateSparseTable(*a).ok());
  for (const Server* to : {b.get(), a.get()}) {
    grpc::ClientContext rows_context;
    rows_context.AddMetadata("x-shardps-epoch", absl::StrCat(epoch - 1));
    rows_context.AddMetadata("x-shardps-position", "1");
    shardps::PushRowsResponse rows_reply;
    const grpc::Status refused = Stub(*to)->PushRows(
        &rows_context, PushRowsOf(9, 1, RowIds(), 1.0f), &rows_reply);
    EXPECT_EQ(refused.error_code(), grpc::StatusCode::FAILED_PRECONDITION)
        << refused.error_message();
    EXPECT_EQ(SparseStats(*to).version(), 0u);
    EXPECT_EQ(SparseStats(*to).rows(), 0u);
  }
  // The straggler policy drop is not replicated yet, and says so.
  shardps::CreateTableRequest sync = SyncSpec("s", 1);
  sync.mutable_consistency()->set_straggler_policy(shardps::STRAGGLER_DROP);
  grpc::ClientContext create_context;
  shardps::CreateTableResponse created;
  const grpc::Status s = Stub(*a)->CreateTable(&create_context, sync, &created);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION)
      << s.error_message();
  EXPECT_NE(s.error_message().find("drop"), std::string::npos);
}

TEST_F(ReplicationTest, OnlyCallsWithTheReplicasTokenPoseAsThePrimary) {
  // A job member holds the job's token, not the replicas' own: it must not
  // get a push applied on a backup alone, nor copy the state as a replica.
  replication_token_ = "replicas-only-secret";
  std::unique_ptr<Server> a, b;
  ASSERT_NO_FATAL_FAILURE(StartPrimaryAndBackup(&a, &b));  // a catch-up
  shardps::PushResponse reply;
  ASSERT_TRUE(Push(*a, PushOf(4, 1, 1.0f), &reply).ok());
  EXPECT_EQ(Stats(*b).tables(0).version(), 1u);  // forwarded with it
  const std::string epoch = absl::StrCat(Stats(*a).epoch());
  for (const char* token : {"", "wrong"}) {
    grpc::ClientContext context;
    context.AddMetadata("x-shardps-epoch", epoch);
    context.AddMetadata("x-shardps-position", "2");
    if (*token != '\0') {
      context.AddMetadata("x-shardps-replication-token", token);
    }
    const grpc::Status posed =
        Stub(*b)->Push(&context, PushOf(4, 2, 50.0f), &reply);
    EXPECT_EQ(posed.error_code(), grpc::StatusCode::UNAUTHENTICATED)
        << token << ": " << posed.error_message();
    EXPECT_NE(posed.error_message().find("--replication_token_file"),
              std::string::npos);
  }
  EXPECT_EQ(Stats(*b).tables(0).version(), 1u);
  grpc::ClientContext context;
  shardps::CatchUpRequest request;
  request.set_job(kJob);
  request.set_shard(0);
  request.set_address("127.0.0.1:1");
  auto stub = shardps::Replication::NewStub(
      grpc::CreateChannel(a->address(), grpc::InsecureChannelCredentials()));
  shardps::CatchUpChunk chunk;
  std::unique_ptr<grpc::ClientReader<shardps::CatchUpChunk>> reader =
      stub->CatchUp(&context, request);
  EXPECT_FALSE(reader->Read(&chunk));
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);
  // With the token, only a replica registered in etcd may copy (and so
  // become a forwarding target).
  grpc::ClientContext registered_context;
  registered_context.AddMetadata("x-shardps-replication-token",
                                 "replicas-only-secret");
  reader = stub->CatchUp(&registered_context, request);
  EXPECT_FALSE(reader->Read(&chunk));
  const grpc::Status stranger = reader->Finish();
  EXPECT_EQ(stranger.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(stranger.error_message().find("is not a replica of shard 0"),
            std::string::npos)
      << stranger.error_message();
  // The chain itself still fails over with every push.
  ExpectFailoverKeeps(&a, *b, 99.0f);
}

TEST_F(ReplicationTest, ASyncClockHalfGatheredSurvivesAFailover) {
  std::unique_ptr<Server> a, b;
  ASSERT_NO_FATAL_FAILURE(StartPrimaryAndBackup(&a, &b));
  {
    grpc::ClientContext context;
    shardps::CreateTableResponse created;
    ASSERT_TRUE(
        Stub(*a)->CreateTable(&context, SyncSpec("s", 2), &created).ok());
  }
  // Worker 0's part of clock 0 is gathered (not applied: worker 1 has not
  // pushed); the backup gathered it too.
  shardps::PushResponse reply;
  ASSERT_TRUE(Push(*a, SyncPush(0, 0, 2.0f), &reply).ok());
  // Worker 0's pull of clock 1 waits on the primary...
  grpc::Status waited;
  absl::Time ended;
  std::thread pull([&] {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
    shardps::PullResponse response;
    waited = Stub(*a)->Pull(&context, SyncPull(0, 1), &response);
    ended = absl::Now();
  });
  auto waiting = [&] {
    const shardps::StatsResponse stats = Stats(*a);
    for (const shardps::TableStats& t : stats.tables()) {
      if (t.table() == "s") return t.waiting_pulls();
    }
    return uint64_t{0};
  };
  while (waiting() == 0) {
    absl::SleepFor(absl::Milliseconds(10));  // polling interval
  }
  // ... until the primary loses its place: the pull ends at once,
  // retryable, rather than at its deadline.
  const absl::Time revoked = absl::Now();
  ASSERT_NO_FATAL_FAILURE(LoseLease(0));
  pull.join();
  EXPECT_EQ(waited.error_code(), grpc::StatusCode::UNAVAILABLE)
      << waited.error_message();
  EXPECT_LT(ended - revoked, absl::Seconds(10));
  AwaitRole(*b, "primary");
  // Worker 1 completes clock 0 on the new primary: the mean of 2 and 4.
  ASSERT_TRUE(Push(*b, SyncPush(1, 0, 4.0f), &reply).ok());
  grpc::ClientContext context;
  shardps::PullResponse response;
  ASSERT_TRUE(Stub(*b)->Pull(&context, SyncPull(0, 1), &response).ok());
  std::vector<float> values(kKeys);
  std::memcpy(values.data(), response.values().data(), kKeys * sizeof(float));
  EXPECT_EQ(values, std::vector<float>(kKeys, 97.0f));
  // The old primary copies the barrier back and is a backup again.
  AwaitRole(*a, "backup");
}

TEST_F(ReplicationTest, SparseRowsSurviveEachReplicaInTurnExactlyOnce) {
  std::unique_ptr<Server> a, b;
  ASSERT_NO_FATAL_FAILURE(StartPrimaryAndBackup(&a, &b));
  ASSERT_TRUE(CreateSparseTable(*a).ok());
  shardps::PushRowsResponse reply;
  for (uint64_t seq = 1; seq <= 5; ++seq) {
    const grpc::Status s =
        PushRows(*a, PushRowsOf(7, seq, RowIds(), 1.0f), &reply);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(reply.version(), seq);
  }
  // The backup answers no client's rows, names why, and holds every push.
  std::vector<float> values;
  const grpc::Status refused = PullRows(*b, &values);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(refused.error_message().find("not its primary"), std::string::npos)
      << refused.error_message();
  EXPECT_EQ(PushRows(*b, PushRowsOf(7, 6, RowIds(), 1.0f), &reply).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(SparseStats(*b).version(), 5u);
  EXPECT_EQ(SparseStats(*b).rows(), RowIds().size());

  // The primary goes; the backup takes over with every row, and a retry of
  // the last push is a duplicate there.
  a.reset();
  AwaitRole(*b, "primary");
  ASSERT_TRUE(PullRows(*b, &values).ok());
  EXPECT_EQ(values, std::vector<float>(RowIds().size() * kDim, 95.0f));
  ASSERT_TRUE(PushRows(*b, PushRowsOf(7, 5, RowIds(), 1.0f), &reply).ok());
  EXPECT_TRUE(reply.duplicate());
  for (uint64_t seq = 6; seq <= 8; ++seq) {
    ASSERT_TRUE(PushRows(*b, PushRowsOf(7, seq, RowIds(), 1.0f), &reply).ok());
  }

  // Replica 0 comes back empty and copies the rows from the new primary;
  // then the other replica goes in turn.
  a = StartReplica(0);
  ASSERT_NE(a, nullptr);
  AwaitRole(*a, "backup");
  ASSERT_TRUE(PushRows(*b, PushRowsOf(7, 9, RowIds(), 1.0f), &reply).ok());
  ASSERT_TRUE(PushRows(*b, PushRowsOf(8, 1, {RowIds()[2]}, 2.0f), &reply).ok());
  b.reset();
  AwaitRole(*a, "primary");
  ASSERT_TRUE(PullRows(*a, &values).ok());
  std::vector<float> expected(RowIds().size() * kDim, 100.0f - 9);
  for (uint32_t k = 0; k < kDim; ++k) expected[2 * kDim + k] -= 2;
  EXPECT_EQ(values, expected);
  EXPECT_EQ(SparseStats(*a).version(), 10u);
  ASSERT_TRUE(PushRows(*a, PushRowsOf(8, 1, {RowIds()[2]}, 2.0f), &reply).ok());
  EXPECT_TRUE(reply.duplicate());
}

TEST_F(ReplicationTest, ASparseReplicaThatLostItsLeaseReplacesItsRows) {
  // A replica that lost its place copies the shard over the rows it holds
  // (SparseTable::Overwrite). A pull that creates a row creates it on the
  // primary alone (its value is the initializer's, the same anywhere), so
  // the copy is seen to arrive: the backup holds that row after it.
  testutil::RecordingLog logs[2];
  std::unique_ptr<Server> servers[2];
  ASSERT_NO_FATAL_FAILURE(StartLoggedPrimaryAndBackup(logs, servers));
  ASSERT_TRUE(CreateSparseTable(*servers[0]).ok());
  uint64_t sequence = 0;
  auto push_to = [&](int server, const std::vector<uint64_t>& ids) {
    shardps::PushRowsResponse reply;
    const grpc::Status s = PushRows(
        *servers[server], PushRowsOf(9, ++sequence, ids, 1.0f), &reply);
    ASSERT_TRUE(s.ok()) << s.error_message();
  };
  ASSERT_NO_FATAL_FAILURE(push_to(0, {RowIds()[0]}));
  std::vector<float> values;
  ASSERT_TRUE(
      PullRows(*servers[0], &values, {RowIds()[2]}, /*create=*/true).ok());
  EXPECT_EQ(values, std::vector<float>(kDim, 100.0f));
  EXPECT_EQ(SparseStats(*servers[0]).rows(), 2u);
  EXPECT_EQ(SparseStats(*servers[1]).rows(), 1u);
  ASSERT_NO_FATAL_FAILURE(LoseLease(1));
  ASSERT_NO_FATAL_FAILURE(AwaitCaughtUp(logs[1], 2));
  AwaitRole(*servers[1], "backup");
  EXPECT_EQ(SparseStats(*servers[1]).rows(), 2u);
  EXPECT_EQ(SparseStats(*servers[1]).version(), 1u);
  ASSERT_NO_FATAL_FAILURE(push_to(0, RowIds()));
  ASSERT_NO_FATAL_FAILURE(LoseLease(0));
  AwaitRole(*servers[1], "primary");
  ASSERT_NO_FATAL_FAILURE(AwaitCaughtUp(logs[0], 1));
  AwaitRole(*servers[0], "backup");
  ASSERT_NO_FATAL_FAILURE(push_to(1, {RowIds()[1]}));
  // Each holds every push: the other can die now.
  servers[1].reset();
  AwaitRole(*servers[0], "primary");
  ASSERT_TRUE(PullRows(*servers[0], &values).ok());
  std::vector<float> expected(RowIds().size() * kDim, 99.0f);
  for (uint32_t k = 0; k < kDim; ++k) {
    expected[k] -= 1;         // row 0: pushes 1 and 2
    expected[kDim + k] -= 1;  // row 1: pushes 2 and 3
  }
  EXPECT_EQ(values, expected);
  EXPECT_EQ(SparseStats(*servers[0]).version(), 3u);
  EXPECT_EQ(SparseStats(*servers[0]).rows(), RowIds().size());
}

}  // namespace
}  // namespace ps
