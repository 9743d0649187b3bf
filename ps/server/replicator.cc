#include "ps/server/replicator.h"

#include <grpcpp/create_channel.h>

#include <algorithm>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "ps/base/tcp_probe.h"
#include "ps/wire/grpc_status.h"
#include "ps/wire/security.h"

namespace ps {
namespace {

// How long the primary keeps retrying a replica that is still registered.
constexpr absl::Duration kForwardGiveUp = absl::Seconds(60);
constexpr absl::Duration kForwardCallTimeout = absl::Seconds(5);
// Forwards waiting on replicas at once; more wait in the queue.
constexpr int kForwardThreads = 16;

bool IsTransient(grpc::StatusCode code) {
  return code == grpc::StatusCode::UNAVAILABLE ||
         code == grpc::StatusCode::DEADLINE_EXCEEDED ||
         code == grpc::StatusCode::CANCELLED;
}

}  // namespace

Replicator::Replicator(ReplicationOptions options, std::string job,
                       std::string auth_token, TlsFiles tls,
                       TableRegistry* registry, LogSink* log,
                       std::unique_ptr<EtcdClient> etcd)
    : options_(std::move(options)),
      job_(std::move(job)),
      auth_token_(std::move(auth_token)),
      tls_(std::move(tls)),
      registry_(registry),
      log_(log),
      etcd_(std::move(etcd)) {}

absl::StatusOr<std::unique_ptr<Replicator>> Replicator::Create(
    const ReplicationOptions& options, std::string job, std::string auth_token,
    TlsFiles tls, TableRegistry* registry, LogSink* log) {
  EtcdOptions etcd_options;
  etcd_options.endpoint = options.etcd;
  etcd_options.timeout = absl::Seconds(2);
  absl::StatusOr<std::unique_ptr<EtcdClient>> etcd =
      EtcdClient::Create(etcd_options);
  if (!etcd.ok()) return etcd.status();
  std::unique_ptr<Replicator> r(
      new Replicator(options, std::move(job), std::move(auth_token),
                     std::move(tls), registry, log, *std::move(etcd)));
  for (int i = 0; i < kForwardThreads; ++i) {
    r->forwarders_.emplace_back([r = r.get()] { r->RunForwards(); });
  }
  return r;
}

Replicator::~Replicator() {
  {
    absl::MutexLock lock(&queue_mu_);
    stopping_ = true;
  }
  for (std::thread& t : forwarders_) t.join();
  if (prober_.joinable()) prober_.join();
  if (ServerMembership* m = membership(); m != nullptr) m->Leave();
}

void Replicator::ProbePrimary() {
  std::string watched;
  int refusals = 0;
  std::string last_error;  // of CatchUpAgain, logged when it changes
  while (true) {
    {
      absl::MutexLock lock(&queue_mu_);
      auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(queue_mu_) {
        return stopping_;
      };
      if (queue_mu_.AwaitWithTimeout(absl::Condition(&stopping),
                                     absl::Milliseconds(100))) {
        return;
      }
    }
    ServerMembership* m = membership();
    if (m->is_primary() || m->displaced()) continue;
    if (!m->ready()) {
      const absl::Status s = CatchUpAgain();
      if (!s.ok() && s.message() != last_error) {
        Logf(log_, "not caught up yet: %s", s.message());
      }
      last_error = s.ok() ? "" : std::string(s.message());
      continue;
    }
    absl::StatusOr<JobLayout> layout =
        ReadLayout(*etcd_, job_, options_.shard + 1);
    if (!layout.ok()) continue;  // etcd away: nobody fails over
    const ShardLayout& shard = layout->shards[options_.shard];
    if (shard.epoch == 0 || shard.primary_address == Address()) continue;
    const std::string current =
        absl::StrCat(shard.epoch, " ", shard.primary_address);
    if (current != watched) {
      watched = current;
      refusals = 0;
    }
    absl::StatusOr<ProbeResult> probe =
        ProbeTcp(shard.primary_address, absl::Milliseconds(200));
    refusals = probe.ok() && *probe == ProbeResult::kRefused ? refusals + 1 : 0;
    if (refusals < 3) continue;
    refusals = 0;
    absl::StatusOr<bool> deposed =
        DeposePrimary(*etcd_, job_, options_.shard, shard.epoch);
    if (deposed.ok() && *deposed) {
      Logf(log_,
           "the primary at %s (epoch %d) refuses connections: deposed it "
           "in etcd so that a ready replica takes over",
           shard.primary_address, shard.epoch);
    }
  }
}

void Replicator::RunForwards() {
  while (true) {
    absl::AnyInvocable<void() &&> work;
    {
      absl::MutexLock lock(&queue_mu_);
      queue_mu_.Await(absl::Condition(
          +[](Replicator* r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(r->queue_mu_) {
            return r->stopping_ || !r->queue_.empty();
          },
          this));
      if (queue_.empty()) return;  // stopping, and nothing left
      work = std::move(queue_.front());
      queue_.pop_front();
    }
    std::move(work)();
  }
}

void Replicator::Forward(std::string method, const grpc::ByteBuffer* request,
                         uint64_t position, ForwardDone done) {
  absl::MutexLock lock(&queue_mu_);
  if (stopping_) {
    std::move(done)(absl::UnavailableError("server is shutting down"));
    return;
  }
  queue_.push_back([this, method = std::move(method), request, position,
                    done = std::move(done)]() mutable {
    std::move(done)(ForwardNow(method, *request, position));
  });
}

std::string Replicator::Address() const {
  absl::MutexLock lock(&mu_);
  return address_;
}

ServerMembership* Replicator::membership() const {
  absl::MutexLock lock(&mu_);
  return membership_.get();
}

std::string Replicator::role() const {
  ServerMembership* m = membership();
  {
    absl::MutexLock lock(&mu_);
    if (catching_up_) return "catching-up";
  }
  return m->is_primary() ? "primary" : "backup";
}

int64_t Replicator::epoch() const {
  ServerMembership* m = membership();
  return m == nullptr ? 0 : m->epoch();
}

absl::Status Replicator::Start(std::string address) {
  MembershipOptions m;
  m.etcd = etcd_.get();
  m.job = job_;
  m.shard = options_.shard;
  m.replica = options_.replica;
  m.address = address;
  m.ttl = options_.lease_ttl;
  m.log = log_;
  absl::StatusOr<std::unique_ptr<ServerMembership>> joined =
      ServerMembership::Join(m);
  if (!joined.ok()) return joined.status();
  ServerMembership* membership = joined->get();
  {
    absl::MutexLock lock(&mu_);
    address_ = std::move(address);
    membership_ = *std::move(joined);
  }
  const absl::Time deadline = absl::Now() + kCatchUpWait;
  while (true) {
    absl::StatusOr<JobLayout> layout =
        ReadLayout(*etcd_, job_, options_.shard + 1);
    if (!layout.ok()) return layout.status();
    const ShardLayout& shard = layout->shards[options_.shard];
    const std::string self = Address();
    const bool other_primary =
        shard.epoch != 0 && shard.primary_address != self;
    if (other_primary) {
      if (absl::Status s = CatchUpFrom(shard.primary_address, shard.epoch);
          s.ok())
        break;
      else if (absl::Now() > deadline)
        return s;
    } else {
      // Without a primary, this replica's state is the shard's only if no
      // other replica holds it: then one of those must take over first.
      const bool others_ready =
          std::any_of(shard.replicas.begin(), shard.replicas.end(),
                      [&](const ReplicaAddress& r) {
                        return r.ready && r.address != self;
                      });
      if (!others_ready && shard.epoch == 0) {
        absl::StatusOr<bool> claimed = membership->ClaimFreshShard();
        if (!claimed.ok()) return claimed.status();
        if (*claimed) break;
        continue;  // another replica won: copy from it
      }
      if (absl::Now() > deadline) {
        return absl::UnavailableError(absl::StrCat(
            "shard ", options_.shard,
            " has replicas holding its state but no primary to copy it "
            "from within ",
            absl::FormatDuration(kCatchUpWait)));
      }
    }
    absl::SleepFor(absl::Milliseconds(50));  // waiting for a primary
  }
  {
    absl::MutexLock lock(&mu_);
    catching_up_ = false;
  }
  if (absl::Status s = membership->SetReady(true); !s.ok()) return s;
  prober_ = std::thread([this] { ProbePrimary(); });
  return absl::OkStatus();
}

absl::Status Replicator::CheckPrimary() const {
  {
    absl::MutexLock lock(&mu_);
    if (catching_up_) {
      return absl::UnavailableError(absl::StrCat("replica ", options_.replica,
                                                 " of shard ", options_.shard,
                                                 " is catching up"));
    }
  }
  ServerMembership* m = membership();
  if (m->is_primary()) return absl::OkStatus();
  return absl::UnavailableError(
      absl::StrCat("replica ", options_.replica, " of shard ", options_.shard,
                   " is not its primary (epoch ", m->newest_epoch(),
                   "); the primary is in etcd at ", etcd_->endpoint()));
}

absl::Status Replicator::CheckReplicationToken(
    const std::multimap<grpc::string_ref, grpc::string_ref>& metadata) const {
  if (options_.token.empty() ||
      MetadataHolds(metadata, kReplicationTokenMetadataKey, options_.token)) {
    return absl::OkStatus();
  }
  return absl::UnauthenticatedError(
      "forwarded calls and catch-ups need the replicas' token "
      "(--replication_token_file); the job's token is not enough");
}

absl::Status Replicator::CheckForwarded(absl::string_view epoch_text,
                                        absl::string_view position_text,
                                        absl::string_view table,
                                        bool* in_copy) const {
  *in_copy = false;
  int64_t epoch = 0;
  uint64_t position = 0;
  if (!absl::SimpleAtoi(epoch_text, &epoch) ||
      !absl::SimpleAtoi(position_text, &position)) {
    return absl::InvalidArgumentError("malformed replication metadata");
  }
  {
    absl::MutexLock lock(&mu_);
    if (catching_up_) {
      return absl::UnavailableError(
          absl::StrCat("replica ", options_.replica, " is catching up"));
    }
    // Positions are the copied primary's own: another primary's say
    // nothing of the copy.
    if (position != 0 && epoch == copied_epoch_) {
      auto it = copied_positions_.find(table);
      *in_copy = it != copied_positions_.end() && position <= it->second;
    }
  }
  ServerMembership* m = membership();
  if (m->is_primary()) {
    return absl::FailedPreconditionError(
        absl::StrCat("replica ", options_.replica, " is the primary of shard ",
                     options_.shard, " at epoch ", m->epoch(),
                     "; a forward from epoch ", epoch, " is stale"));
  }
  if (epoch < m->newest_epoch()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "a forward from epoch ", epoch, " of shard ", options_.shard,
        " is stale: epoch ", m->newest_epoch(), " has begun"));
  }
  return absl::OkStatus();
}

