#include "ps/coord/membership.h"

#include <algorithm>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace ps {
namespace {

// Marks a registered replica that does not hold the shard's state yet.
constexpr absl::string_view kCatchingUp = " catching-up";

bool IsUnreachable(const absl::Status& s) {
  return absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s);
}

absl::Status BadKey(absl::string_view key, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("etcd key '", key.substr(0, 200), "': ", why));
}

// "R host:port" -> (R, host:port).
bool ParsePrimary(absl::string_view value, ReplicaAddress* out) {
  std::pair<absl::string_view, absl::string_view> parts =
      absl::StrSplit(value, absl::MaxSplits(' ', 1));
  if (!absl::SimpleAtoi(parts.first, &out->replica) || parts.second.empty()) {
    return false;
  }
  out->address = std::string(parts.second);
  return true;
}

// One key under JobPrefix/shards/ into the layout.
absl::Status AddKey(const shardps::etcd::KeyValue& kv, absl::string_view rest,
                    JobLayout* layout) {
  const std::vector<absl::string_view> parts = absl::StrSplit(rest, '/');
  uint32_t shard = 0;
  if (parts.size() < 2 || !absl::SimpleAtoi(parts[0], &shard)) {
    return BadKey(kv.key(), "not shards/S/...");
  }
  if (shard >= layout->shards.size()) return absl::OkStatus();  // not ours
  ShardLayout& s = layout->shards[shard];
  if (parts.size() == 2 && parts[1] == "primary") {
    ReplicaAddress primary;
    if (!ParsePrimary(kv.value(), &primary)) {
      return BadKey(kv.key(), "value is not 'R host:port'");
    }
    s.primary_replica = primary.replica;
    s.primary_address = primary.address;
    s.epoch = kv.create_revision();
    return absl::OkStatus();
  }
  ReplicaAddress replica;
  if (parts.size() != 3 || parts[1] != "replicas" ||
      !absl::SimpleAtoi(parts[2], &replica.replica) || kv.value().empty()) {
    return BadKey(kv.key(), "not shards/S/primary or shards/S/replicas/R");
  }
  absl::string_view value = kv.value();
  replica.ready = !absl::ConsumeSuffix(&value, kCatchingUp);
  replica.address = std::string(value);
  s.replicas.push_back(std::move(replica));
  return absl::OkStatus();
}

}  // namespace

std::string JobPrefix(absl::string_view job) {
  return absl::StrCat("/shardps/", job, "/");
}

std::string ReplicaKey(absl::string_view job, uint32_t shard,
                       uint32_t replica) {
  return absl::StrCat(JobPrefix(job), "shards/", shard, "/replicas/", replica);
}

std::string PrimaryKey(absl::string_view job, uint32_t shard) {
  return absl::StrCat(JobPrefix(job), "shards/", shard, "/primary");
}

absl::StatusOr<JobLayout> ReadLayout(const EtcdClient& etcd,
                                     absl::string_view job,
                                     uint32_t num_shards) {
  const std::string prefix = absl::StrCat(JobPrefix(job), "shards/");
  absl::StatusOr<shardps::etcd::RangeResponse> range = etcd.GetPrefix(prefix);
  if (!range.ok()) return range.status();
  JobLayout layout;
  layout.revision = range->header().revision();
  layout.shards.resize(num_shards);
  for (const shardps::etcd::KeyValue& kv : range->kvs()) {
    absl::string_view rest = kv.key();
    absl::ConsumePrefix(&rest, prefix);
    if (absl::Status s = AddKey(kv, rest, &layout); !s.ok()) return s;
  }
  for (ShardLayout& s : layout.shards) {
    std::sort(s.replicas.begin(), s.replicas.end(),
              [](const ReplicaAddress& a, const ReplicaAddress& b) {
                return a.replica < b.replica;
              });
  }
  return layout;
}

absl::StatusOr<JobLayout> AwaitPrimaries(const EtcdClient& etcd,
                                         absl::string_view job,
                                         uint32_t num_shards,
                                         absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    absl::StatusOr<JobLayout> layout = ReadLayout(etcd, job, num_shards);
    if (!layout.ok()) return layout.status();
    auto missing =
        std::find_if(layout->shards.begin(), layout->shards.end(),
                     [](const ShardLayout& s) { return s.epoch == 0; });
    if (missing == layout->shards.end()) return layout;
    if (absl::Now() > deadline) {
      return absl::UnavailableError(
          absl::StrCat("shard ", missing - layout->shards.begin(), " of job '",
                       job, "' has no primary in etcd at ", etcd.endpoint(),
                       " after ", absl::FormatDuration(timeout)));
    }
    absl::SleepFor(absl::Milliseconds(20));  // polling interval
  }
}

absl::StatusOr<bool> DeposePrimary(const EtcdClient& etcd,
                                   absl::string_view job, uint32_t shard,
                                   int64_t epoch) {
  absl::StatusOr<shardps::etcd::RangeResponse> primary =
      etcd.Get(PrimaryKey(job, shard));
  if (!primary.ok()) return primary.status();
  if (primary->kvs().empty() || primary->kvs(0).create_revision() != epoch) {
    return false;  // another term already
  }
  const absl::Status revoked = etcd.RevokeLease(primary->kvs(0).lease());
  if (absl::IsNotFound(revoked)) return false;  // ended meanwhile
  if (!revoked.ok()) return revoked;
  return true;
}

