#include "ps/client/connections.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ps/base/log.h"
#include "ps/client/client.h"
#include "ps/wire/grpc_status.h"

namespace ps {
namespace {

// How long the first call to a server waits for its shared memory answer.
constexpr absl::Duration kAttachTimeout = absl::Seconds(2);
// How long after an unanswered attach the next one is tried.
constexpr absl::Duration kAttachRetryAfter = absl::Seconds(10);
// The most shared memory one segment holds.
constexpr size_t kMaxMemoryBytes = 64 << 20;
// Segments open per server at most: the one in use and one given up whose
// slots calls still hold.
constexpr int kMaxOpenSegments = 2;

grpc::ChannelArguments ChannelArgs(const ClientOptions& o) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(o.max_message_bytes);
  args.SetMaxSendMessageSize(o.max_message_bytes);
  // A private subchannel pool gives each channel its own TCP connection;
  // otherwise gRPC would share one connection among identical channels.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  // Pings on busy connections: one to a hung server is closed after
  // 40 s instead of holding its queued calls forever.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 30000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10000);
  // Reconnect to a restarted server on the retry loop's schedule rather
  // than gRPC's default 1 s, growing to 120 s. (The minimum stays at its
  // default: gRPC also uses it as the connection attempt's timeout.)
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  return args;
}

}  // namespace

absl::Status ServerConn::Annotate(absl::string_view what, int shard,
                                  const absl::Status& status) const {
  return absl::Status(status.code(),
                      absl::StrCat(what, " on shard ", shard, " at ", address,
                                   ": ", status.message()));
}

absl::Status ServerConn::Annotate(absl::string_view what, int shard,
                                  const grpc::Status& status) const {
  return Annotate(what, shard, FromGrpcStatus(status));
}

Connections::Connections(const ClientOptions& options,
                         std::shared_ptr<grpc::ChannelCredentials> credentials)
    : options_(options), credentials_(std::move(credentials)) {}

absl::StatusOr<std::unique_ptr<Connections>> Connections::Open(
    const ClientOptions& options) {
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      MakeChannelCredentials(options.tls);
  if (!credentials.ok()) return credentials.status();
  std::unique_ptr<Connections> conns(
      new Connections(options, *std::move(credentials)));
  conns->num_shards_ = options.etcd.empty()
                           ? static_cast<int>(options.server_addrs.size())
                           : options.num_shards;
  conns->shards_ =
      std::make_unique<std::atomic<ServerConn*>[]>(conns->num_shards_);
  if (options.etcd.empty()) {
    conns->UseAddresses(options.server_addrs);
    return conns;
  }
  EtcdOptions etcd;
  etcd.endpoint = options.etcd;
  etcd.timeout = absl::Seconds(2);
  absl::StatusOr<std::unique_ptr<EtcdClient>> client = EtcdClient::Create(etcd);
  if (!client.ok()) return client.status();
  conns->etcd_ = *std::move(client);
  absl::StatusOr<int64_t> revision = conns->AwaitPrimaries();
  if (!revision.ok() && absl::IsUnavailable(revision.status()) &&
      !options.server_addrs.empty()) {
    // etcd is away: start with the primaries given (no failover can happen
    // meanwhile) and follow etcd once it answers.
    Logf(options.log, "%s; starting with the primaries given (%s)",
         revision.status().message(), absl::StrJoin(options.server_addrs, ","));
    conns->UseAddresses(options.server_addrs);
    revision = 0;
  }
  if (!revision.ok()) return revision.status();
  conns->follower_ =
      std::thread([c = conns.get(), r = *revision] { c->Follow(r); });
  return conns;
}

void Connections::UseAddresses(const std::vector<std::string>& addresses) {
  for (int s = 0; s < num_shards_; ++s) shards_[s].store(ConnTo(addresses[s]));
}

ServerConn* Connections::ConnTo(const std::string& address) {
  absl::MutexLock lock(&conns_mu_);
  std::unique_ptr<ServerConn>& conn = conns_[address];
  if (conn == nullptr) {
    conn = std::make_unique<ServerConn>();
    conn->address = address;
    const grpc::ChannelArguments args = ChannelArgs(options_);
    for (int c = 0; c < options_.channels_per_server; ++c) {
      conn->channels.push_back(
          grpc::CreateCustomChannel(address, credentials_, args));
      conn->bulk_stubs.push_back(
          std::make_unique<grpc::GenericStub>(conn->channels.back()));
    }
    conn->stub = shardps::ParameterServer::NewStub(conn->channels[0]);
  }
  return conn.get();
}

bool Connections::PrepareMemory(absl::Span<const Chunk> chunks) {
  if (!options_.shared_memory) return false;
  std::vector<bool> prepared(num_shards_, false);
  bool all = true;
  for (const Chunk& chunk : chunks) {
    if (prepared[chunk.shard]) continue;
    prepared[chunk.shard] = true;
    PrepareMemory(chunk.shard);
    all = all && Memory(chunk.shard) != nullptr;
  }
  return all;
}