std::vector<std::string> Replicator::Targets(int64_t epoch) {
  {
    absl::MutexLock lock(&mu_);
    if (targets_epoch_ == epoch) return targets_;
  }
  absl::StatusOr<JobLayout> layout =
      ReadLayout(*etcd_, job_, options_.shard + 1);
  absl::MutexLock lock(&mu_);
  if (targets_epoch_ == epoch) return targets_;
  targets_epoch_ = epoch;
  if (layout.ok()) {
    for (const ReplicaAddress& r : layout->shards[options_.shard].replicas) {
      if (r.ready && r.address != address_ &&
          std::find(targets_.begin(), targets_.end(), r.address) ==
              targets_.end()) {
        targets_.push_back(r.address);
      }
    }
  }
  return targets_;
}

void Replicator::Drop(const std::string& address) {
  absl::MutexLock lock(&mu_);
  targets_.erase(std::remove(targets_.begin(), targets_.end(), address),
                 targets_.end());
}

Replicator::Peer& Replicator::PeerFor(const std::string& address) {
  absl::MutexLock lock(&mu_);
  std::unique_ptr<Peer>& peer = peers_[address];
  if (peer == nullptr) {
    peer = std::make_unique<Peer>();
    absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
        MakeChannelCredentials(tls_);
    peer->channel = grpc::CreateChannel(
        address,
        credentials.ok() ? *credentials : grpc::InsecureChannelCredentials());
    peer->stub = std::make_unique<grpc::GenericStub>(peer->channel);
  }
  return *peer;
}

