// ServerMembership and ReadLayout against a real etcd: one primary per
// shard, chosen only among replicas ready to serve; failover when the
// primary leaves or its lease ends; and a layout that stands while etcd is
// away.
#include "ps/coord/membership.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "util/etcd.h"
#include "util/files.h"
#include "util/log.h"
#include "util/processes.h"

namespace ps {
namespace {

constexpr char kJob[] = "mjob";

class MembershipTest : public testutil::EtcdTest {
 protected:
  std::unique_ptr<ServerMembership> Join(uint32_t shard, uint32_t replica,
                                         testutil::RecordingLog* log) {
    MembershipOptions o;
    o.etcd = client_.get();
    o.job = kJob;
    o.shard = shard;
    o.replica = replica;
    o.address = absl::StrCat("10.0.", shard, ".", replica, ":7070");
    o.log = log;
    absl::StatusOr<std::unique_ptr<ServerMembership>> m =
        ServerMembership::Join(o);
    EXPECT_TRUE(m.ok()) << m.status();
    return m.ok() ? *std::move(m) : nullptr;
  }

  JobLayout Layout(uint32_t shards = 2) {
    absl::StatusOr<JobLayout> layout = ReadLayout(*client_, kJob, shards);
    EXPECT_TRUE(layout.ok()) << layout.status();
    return layout.ok() ? *std::move(layout) : JobLayout{};
  }

  // Waits (polling etcd's view, at most 10 s) until shard `shard` has a
  // primary other than `not_epoch`'s; its layout.
  ShardLayout AwaitPrimary(uint32_t shard, int64_t not_epoch = 0) {
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (true) {
      ShardLayout s = Layout().shards[shard];
      if (s.epoch != 0 && s.epoch != not_epoch) return s;
      if (absl::Now() > deadline) {
        ADD_FAILURE() << "shard " << shard << " got no new primary";
        return s;
      }
      absl::SleepFor(absl::Milliseconds(20));  // polling interval
    }
  }
};

TEST_F(MembershipTest, OneReadyReplicaPerShardBecomesPrimary) {
  testutil::RecordingLog log0, log1, log2;
  std::unique_ptr<ServerMembership> a = Join(0, 0, &log0);
  std::unique_ptr<ServerMembership> b = Join(0, 1, &log1);
  std::unique_ptr<ServerMembership> c = Join(1, 0, &log2);
  ASSERT_TRUE(a && b && c);
  JobLayout layout = Layout();
  ASSERT_EQ(layout.shards.size(), 2u);
  ASSERT_EQ(layout.shards[0].replicas.size(), 2u);
  EXPECT_EQ(layout.shards[0].replicas[1].address, "10.0.0.1:7070");
  EXPECT_EQ(layout.shards[0].epoch, 0) << "nobody is ready yet";
  EXPECT_FALSE(layout.shards[0].replicas[0].ready);
  // Replica 1 only: it must win though replica 0 joined first.
  ASSERT_TRUE(b->SetReady(true).ok());
  ShardLayout s0 = AwaitPrimary(0);
  EXPECT_EQ(s0.primary_replica, 1u);
  EXPECT_EQ(s0.primary_address, "10.0.0.1:7070");
  EXPECT_TRUE(s0.replicas[1].ready);
  EXPECT_EQ(s0.replicas[1].address, "10.0.0.1:7070");
  EXPECT_FALSE(s0.replicas[0].ready);
  ASSERT_TRUE(a->SetReady(true).ok());
  ASSERT_TRUE(c->SetReady(true).ok());
  const ShardLayout s1 = AwaitPrimary(1);
  EXPECT_EQ(s1.primary_address, "10.0.1.0:7070");
  ASSERT_TRUE(log1.AwaitLine("primary of shard 0", absl::Seconds(10)));
  EXPECT_TRUE(b->is_primary());
  EXPECT_FALSE(a->is_primary());
  EXPECT_EQ(b->epoch(), s0.epoch);
  EXPECT_EQ(a->epoch(), 0);
  // Still exactly one after some renewals.
  ASSERT_TRUE(log0.AwaitLine("joined job", absl::Seconds(1)));
  absl::SleepFor(absl::Seconds(1));
  EXPECT_EQ(Layout().shards[0].primary_replica, 1u);
  EXPECT_FALSE(a->is_primary());
}

TEST_F(MembershipTest, ABackupTakesOverWhenThePrimaryLeaves) {
  testutil::RecordingLog log0, log1;
  std::unique_ptr<ServerMembership> a = Join(0, 0, &log0);
  ASSERT_TRUE(a->SetReady(true).ok());
  const ShardLayout first = AwaitPrimary(0);
  ASSERT_EQ(first.primary_replica, 0u);
  std::unique_ptr<ServerMembership> b = Join(0, 1, &log1);
  ASSERT_TRUE(b->SetReady(true).ok());
  const absl::Time left = absl::Now();
  a->Leave();
  const ShardLayout second = AwaitPrimary(0, first.epoch);
  const absl::Duration takeover = absl::Now() - left;
  EXPECT_EQ(second.primary_replica, 1u);
  EXPECT_GT(second.epoch, first.epoch);
  ASSERT_EQ(second.replicas.size(), 1u);
  EXPECT_EQ(second.replicas[0].replica, 1u);
  // Leaving revokes the lease: the backup's next campaign (every ttl/3)
  // takes over, well within the lease's own second.
  EXPECT_LT(takeover, absl::Seconds(2)) << takeover;
  ASSERT_TRUE(log1.AwaitLine("primary of shard 0", absl::Seconds(10)));
}

TEST_F(MembershipTest, APrimaryWhoseLeaseEndedStepsDownAndRejoins) {
  testutil::RecordingLog log0, log1;
  std::unique_ptr<ServerMembership> a = Join(0, 0, &log0);
  ASSERT_TRUE(a->SetReady(true).ok());
  const ShardLayout first = AwaitPrimary(0);
  std::unique_ptr<ServerMembership> b = Join(0, 1, &log1);
  ASSERT_TRUE(b->SetReady(true).ok());
  // What a primary paused longer than its TTL (or cut off from etcd while
  // etcd runs) finds: its lease gone. etcd ends it here.
  absl::StatusOr<shardps::etcd::RangeResponse> key =
      client_->Get(ReplicaKey(kJob, 0, 0));
  ASSERT_TRUE(key.ok());
  ASSERT_EQ(key->kvs_size(), 1);
  ASSERT_TRUE(client_->RevokeLease(key->kvs(0).lease()).ok());
  const ShardLayout second = AwaitPrimary(0, first.epoch);
  EXPECT_EQ(second.primary_replica, 1u);
  ASSERT_TRUE(log0.AwaitLine("no longer primary", absl::Seconds(10)));
  ASSERT_TRUE(log0.AwaitLine("registering again", absl::Seconds(10)));
  EXPECT_FALSE(a->is_primary());
  EXPECT_FALSE(a->ready()) << "it may have missed pushes: not ready";
  // Registered again, as a backup.
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (Layout().shards[0].replicas.size() < 2 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));  // polling interval
  }
  EXPECT_EQ(Layout().shards[0].replicas.size(), 2u);
  EXPECT_EQ(Layout().shards[0].primary_replica, 1u);
}

