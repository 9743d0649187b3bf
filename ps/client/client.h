// ps::Client is a worker's handle on a sharded parameter server: S servers,
// each owning one RangePartition range of every table.
//
//   ASSIGN_OR_RETURN(auto client, ps::Client::Connect(options));
//   RETURN_IF_ERROR(client->CreateTable({"model", num_params, sgd, init}));
//   RETURN_IF_ERROR(client->Pull("model", 0, num_params, weights.data()));
//   RETURN_IF_ERROR(client->Push("model", 0, num_params, grads.data()));
//
// Pull and Push split a key range by shard, cut each piece into chunks of at
// most chunk_bytes, and keep up to max_inflight_per_server chunk calls per
// shard in flight at once, on channels_per_server TCP connections per server,
// so every shard works in parallel and large ranges pipeline. Every call has
// a deadline; a failure names the server's address and shard.
//
// Thread-safety: all methods are safe to call concurrently.
#ifndef SHARDPS_PS_CLIENT_CLIENT_H_
#define SHARDPS_PS_CLIENT_CLIENT_H_

#include <grpcpp/channel.h>
#include <grpcpp/generic/generic_stub.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/shardps.grpc.pb.h"
#include "ps/client/client_metrics.h"
#include "ps/obs/trace.h"
#include "ps/wire/buffer_pool.h"
#include "ps/wire/range_partition.h"
#include "ps/wire/security.h"

namespace ps {

struct ClientOptions {
  std::vector<std::string> server_addrs;  // shard i is served by entry i
  std::string job = "default";
  uint32_t worker = 0;  // reported to servers with each call
  // Largest payload of one Pull/Push call; a multiple of 64 bytes.
  size_t chunk_bytes = 1 << 20;
  int channels_per_server = 2;      // loopback TCP tops out per connection
  int max_inflight_per_server = 4;  // chunk calls in flight per shard
  absl::Duration rpc_timeout = absl::Seconds(30);  // deadline of every call
  int max_message_bytes = 256 << 20;
  // ps/wire/security.h: TLS / mutual TLS to the servers, and the job's token
  // sent with every call (empty: none).
  TlsFiles tls;
  std::string auth_token;
  // How values travel (ps/wire/value_codec.h): pull_encoding is FLOAT32, FP16
  // or BF16; push_encoding any of these or ONEBIT (1-bit SGD; the client keeps
  // each key's quantization error and adds it to the key's next gradient).
  shardps::ValueEncoding pull_encoding = shardps::FLOAT32;
  shardps::ValueEncoding push_encoding = shardps::FLOAT32;
  // A span per chunk call ("pull_rpc"/"push_rpc", with its shard) goes
  // here (ps/obs/trace.h); null: none. Must outlive the client.
  Tracer* tracer = nullptr;
  // Each chunk call and retry is counted here (ps/client/client_metrics.h),
  // which must have a series per server; null: none. Must outlive the client.
  ClientMetrics* metrics = nullptr;
  // Every call is retried on UNAVAILABLE (and on CANCELLED, which only a
  // server going away causes here) with exponential backoff (100 ms
  // doubling to 1 s, +-50% jitter) until this much time has passed, logging
  // which server it waits for; 0: no retries. Pushes are safe to retry: the
  // servers apply each push once (see Push).
  absl::Duration retry_give_up = absl::ZeroDuration();
};

struct TableOptions {
  std::string name;
  uint64_t num_params = 0;
  shardps::OptimizerConfig optimizer;
  shardps::InitConfig init;
  std::vector<shardps::InitSegment> init_segments;  // override `init`
  // async by default; under sync and ssp a Pull may wait for the other
  // workers, up to the straggler timeout on top of rpc_timeout.
  shardps::ConsistencyConfig consistency;
};

class Client {
 public:
  // Checks the options and creates the channels; connecting happens lazily.
  static absl::StatusOr<std::unique_ptr<Client>> Connect(ClientOptions options);

  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;
  // Waits for calls that an earlier Pull/Push gave up on (see BulkOp in
  // client.cc) to end; only a server that hung mid-call leaves any.
  ~Client();

  int num_servers() const { return static_cast<int>(servers_.size()); }
  const ClientOptions& options() const { return options_; }

  // Waits until every server's health service answers SERVING; the error
  // names the first server that did not within `timeout`.
  absl::Status WaitReady(absl::Duration timeout);

  // Creates the table on every server (shard i of RangePartition(P, S) on
  // server i), or finds the identical table another worker already created.
  absl::Status CreateTable(const TableOptions& table);

