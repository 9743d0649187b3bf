// EtcdClient against a real etcd (Debian's etcd-server) on loopback: keys,
// the create-if-absent transaction under contention, leases that end and
// take their keys with them, watches, and the errors a caller must be able
// to tell apart.
#include "ps/coord/etcd_client.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "util/etcd.h"
#include "util/files.h"

namespace ps {
namespace {

using EtcdClientTest = testutil::EtcdTest;

TEST_F(EtcdClientTest, PutGetPrefixAndDeleteWithBinaryValues) {
  const std::string binary("v\0\xff\x01", 4);
  absl::StatusOr<int64_t> first = client_->Put("/a/1", binary);
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<int64_t> second = client_->Put("/a/2", "two");
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(*second, *first + 1);
  ASSERT_TRUE(client_->Put("/b", "other").ok());
  absl::StatusOr<shardps::etcd::RangeResponse> one = client_->Get("/a/1");
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_EQ(one->kvs_size(), 1);
  EXPECT_EQ(one->kvs(0).value(), binary);
  EXPECT_EQ(one->kvs(0).create_revision(), *first);
  absl::StatusOr<shardps::etcd::RangeResponse> a = client_->GetPrefix("/a/");
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->kvs_size(), 2);
  EXPECT_EQ(a->kvs(0).key(), "/a/1");
  EXPECT_EQ(a->kvs(1).key(), "/a/2");
  ASSERT_TRUE(client_->Delete("/a/1").ok());
  one = client_->Get("/a/1");
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->kvs_size(), 0);
  EXPECT_EQ(EtcdClient::PrefixEnd("/a/"), "/a0");
  EXPECT_EQ(EtcdClient::PrefixEnd(std::string("a\xff", 2)), "b");
}