ServerMembership::ServerMembership(MembershipOptions options)
    : options_(std::move(options)),
      replica_key_(ReplicaKey(options_.job, options_.shard, options_.replica)),
      primary_key_(PrimaryKey(options_.job, options_.shard)),
      primary_value_(absl::StrCat(options_.replica, " ", options_.address)) {}

absl::StatusOr<std::unique_ptr<ServerMembership>> ServerMembership::Join(
    MembershipOptions options) {
  if (options.etcd == nullptr || options.address.empty() ||
      options.ttl < absl::Seconds(1)) {
    return absl::InvalidArgumentError(
        "membership needs etcd, an address and a ttl of at least 1 s");
  }
  std::unique_ptr<ServerMembership> m(new ServerMembership(std::move(options)));
  const EtcdClient& etcd = *m->options_.etcd;
  absl::StatusOr<int64_t> lease = etcd.GrantLease(m->options_.ttl);
  if (!lease.ok()) return lease.status();
  absl::StatusOr<int64_t> put =
      etcd.Put(m->replica_key_, m->ReplicaValue(false), *lease);
  if (!put.ok()) return put.status();
  {
    absl::MutexLock lock(&m->mu_);
    m->lease_ = *lease;
  }
  Logf(m->options_.log,
       "joined job %s in etcd at %s as shard %d replica %d (lease %d)",
       m->options_.job, etcd.endpoint(), m->options_.shard, m->options_.replica,
       *lease);
  m->thread_ = std::thread([m = m.get()] { m->Run(); });
  m->watcher_ = std::thread([m = m.get()] { m->WatchPrimary(); });
  return m;
}

ServerMembership::~ServerMembership() { Leave(); }

std::string ServerMembership::ReplicaValue(bool ready) const {
  return ready ? options_.address : absl::StrCat(options_.address, kCatchingUp);
}

absl::Status ServerMembership::SetReady(bool ready) {
  int64_t lease;
  {
    absl::MutexLock lock(&mu_);
    lease = lease_;
  }
  absl::StatusOr<int64_t> put =
      options_.etcd->Put(replica_key_, ReplicaValue(ready), lease);
  if (!put.ok()) return put.status();
  absl::MutexLock lock(&mu_);
  ready_ = ready;
  wake_.SignalAll();  // campaign now rather than at the next renewal
  return absl::OkStatus();
}

absl::StatusOr<bool> ServerMembership::ClaimFreshShard() {
  int64_t lease;
  {
    absl::MutexLock lock(&mu_);
    lease = lease_;
  }
  absl::StatusOr<bool> won =
      options_.etcd->CreateIfAbsent(primary_key_, primary_value_, lease);
  if (!won.ok() || !*won) return won;
  if (absl::Status s = SetReady(true); !s.ok()) return s;
  // Primary now, not at the next renewal.
  if (absl::Status s = Campaign(); !s.ok()) return s;
  return true;
}

bool ServerMembership::ready() const {
  absl::MutexLock lock(&mu_);
  return ready_;
}

bool ServerMembership::is_primary() const {
  absl::MutexLock lock(&mu_);
  return primary_;
}

int64_t ServerMembership::newest_epoch() const {
  absl::MutexLock lock(&mu_);
  return newest_epoch_;
}

int64_t ServerMembership::epoch() const {
  absl::MutexLock lock(&mu_);
  return primary_ ? epoch_ : 0;
}

bool ServerMembership::displaced() const {
  absl::MutexLock lock(&mu_);
  return displaced_;
}

bool ServerMembership::etcd_unreachable() const {
  absl::MutexLock lock(&mu_);
  return unreachable_;
}

void ServerMembership::Leave() {
  int64_t lease;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
    wake_.SignalAll();
    lease = lease_;
  }
  stop_watch_.store(true);
  if (thread_.joinable()) thread_.join();
  if (watcher_.joinable()) watcher_.join();
  // Best effort: if etcd is away the lease ends by itself.
  (void)options_.etcd->RevokeLease(lease);
  absl::MutexLock lock(&mu_);
  primary_ = false;
}

void ServerMembership::Run() {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    if (displaced_) {
      wake_.Wait(&mu_);  // until Leave
      continue;
    }
    mu_.Unlock();
    absl::Status status = Renew();
    if (status.ok()) status = Campaign();
    NoteReachable(status);
    mu_.Lock();
    if (!stopping_) wake_.WaitWithTimeout(&mu_, options_.ttl / 3);
  }
}

void ServerMembership::WatchPrimary() {
  while (!stop_watch_.load()) {
    // Errors end the watch; Run's polling reports etcd's state.
    (void)options_.etcd->Watch(
        primary_key_, 0,
        [this](const shardps::etcd::WatchResponse& r) {
          if (r.events_size() > 0) {
            absl::MutexLock lock(&mu_);
            wake_.SignalAll();
          }
          return !stop_watch_.load();
        },
        stop_watch_);
    absl::MutexLock lock(&mu_);
    if (!stopping_) wake_.WaitWithTimeout(&mu_, options_.ttl / 3);
  }
}