void Connections::PrepareMemory(int s) {
  if (!options_.shared_memory) return;
  ServerConn& conn = server(s);
  if (conn.memory_settled.load(std::memory_order_acquire)) return;
  absl::MutexLock lock(&conn.memory_mu);
  if (conn.memory_settled.load(std::memory_order_relaxed)) return;
  // A server that did not answer is asked again only after a while: every
  // op would otherwise wait for it first.
  const absl::Time now = absl::Now();
  if (now < conn.memory_next_try) return;
  int open = 0;
  for (const std::unique_ptr<MemorySlots>& given_up : conn.memories) {
    if (!given_up->CloseIfIdle()) ++open;
  }
  if (open >= kMaxOpenSegments) {
    conn.memory_next_try = now + kAttachRetryAfter;
    return;  // over TCP until a segment given up is let go
  }
  // Slots for every call in flight, twice over for ops of other threads,
  // within kMaxMemoryBytes per server (huge chunks go over TCP).
  const size_t slot_bytes =
      std::max(options_.chunk_bytes, options_.push_chunk_bytes);
  const size_t slots = std::min<size_t>(2 * options_.max_inflight_per_server,
                                        kMaxMemoryBytes / slot_bytes);
  if (slots == 0) {
    conn.memory_settled.store(true, std::memory_order_release);
    return;
  }
  absl::StatusOr<std::unique_ptr<MemorySlots>> memory = MemorySlots::Attach(
      *conn.stub, *this, slot_bytes, static_cast<int>(slots),
      std::min(options_.rpc_timeout / 2, kAttachTimeout));
  if (memory.ok()) {
    conn.memories.push_back(*std::move(memory));
    conn.memory.store(conn.memories.back().get(), std::memory_order_release);
  } else if (absl::IsUnavailable(memory.status()) ||
             absl::IsDeadlineExceeded(memory.status())) {
    conn.memory_next_try = now + kAttachRetryAfter;
    return;  // no answer: ask again later
  }
  conn.memory_settled.store(true, std::memory_order_release);
}

MemorySlots* Connections::Memory(int s) {
  return server(s).memory.load(std::memory_order_acquire);
}

void Connections::ForgetMemory(int s, MemorySlots* lost,
                               absl::string_view why) {
  ServerConn& conn = server(s);
  absl::MutexLock lock(&conn.memory_mu);
  MemorySlots* expected = lost;
  if (conn.memory.compare_exchange_strong(expected, nullptr)) {
    conn.memory_settled.store(false, std::memory_order_release);
    Logf(options_.log, "shard %d at %s: shared memory given up (%s)", s,
         conn.address, why);
  }
}

void Connections::Apply(const JobLayout& layout) {
  for (int s = 0; s < num_shards_; ++s) {
    const ShardLayout& shard = layout.shards[s];
    if (shard.epoch == 0) continue;  // between primaries: keep the last
    ServerConn* next = ConnTo(shard.primary_address);
    ServerConn* previous = shards_[s].exchange(next);
    if (previous != nullptr && previous != next) {
      Logf(options_.log, "shard %d: primary now %s (was %s)", s, next->address,
           previous->address);
    }
  }
}

absl::StatusOr<int64_t> Connections::AwaitPrimaries() {
  absl::StatusOr<JobLayout> layout = ps::AwaitPrimaries(
      *etcd_, options_.job, num_shards_, options_.rpc_timeout);
  if (!layout.ok()) return layout.status();
  Apply(*layout);
  return layout->revision;
}

void Connections::Follow(int64_t revision) {
  const std::string prefix = JobPrefix(options_.job);
  bool unreachable = false;
  while (!stop_.load()) {
    absl::Status watched = etcd_->Watch(
        prefix, revision + 1,
        [&](const shardps::etcd::WatchResponse& r) {
          if (r.events_size() > 0) {
            absl::StatusOr<JobLayout> layout =
                ReadLayout(*etcd_, options_.job, num_shards_);
            if (layout.ok()) Apply(*layout);
          }
          revision = std::max(revision, r.header().revision());
          return !stop_.load();
        },
        stop_);
    if (stop_.load()) break;
    if (!unreachable) {
      Logf(options_.log,
           "etcd at %s: %s; calls keep going to the current primaries",
           options_.etcd, watched.message());
      unreachable = true;
    }
    absl::SleepFor(absl::Milliseconds(200));  // before watching again
    absl::StatusOr<JobLayout> layout =
        ReadLayout(*etcd_, options_.job, num_shards_);
    if (layout.ok()) {
      Apply(*layout);
      revision = layout->revision;
      if (unreachable) Logf(options_.log, "etcd at %s is back", options_.etcd);
      unreachable = false;
    }
  }
}

void Connections::SleepUnlessLayoutChanges(absl::Duration d) {
  absl::MutexLock lock(&layout_mu_);
  const uint64_t seen = layout_changes_;
  auto changed = [this, seen]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(layout_mu_) {
    return layout_changes_ != seen;
  };
  layout_mu_.AwaitWithTimeout(absl::Condition(&changed), d);
}

Connections::~Connections() {
  stop_.store(true);
  if (follower_.joinable()) follower_.join();
  absl::MutexLock lock(&abandoned_mu_);
  abandoned_mu_.Await(absl::Condition(
      +[](int* n) { return *n == 0; }, &abandoned_));
}

void Connections::Authorize(grpc::ClientContext* context) const {
  if (!options_.auth_token.empty()) {
    context->AddMetadata(kAuthMetadataKey, BearerValue(options_.auth_token));
  }
}

void Connections::AddAbandoned(int n) {
  absl::MutexLock lock(&abandoned_mu_);
  abandoned_ += n;
}

void Connections::AbandonedDone() {
  absl::MutexLock lock(&abandoned_mu_);
  --abandoned_;
}

}  // namespace ps