bool Replicator::Registered(const std::string& address) const {
  absl::StatusOr<JobLayout> layout =
      ReadLayout(*etcd_, job_, options_.shard + 1);
  // With etcd away nobody can tell; the replica counts as live.
  if (!layout.ok()) return true;
  const std::vector<ReplicaAddress>& replicas =
      layout->shards[options_.shard].replicas;
  return std::any_of(
      replicas.begin(), replicas.end(),
      [&](const ReplicaAddress& r) { return r.address == address; });
}

absl::Status Replicator::ForwardNow(absl::string_view method,
                                    const grpc::ByteBuffer& request,
                                    uint64_t position) {
  const int64_t epoch = membership()->epoch();
  if (epoch == 0) {
    return absl::UnavailableError(
        absl::StrCat("replica ", options_.replica,
                     " is no longer the primary of shard ", options_.shard));
  }
  for (const std::string& target : Targets(epoch)) {
    if (absl::Status s = ForwardTo(target, method, request, epoch, position);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status Replicator::ForwardTo(const std::string& address,
                                   absl::string_view method,
                                   const grpc::ByteBuffer& request,
                                   int64_t epoch, uint64_t position) {
  Peer& peer = PeerFor(address);
  const std::string path = absl::StrCat("/shardps.ParameterServer/", method);
  const absl::Time give_up = absl::Now() + kForwardGiveUp;
  absl::Duration backoff = absl::Milliseconds(5);
  while (true) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + kForwardCallTimeout));
    context.AddMetadata(kEpochMetadataKey, absl::StrCat(epoch));
    context.AddMetadata(kPositionMetadataKey, absl::StrCat(position));
    if (!auth_token_.empty()) {
      context.AddMetadata(kAuthMetadataKey, BearerValue(auth_token_));
    }
    if (!options_.token.empty()) {
      context.AddMetadata(kReplicationTokenMetadataKey, options_.token);
    }
    grpc::ByteBuffer reply;
    grpc::Status status;
    absl::Notification done;
    peer.stub->UnaryCall(&context, path, grpc::StubOptions(), &request, &reply,
                         [&](grpc::Status s) {
                           status = std::move(s);
                           done.Notify();
                         });
    done.WaitForNotification();
    if (status.ok()) return absl::OkStatus();
    if (status.error_code() == grpc::StatusCode::FAILED_PRECONDITION) {
      return absl::UnavailableError(
          absl::StrCat("no longer the primary of shard ", options_.shard, ": ",
                       address, " says ", status.error_message()));
    }
    if (!IsTransient(status.error_code())) {
      Logf(log_, "replica %s refused a forwarded %s: %s", address, method,
           status.error_message());
      return absl::InternalError(absl::StrCat("replica ", address,
                                              " refused what the primary "
                                              "applied: ",
                                              status.error_message()));
    }
    if (!Registered(address)) {
      Logf(log_,
           "replica %s left etcd; acknowledging without it until it "
           "catches up again",
           address);
      Drop(address);
      return absl::OkStatus();
    }
    if (absl::Now() > give_up) {
      return absl::UnavailableError(absl::StrCat(
          "replica ", address, " did not take a forwarded ", method, " for ",
          absl::FormatDuration(kForwardGiveUp), ": ", status.error_message()));
    }
    absl::SleepFor(backoff);  // the replica is restarting or catching up
    backoff = std::min(backoff * 2, absl::Milliseconds(100));
  }
}

}  // namespace ps