void ServerMembership::NoteReachable(const absl::Status& status) {
  const bool unreachable = IsUnreachable(status);
  bool changed;
  {
    absl::MutexLock lock(&mu_);
    changed = unreachable != unreachable_;
    unreachable_ = unreachable;
  }
  if (changed && unreachable) {
    Logf(options_.log,
         "etcd unreachable (%s): keeping the current layout; no failover "
         "can happen until it is back",
         status.message());
  } else if (changed) {
    Log(options_.log, "etcd reachable again");
  } else if (!status.ok() && !unreachable) {
    Logf(options_.log, "membership: %s", status.ToString());
  }
}

absl::Status ServerMembership::Renew() {
  const EtcdClient& etcd = *options_.etcd;
  int64_t lease;
  {
    absl::MutexLock lock(&mu_);
    lease = lease_;
  }
  absl::StatusOr<absl::Duration> kept = etcd.KeepAlive(lease);
  if (kept.ok()) return CheckRegistered(lease);
  if (!absl::IsNotFound(kept.status())) return kept.status();
  // The lease ended while etcd did not hear from us (a pause longer than
  // the ttl): our keys are gone, another replica may be primary and may
  // have taken pushes this one has not. It comes back as a backup that is
  // not ready until the server has caught it up.
  bool was_primary;
  {
    absl::MutexLock lock(&mu_);
    was_primary = primary_;
    primary_ = false;
    epoch_ = 0;
    ready_ = false;
  }
  Logf(options_.log,
       "etcd lease %d ended%s; registering again, not ready until caught up",
       lease, was_primary ? " (no longer primary)" : "");
  absl::StatusOr<int64_t> fresh = etcd.GrantLease(options_.ttl);
  if (!fresh.ok()) return fresh.status();
  {
    absl::MutexLock lock(&mu_);
    lease_ = *fresh;
  }
  return Reregister(*fresh);
}

absl::Status ServerMembership::Reregister(int64_t lease) {
  // Only if nobody holds the key: another process may have taken this
  // replica number meanwhile (a restart), and it wins.
  absl::StatusOr<bool> created =
      options_.etcd->CreateIfAbsent(replica_key_, ReplicaValue(false), lease);
  if (!created.ok()) return created.status();
  if (!*created) {
    {
      absl::MutexLock lock(&mu_);
      displaced_ = true;
      primary_ = false;
      ready_ = false;
    }
    Logf(options_.log,
         "another process registered as shard %d replica %d; this one "
         "steps aside (no primary, no backup)",
         options_.shard, options_.replica);
  }
  return absl::OkStatus();
}

absl::Status ServerMembership::CheckRegistered(int64_t lease) {
  absl::StatusOr<shardps::etcd::RangeResponse> key =
      options_.etcd->Get(replica_key_);
  if (!key.ok()) return key.status();
  if (!key->kvs().empty() && key->kvs(0).lease() == lease) {
    return absl::OkStatus();
  }
  // Deleted (the primary of a term that was ended in etcd) or taken by
  // another process of this replica number: whatever was forwarded
  // meanwhile may have passed this one by.
  {
    absl::MutexLock lock(&mu_);
    primary_ = false;
    epoch_ = 0;
    ready_ = false;
  }
  if (!key->kvs().empty()) return Reregister(lease);  // steps aside
  Log(options_.log,
      "this replica's key is gone from etcd; registering again, not ready "
      "until caught up");
  return Reregister(lease);
}

absl::Status ServerMembership::Campaign() {
  const EtcdClient& etcd = *options_.etcd;
  int64_t lease;
  bool ready;
  {
    absl::MutexLock lock(&mu_);
    lease = lease_;
    ready = ready_;
  }
  absl::StatusOr<shardps::etcd::RangeResponse> current = etcd.Get(primary_key_);
  if (!current.ok()) return current.status();
  if (current->kvs().empty() && ready) {
    absl::StatusOr<bool> won =
        etcd.CreateIfAbsent(primary_key_, primary_value_, lease);
    if (!won.ok()) return won.status();
    current = etcd.Get(primary_key_);
    if (!current.ok()) return current.status();
  }
  const bool mine = !current->kvs().empty() &&
                    current->kvs(0).lease() == lease &&
                    current->kvs(0).value() == primary_value_;
  const int64_t epoch = mine ? current->kvs(0).create_revision() : 0;
  bool was;
  {
    absl::MutexLock lock(&mu_);
    was = primary_;
    primary_ = mine;
    epoch_ = epoch;
    if (!current->kvs().empty()) {
      newest_epoch_ =
          std::max(newest_epoch_, current->kvs(0).create_revision());
    }
  }
  if (mine && !was) {
    Logf(options_.log, "primary of shard %d (epoch %d)", options_.shard, epoch);
  } else if (!mine && was) {
    Logf(options_.log, "no longer primary of shard %d", options_.shard);
  }
  return absl::OkStatus();
}

}  // namespace ps
