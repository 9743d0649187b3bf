// Internal to ps::Client: the channels to every server and the state that
// the client's calls share (reused buffers, byte counts, calls abandoned to
// a hung server). Not part of the client's public surface.
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
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "proto/shardps.grpc.pb.h"
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

  int size() const { return static_cast<int>(servers_.size()); }
  ServerConn& server(int s) { return *servers_[s]; }
  const ClientOptions& options() const { return options_; }

  // Adds what every call carries (the job's token) to `context`.
  void Authorize(grpc::ClientContext* context) const;

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
  explicit Connections(const ClientOptions& options) : options_(options) {}

  const ClientOptions& options_;
  std::vector<std::unique_ptr<ServerConn>> servers_;
  BufferPool buffers_;
  std::atomic<uint64_t> push_bytes_{0};
  std::atomic<uint64_t> pull_bytes_{0};
  absl::Mutex abandoned_mu_;
  int abandoned_ ABSL_GUARDED_BY(abandoned_mu_) = 0;
};

}  // namespace ps

#endif  // SHARDPS_PS_CLIENT_CONNECTIONS_H_