  // Waits until every server holds `table` as another worker (rank 0)
  // created it, with the same size and shard count, then makes it usable
  // here. DEADLINE_EXCEEDED after `timeout` names a server still without it.
  absl::Status OpenTable(const TableOptions& table, absl::Duration timeout);

  // Copies keys [begin, end) of `table` into out[0, end - begin). `clock` is
  // the caller's iteration, for consistency modes and stats.
  absl::Status Pull(absl::string_view table, uint64_t begin, uint64_t end,
                    float* out, uint64_t clock = 0);

  // Sends the gradient grad[0, end - begin) for keys [begin, end). A gradient
  // with a NaN or Inf is refused before anything is sent, so no shard
  // applies part of it. Exactly once: every piece carries this client's
  // session and the push's sequence number, so a piece sent again (a retry
  // after a lost reply, also to a server restored from a checkpoint) is
  // acknowledged by the server without being applied twice
  // (ps/table/push_ledger.h).
  // `lr_scale` multiplies the table's learning rate for this push (a
  // worker-side schedule).
  absl::Status Push(absl::string_view table, uint64_t begin, uint64_t end,
                    const float* grad, uint64_t clock = 0,
                    float lr_scale = 1.0f);

  // Bytes of the Push requests sent and Pull responses received so far,
  // whole messages as on the wire (retries included).
  uint64_t push_bytes() const { return push_bytes_.load(); }
  uint64_t pull_bytes() const { return pull_bytes_.load(); }

  // Each server's Stats, in shard order.
  absl::StatusOr<std::vector<shardps::StatsResponse>> Stats();

  struct ServerConn;  // implementation detail, defined in client.cc
  // Runs `call` until it is not UNAVAILABLE or options().retry_give_up
  // has passed (see ClientOptions); `what` names it in messages.
  absl::Status Retrying(absl::string_view what,
                        absl::FunctionRef<absl::Status()> call) const;
  // Adds what every call carries (the auth token) to `context`.
  void Authorize(grpc::ClientContext* context) const;
  class BulkOp;  // implementation detail, defined in client.cc

 private:
  absl::Status CreateTableOnce(const TableOptions& table);
  absl::StatusOr<std::vector<shardps::StatsResponse>> StatsOnce();
  // Polls server `s`'s health service until it serves or `deadline`.
  absl::Status WaitServer(int s, absl::Time deadline);
  Client(ClientOptions options, uint64_t session);
  // What the client knows of a table it created or opened.
  struct TableInfo {
    TableInfo(RangePartition partition, absl::Duration pull_wait)
        : partition(std::move(partition)), pull_wait(pull_wait) {}
    const RangePartition partition;
    const absl::Duration pull_wait;  // the longest a pull may wait
    // ONEBIT pushes: the quantization error of every key, added to its next
    // gradient (allocated by the first such push).
    absl::Mutex residual_mu;
    std::vector<float> residual ABSL_GUARDED_BY(residual_mu);
  };
  absl::StatusOr<TableInfo*> FindTable(absl::string_view table, uint64_t begin,
                                       uint64_t end);

  // What makes a push's pieces unique on the servers, and its learning
  // rate scale (PushRequest fields).
  struct PushTag {
    uint64_t session = 0;
    uint64_t sequence = 0;
    uint64_t acked_below = 0;
    float lr_scale = 1.0f;
  };
  absl::Status RunBulk(bool is_push, absl::string_view table, uint64_t begin,
                       uint64_t end, float* out, const float* grad,
                       uint64_t clock, const PushTag& tag);

  const ClientOptions options_;
  const uint64_t session_;  // random, non-zero; see Push
  std::vector<std::unique_ptr<ServerConn>> servers_;
  mutable BufferPool push_buffers_;  // thread-safe; reused across calls
  mutable std::atomic<uint64_t> push_bytes_{0};
  mutable std::atomic<uint64_t> pull_bytes_{0};

  void AddStragglers(int n) const;
  void StragglerDone() const;
  mutable absl::Mutex stragglers_mu_;
  mutable int stragglers_ ABSL_GUARDED_BY(stragglers_mu_) = 0;
  absl::Mutex push_mu_;
  uint64_t next_sequence_ ABSL_GUARDED_BY(push_mu_) = 1;
  std::set<uint64_t> open_pushes_ ABSL_GUARDED_BY(push_mu_);  // sequences
  absl::Mutex tables_mu_;
  absl::flat_hash_map<std::string, std::unique_ptr<TableInfo>> tables_
      ABSL_GUARDED_BY(tables_mu_);
};

}  // namespace ps

#endif  // SHARDPS_PS_CLIENT_CLIENT_H_
