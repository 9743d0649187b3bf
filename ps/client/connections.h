// Internal to ps::Client: the channels to every server and the state that
// the client's calls share (reused buffers, byte counts, calls abandoned to
// a hung server). Not part of the client's public surface.
//
// With ClientOptions::etcd, a shard's server is its primary in etcd
// (ps/coord/membership.h): Open waits until every shard has one, and a
// thread watches the layout and points each shard at its new primary; a
// connection once made lives as long as this object (calls may hold it).
//
// Thread-safety: all methods are safe to call concurrently.
#ifndef SHARDPS_PS_CLIENT_CONNECTIONS_H_
#define SHARDPS_PS_CLIENT_CONNECTIONS_H_

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>
#include <grpcpp/generic/generic_stub.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "proto/shardps.grpc.pb.h"
#include "ps/client/chunk_plan.h"
#include "ps/client/memory_slots.h"
#include "ps/coord/etcd_client.h"
#include "ps/coord/membership.h"
#include "ps/wire/buffer_pool.h"
#include "ps/wire/security.h"

namespace ps {

struct ClientOptions;

// One server: its address and channels (each its own TCP connection).
struct ServerConn {
  std::string address;
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  std::vector<std::unique_ptr<grpc::GenericStub>> bulk_stubs;  // per channel
  std::unique_ptr<shardps::ParameterServer::Stub> stub;        // on channels[0]

  // Shared memory with this server when it is on this host (see
  // Connections::PrepareMemory); after stub, so it detaches first. A
  // segment given up is closed once no call holds its slots, but its
  // object stays until the connection goes (a thread may have just read
  // `memory`, the one in use).
  absl::Mutex memory_mu;
  std::vector<std::unique_ptr<MemorySlots>> memories ABSL_GUARDED_BY(memory_mu);
  std::atomic<MemorySlots*> memory{nullptr};
  // No attach before this, after one that got no answer.
  absl::Time memory_next_try ABSL_GUARDED_BY(memory_mu) = absl::InfinitePast();
  // Set once the attempt has its answer (memory may still be null).
  std::atomic<bool> memory_settled{false};

  // `status` with its message prefixed by what failed and where.
  absl::Status Annotate(absl::string_view what, int shard,
                        const absl::Status& status) const;
  absl::Status Annotate(absl::string_view what, int shard,
                        const grpc::Status& status) const;
};

class Connections {
 public:
  // Channels to every server of `options` (which must be valid and outlive
  // this), with its credentials; connecting happens lazily.
  static absl::StatusOr<std::unique_ptr<Connections>> Open(
      const ClientOptions& options);
  Connections(const Connections&) = delete;
  Connections& operator=(const Connections&) = delete;
  // Waits for the abandoned calls (see AddAbandoned) to end.
  ~Connections();

  int size() const { return num_shards_; }
  // Shard s's server now (its primary, with etcd).
  ServerConn& server(int s) {
    return *shards_[s].load(std::memory_order_acquire);
  }
  const ClientOptions& options() const { return options_; }

  // Waits `d`, or less if a shard's primary changes meanwhile (a retry's
  // wait: the new primary is worth trying at once).
  void SleepUnlessLayoutChanges(absl::Duration d);

  // Adds what every call carries (the job's token) to `context`.
  void Authorize(grpc::ClientContext* context) const;

  // Attaches shared memory to shard s's server on the first call (when the
  // options allow it): from the calling thread, which may wait for the
  // server's answer, before an op's chunks are launched. A server that
  // refuses is not asked again; one that cannot be reached is, next time.
  void PrepareMemory(int s);
  // PrepareMemory for every server `chunks` go to; whether all of them
  // have shared memory now.
  bool PrepareMemory(absl::Span<const Chunk> chunks);
  // Shard s's server's shared memory once attached, else null; never waits.
  MemorySlots* Memory(int s);
  // Gives up `lost`, shard s's server's segment, `why`: the server
  // restarted and no longer knows it (a call was refused
  // FAILED_PRECONDITION), or failed calls retired half its slots. The next
  // op attaches anew, and closes the segments given up that no call holds;
  // while kMaxOpenSegments are open, calls go over TCP.
  void ForgetMemory(int s, MemorySlots* lost, absl::string_view why);
  // Values that went through shared memory, each way.
  void CountMemoryPushBytes(uint64_t n) {
    memory_push_bytes_.fetch_add(n, std::memory_order_relaxed);
  }
  void CountMemoryPullBytes(uint64_t n) {
    memory_pull_bytes_.fetch_add(n, std::memory_order_relaxed);
  }
  uint64_t memory_push_bytes() const { return memory_push_bytes_.load(); }
  uint64_t memory_pull_bytes() const { return memory_pull_bytes_.load(); }

  // Buffers for encoding requests and decoding replies, reused across calls.
  BufferPool& buffers() { return buffers_; }

  void CountPushBytes(uint64_t n) {
    push_bytes_.fetch_add(n, std::memory_order_relaxed);
  }
  void CountPullBytes(uint64_t n) {
    pull_bytes_.fetch_add(n, std::memory_order_relaxed);
  }
  uint64_t push_bytes() const { return push_bytes_.load(); }
  uint64_t pull_bytes() const { return pull_bytes_.load(); }

  // Calls a Pull or Push gave up on while they were stuck behind a hung
  // server; they end when keepalive closes its connection (within ~40 s).
  void AddAbandoned(int n);
  void AbandonedDone();

 private:
  Connections(const ClientOptions& options,
              std::shared_ptr<grpc::ChannelCredentials> credentials);

  // The connection to `address`, made on first use.
  ServerConn* ConnTo(const std::string& address);
  // Shard s's calls go to addresses[s] (num_shards_ of them).
  void UseAddresses(const std::vector<std::string>& addresses);
  // Points every shard that has a primary in `layout` at it.
  void Apply(const JobLayout& layout);
  // Reads the layout until every shard has a primary (up to the client's
  // rpc_timeout); its revision.
  absl::StatusOr<int64_t> AwaitPrimaries();
  // The watching thread: follows the layout from `revision` until stop_.
  void Follow(int64_t revision);

  const ClientOptions& options_;
  const std::shared_ptr<grpc::ChannelCredentials> credentials_;
  int num_shards_ = 0;
  std::unique_ptr<std::atomic<ServerConn*>[]> shards_;
  absl::Mutex conns_mu_;
  absl::flat_hash_map<std::string, std::unique_ptr<ServerConn>> conns_
      ABSL_GUARDED_BY(conns_mu_);
  std::unique_ptr<EtcdClient> etcd_;
  absl::Mutex layout_mu_;
  uint64_t layout_changes_ ABSL_GUARDED_BY(layout_mu_) = 0;
  std::atomic<bool> stop_{false};
  std::thread follower_;
  BufferPool buffers_;
  std::atomic<uint64_t> push_bytes_{0};
  std::atomic<uint64_t> pull_bytes_{0};
  std::atomic<uint64_t> memory_push_bytes_{0};
  std::atomic<uint64_t> memory_pull_bytes_{0};
  absl::Mutex abandoned_mu_;
  int abandoned_ ABSL_GUARDED_BY(abandoned_mu_) = 0;
};

}  // namespace ps

#endif  // SHARDPS_PS_CLIENT_CONNECTIONS_H_