TEST_F(EtcdClientTest, OfManyCreatorsExactlyOneWins) {
  std::atomic<int> winners{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      absl::StatusOr<bool> won =
          client_->CreateIfAbsent("/primary", absl::StrCat(i), 0);
      ASSERT_TRUE(won.ok()) << won.status();
      if (*won) ++winners;
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(winners.load(), 1);
  absl::StatusOr<bool> again = client_->CreateIfAbsent("/primary", "x", 0);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(*again);
}

TEST_F(EtcdClientTest, AnEndedLeaseTakesItsKeys) {
  absl::StatusOr<int64_t> lease = client_->GrantLease(absl::Seconds(1));
  ASSERT_TRUE(lease.ok()) << lease.status();
  ASSERT_TRUE(client_->Put("/leased", "x", *lease).ok());
  absl::StatusOr<absl::Duration> ttl = client_->KeepAlive(*lease);
  ASSERT_TRUE(ttl.ok()) << ttl.status();
  EXPECT_GE(*ttl, absl::Seconds(1));
  ASSERT_TRUE(client_->RevokeLease(*lease).ok());
  absl::StatusOr<shardps::etcd::RangeResponse> gone = client_->Get("/leased");
  ASSERT_TRUE(gone.ok());
  EXPECT_EQ(gone->kvs_size(), 0);
  EXPECT_TRUE(absl::IsNotFound(client_->KeepAlive(*lease).status()));
  // A put on a lease that does not exist is etcd's NOT_FOUND, with its
  // message.
  const absl::Status put = client_->Put("/k", "v", 12345).status();
  EXPECT_TRUE(absl::IsNotFound(put)) << put;
  EXPECT_NE(put.message().find("lease not found"), std::string::npos) << put;

  // Not renewed, a lease ends by itself within its TTL (plus etcd's
  // granularity).
  lease = client_->GrantLease(absl::Seconds(1));
  ASSERT_TRUE(lease.ok());
  ASSERT_TRUE(client_->Put("/expiring", "x", *lease).ok());
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  bool expired = false;
  while (!expired && absl::Now() < deadline) {
    absl::StatusOr<shardps::etcd::RangeResponse> r = client_->Get("/expiring");
    ASSERT_TRUE(r.ok());
    expired = r->kvs_size() == 0;
    if (!expired) absl::SleepFor(absl::Milliseconds(50));  // polling
  }
  EXPECT_TRUE(expired);
}

TEST_F(EtcdClientTest, AWatchSeesPutsAndDeletesUntilStopped) {
  absl::Mutex mu;
  std::vector<std::string> seen;  // "PUT /w/x=1", "DELETE /w/x"
  bool created = false;
  std::atomic<bool> stop{false};
  absl::Status ended;
  std::thread watcher([&] {
    ended = client_->Watch(
        "/w/", 0,
        [&](const shardps::etcd::WatchResponse& r) {
          absl::MutexLock lock(&mu);
          created = created || r.created();
          for (const shardps::etcd::Event& e : r.events()) {
            seen.push_back(
                e.type() == shardps::etcd::Event::DELETE
                    ? absl::StrCat("DELETE ", e.kv().key())
                    : absl::StrCat("PUT ", e.kv().key(), "=", e.kv().value()));
          }
          return true;
        },
        stop);
  });
  {
    absl::MutexLock lock(&mu);
    ASSERT_TRUE(
        mu.AwaitWithTimeout(absl::Condition(&created), absl::Seconds(10)));
  }
  ASSERT_TRUE(client_->Put("/w/x", "1").ok());
  ASSERT_TRUE(client_->Put("/elsewhere", "1").ok());
  ASSERT_TRUE(client_->Delete("/w/x").ok());
  {
    absl::MutexLock lock(&mu);
    auto two = [&] { return seen.size() >= 2; };
    EXPECT_TRUE(mu.AwaitWithTimeout(absl::Condition(&two), absl::Seconds(10)));
    EXPECT_EQ(seen, (std::vector<std::string>{"PUT /w/x=1", "DELETE /w/x"}));
  }
  stop = true;
  watcher.join();
  EXPECT_TRUE(ended.ok()) << ended;
}

TEST_F(EtcdClientTest, AWatchFromARevisionReplaysWhatItMissed) {
  absl::StatusOr<int64_t> from = client_->Put("/r/a", "1");
  ASSERT_TRUE(from.ok());
  ASSERT_TRUE(client_->Put("/r/b", "2").ok());
  std::vector<std::string> keys;
  std::atomic<bool> stop{false};
  const absl::Status s = client_->Watch(
      "/r/", *from,
      [&](const shardps::etcd::WatchResponse& r) {
        for (const shardps::etcd::Event& e : r.events()) {
          keys.push_back(e.kv().key());
        }
        return keys.size() < 2;  // enough
      },
      stop);
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(keys, (std::vector<std::string>{"/r/a", "/r/b"}));
}

TEST_F(EtcdClientTest, AnUnreachableEtcdIsUnavailableNamingIt) {
  const std::string endpoint = etcd_->endpoint();
  etcd_->Kill();
  const absl::Status s = client_->Get("/x").status();
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  EXPECT_NE(s.message().find(endpoint), std::string::npos) << s;
  std::atomic<bool> stop{false};
  const absl::Status watch = client_->Watch(
      "/x", 0, [](const shardps::etcd::WatchResponse&) { return true; }, stop);
  EXPECT_TRUE(absl::IsUnavailable(watch)) << watch;
}

TEST(EtcdClientOptionsTest, BadEndpointsAreRefusedByName) {
  for (const char* endpoint : {"", "127.0.0.1:2379", "https://127.0.0.1:2379",
                               "http://", "http://h", "http://h:1/v3"}) {
    EtcdOptions o;
    o.endpoint = endpoint;
    const absl::Status s = EtcdClient::Create(o).status();
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << endpoint;
    EXPECT_NE(s.message().find("http://host:port"), std::string::npos) << s;
  }
}

}  // namespace
}  // namespace ps