TEST_F(MembershipTest, DeposingADeadPrimaryKeepsItsRestartedReplicasKey) {
  testutil::RecordingLog log0;
  std::unique_ptr<ServerMembership> a = Join(0, 0, &log0);
  ASSERT_TRUE(a->SetReady(true).ok());
  const ShardLayout first = AwaitPrimary(0);
  // Replica 0 "restarts" elsewhere: a new lease takes over its key, while
  // the old process's primary key still stands.
  absl::StatusOr<int64_t> fresh = client_->GrantLease(absl::Seconds(5));
  ASSERT_TRUE(fresh.ok());
  ASSERT_TRUE(
      client_->Put(ReplicaKey(kJob, 0, 0), "10.0.0.9:7070 catching-up", *fresh)
          .ok());
  // A stale epoch deposes nothing; the right one ends the old term only.
  absl::StatusOr<bool> deposed =
      DeposePrimary(*client_, kJob, 0, first.epoch + 1000);
  ASSERT_TRUE(deposed.ok());
  EXPECT_FALSE(*deposed);
  deposed = DeposePrimary(*client_, kJob, 0, first.epoch);
  ASSERT_TRUE(deposed.ok()) << deposed.status();
  const ShardLayout after = Layout().shards[0];
  EXPECT_EQ(after.epoch, 0);
  ASSERT_EQ(after.replicas.size(), 1u);
  EXPECT_EQ(after.replicas[0].address, "10.0.0.9:7070");
  EXPECT_FALSE(after.replicas[0].ready);
  // The deposed process finds its lease gone and the key another's: it
  // steps aside instead of taking the key back.
  ASSERT_TRUE(log0.AwaitLine("steps aside", absl::Seconds(10)));
  EXPECT_FALSE(a->is_primary());
  EXPECT_FALSE(a->ready());
  EXPECT_EQ(Layout().shards[0].replicas[0].address, "10.0.0.9:7070");
}

TEST_F(MembershipTest, TheLayoutStandsWhileEtcdIsAway) {
  testutil::RecordingLog log0, log1;
  std::unique_ptr<ServerMembership> a = Join(0, 0, &log0);
  ASSERT_TRUE(a->SetReady(true).ok());
  const ShardLayout first = AwaitPrimary(0);
  std::unique_ptr<ServerMembership> b = Join(0, 1, &log1);
  ASSERT_TRUE(b->SetReady(true).ok());
  const EtcdProcessOptions ports = etcd_->options();
  etcd_->Kill();
  auto held = std::make_unique<testutil::HeldPorts>(
      std::initializer_list<int>{ports.client_port, ports.peer_port});
  ASSERT_TRUE(log0.AwaitLine("etcd unreachable", absl::Seconds(10)));
  ASSERT_TRUE(log1.AwaitLine("etcd unreachable", absl::Seconds(10)));
  EXPECT_NE(log0.lines().back().find("no failover"), std::string::npos);
  // Three lease TTLs without etcd: the roles stay as they were.
  absl::SleepFor(absl::Seconds(3));
  EXPECT_TRUE(a->is_primary());
  EXPECT_FALSE(b->is_primary());
  EXPECT_TRUE(a->etcd_unreachable());
  // etcd back on its data: it renews the leases, and nothing changed.
  etcd_.reset();
  held.reset();
  etcd_ = testutil::StartEtcd(dir_.path(), ports.client_port, ports.peer_port);
  ASSERT_NE(etcd_, nullptr);
  ASSERT_TRUE(log0.AwaitLine("etcd reachable again", absl::Seconds(10)));
  EXPECT_TRUE(a->is_primary());
  EXPECT_EQ(a->epoch(), first.epoch);
  EXPECT_EQ(Layout().shards[0].epoch, first.epoch);
  EXPECT_FALSE(a->etcd_unreachable());
}

}  // namespace
}  // namespace ps
