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
#include "absl/types/span.h"
#include "proto/shardps.pb.h"
#include "ps/base/log.h"
#include "ps/client/client_metrics.h"
#include "ps/obs/trace.h"
#include "ps/wire/row_partition.h"
#include "ps/wire/security.h"

namespace ps {

// The client's internals (ps/client/connections.h, chunk_plan.h,
// chunked_op.h, push_op.h).
class Connections;
class ChunkedOp;
struct Chunk;
struct PushTag;

// The default chunk size. Pushes to replicated servers get smaller chunks:
// a primary forwards a chunk to its backups only once it has received all
// of it, and the chunks in flight arrive together, so a push reaches the
// backups about max_inflight_per_server x chunk later than the primary; at
// 1 MiB that tail cost one worker's 1M-float pushes a third of their rate on
// 1 Gbit/s links, at 256 KiB an eighth (experiments/results/replication).
// Otherwise 1 MiB chunks are faster (fewer calls) where CPU is the limit.
inline constexpr size_t kChunkBytes = 1 << 20;
inline constexpr size_t kReplicatedPushChunkBytes = 256 << 10;

struct ClientOptions {
  std::vector<std::string> server_addrs;  // shard i is served by entry i
  // Replicated servers (shardps-server --etcd): the job's etcd
  // (http://host:port) and its shard count, instead of server_addrs. Each
  // shard's calls go to its primary, followed in etcd as it changes (a call
  // to a primary that died is retried on the next one); while etcd is away
  // the calls keep going where they went. With etcd, server_addrs may name
  // num_shards primaries to start with when etcd cannot be read at start
  // (a process joining while etcd is away, told the primaries by one that
  // knows them); they are followed in etcd once it answers.
  std::string etcd;
  int num_shards = 0;
  std::string job = "default";
  uint32_t worker = 0;  // reported to servers with each call
  // Largest payload of one Pull call, and of one Push call unless
  // push_chunk_bytes says otherwise; a multiple of 64 bytes. 0: kChunkBytes.
  size_t chunk_bytes = 0;
  // Largest payload of one Push call. 0: chunk_bytes if that was given,
  // else kReplicatedPushChunkBytes with etcd and kChunkBytes without.
  size_t push_chunk_bytes = 0;
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
  // servers apply each push once (see Push). ps/client/retry.h.
  absl::Duration retry_give_up = absl::ZeroDuration();
  // Retries are logged here; null: stderr. Must outlive the client.
  LogSink* log = nullptr;
  // A server on this host gets float32 values of Pull, Push and PushPull
  // through shared memory (/dev/shm) instead of TCP; elsewhere (the server
  // refuses: another host or container, replication, --shared_memory=false
  // on it) they go over TCP as always. Compressed values always go over
  // TCP. The gRPC calls, deadlines, retries and exactly-once rules are
  // the same either way.
  bool shared_memory = true;
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

// A sparse table (DESIGN.md "Sparse tables"): rows of `dim` floats keyed by
// any uint64 id, created on first touch, sharded by RowPartition.
struct RowTableOptions {
  std::string name;
  uint32_t dim = 0;
  uint64_t max_rows_per_shard = 0;  // each server's row limit
  shardps::OptimizerConfig optimizer;
  shardps::InitConfig init;
  shardps::RowSharding sharding = shardps::ROW_HASH;
  uint64_t id_space = 0;  // ROW_RANGE: the ids cut up (0: all of uint64)
};

class Client {
 public:
  // Checks the options and creates the channels; connecting happens lazily.
  static absl::StatusOr<std::unique_ptr<Client>> Connect(ClientOptions options);

  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;
  // Waits for calls that an earlier Pull/Push gave up on while they were
  // stuck behind a hung server (ps/client/chunked_op.h) to end; only a
  // server that hung mid-call leaves any.
  ~Client();

  int num_servers() const;
  // Where each shard's calls go now: server_addrs, or with etcd each
  // shard's primary as last seen.
  std::vector<std::string> ServerAddresses() const;
  const ClientOptions& options() const { return options_; }

  // Waits until every server's health service answers SERVING and its
  // Stats shows that it speaks this client's wire protocol, job and token.
  // While it waits it logs every few seconds why a server is not ready;
  // the error names the first server that was not within `timeout`, and
  // the cause (ps/client/connect_cause.h). A server that refuses the
  // protocol, job or token fails the wait at once.
  absl::Status WaitReady(absl::Duration timeout);

  // Creates the table on every server (shard i of RangePartition(P, S) on
  // server i), or finds the identical table another worker already created.
  // A spec that no server would take (ps/wire/table_spec.h) is refused here,
  // before anything is sent.
  absl::Status CreateTable(const TableOptions& table);

  // Waits until every server holds `table` as another worker (rank 0)
  // created it, with the same size and shard count, then makes it usable
  // here (with table.consistency, which must be the table's). DEADLINE_EXCEEDED
  // after `timeout` names a server still without it.
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

  // Push, then the keys' values once it was applied, in one round trip per
  // piece: as Push, then Pull(table, begin, end, out, clock + 1), with
  // every rule of both (proto/shardps.proto PushPullRequest), except that a
  // failure after some pieces were applied leaves out partly written. `out`
  // may be `grad` itself.
  absl::Status PushPull(absl::string_view table, uint64_t begin, uint64_t end,
                        const float* grad, float* out, uint64_t clock = 0,
                        float lr_scale = 1.0f);

  // Replaces the values of keys [begin, end) with values[0, end - begin)
  // (Assign in proto/shardps.proto): to make rank 0's initial weights the
  // table's, or to load a model. Float32 whatever the push encoding;
  // exactly once and all or nothing per shard as Push (values with a NaN
  // or Inf are refused before anything is sent). Not ordered with other
  // workers' pushes: call it before training starts.
  absl::Status Assign(absl::string_view table, uint64_t begin, uint64_t end,
                      const float* values);

  // Bytes of the Push (and PushPull) requests sent and Pull (and PushPull)
  // responses received so far, whole messages as on the wire (retries
  // included).
  uint64_t push_bytes() const;
  uint64_t pull_bytes() const;
  // Bytes of values that went through shared memory instead: pushed
  // (gradients), pulled (values), and both.
  uint64_t memory_push_bytes() const;
  uint64_t memory_pull_bytes() const;
  uint64_t memory_bytes() const {
    return memory_push_bytes() + memory_pull_bytes();
  }

  // Sparse tables (ps/client/row_ops.cc). CreateRowTable creates the table
  // on every server (or finds the identical one); OpenRowTable learns one
  // another worker created, from the servers' Stats (NOT_FOUND if a server
  // lacks it). Either is needed before PullRows and PushRows.
  absl::Status CreateRowTable(const RowTableOptions& table);
  absl::Status OpenRowTable(absl::string_view table);
  // The row width of a table created or opened here; NOT_FOUND otherwise.
  absl::StatusOr<uint32_t> RowDim(absl::string_view table);
  // Rows ids[i] into out[i * dim, (i + 1) * dim); an id may repeat. Rows not
  // held yet are created from the table's initializer when `create`, else
  // NOT_FOUND. Ids are de-duplicated, grouped by shard and sent in calls of
  // at most chunk_bytes, all shards at once; retried as Pull.
  absl::Status PullRows(absl::string_view table, absl::Span<const uint64_t> ids,
                        float* out, bool create = true);
  // Row gradients grads[i * dim, (i + 1) * dim) for ids[i]: repeated ids
  // are summed, then each row is applied once on its server at learning
  // rate lr * lr_scale, exactly once however often a call is retried.
  // A NaN or Inf anywhere is refused before anything is sent. Values
  // travel as push_encoding (ONEBIT: as FLOAT32).
  absl::Status PushRows(absl::string_view table, absl::Span<const uint64_t> ids,
                        const float* grads, float lr_scale = 1.0f);

  // Each server's Stats, in shard order.
  absl::StatusOr<std::vector<shardps::StatsResponse>> Stats();

  // WaitReady and Stats for shard `s` alone (one Stats call, not retried),
  // for a tool that reports on each server (worker/launch/cluster_check.h).
  absl::Status WaitServerReady(int s, absl::Duration timeout);
  absl::StatusOr<shardps::StatsResponse> ServerStats(int s);

 private:
  struct TableInfo;  // what the client knows of a table; in client.cc
  // What the client knows of a sparse table it created or opened.
  struct RowTableInfo {
    uint32_t dim;
    RowPartition partition;
  };

  Client(ClientOptions options, uint64_t session);
  absl::Status CreateTableOnce(const TableOptions& table);
  absl::StatusOr<std::vector<shardps::StatsResponse>> StatsOnce();
  // Polls server `s`'s health service until it serves or `deadline`.
  absl::Status WaitServer(int s, absl::Time deadline);
  // Server s's answer to a Stats call that states this client's protocol
  // (ps/wire/protocol_version.h), checked against this client's.
  absl::Status CheckServerProtocol(int s, absl::Time deadline);
  shardps::StatsRequest StatsRequestWithVersion() const;
  void AddTable(const TableOptions& table);
  // Push, PushPull (with `out`) and Assign.
  absl::Status SendPush(absl::string_view table, uint64_t begin, uint64_t end,
                        const float* grad, float* out, uint64_t clock,
                        float lr_scale, bool assign = false);
  absl::StatusOr<TableInfo*> FindTable(absl::string_view table, uint64_t begin,
                                       uint64_t end);
  // Runs the op `make` builds until its chunks all succeeded, retrying the
  // unfinished ones (ps/client/retry.h); `what` names it in messages.
  absl::Status RunRetried(
      absl::string_view what, std::vector<Chunk> chunks,
      absl::FunctionRef<std::shared_ptr<ChunkedOp>(std::vector<Chunk>)> make);
  // Runs `call` with the client's retries; `what` names it in messages.
  absl::Status Retried(absl::string_view what,
                       absl::FunctionRef<absl::Status()> call);
  // The push's session, sequence and acked_below; the push stays open (its
  // sequence cannot be forgotten by servers) until ClosePush.
  PushTag OpenPush(float lr_scale);
  void ClosePush(uint64_t sequence);
  absl::StatusOr<const RowTableInfo*> FindRowTable(absl::string_view table);
  void AddRowTable(std::string name, std::unique_ptr<RowTableInfo> info);
  // One call of a PullRows / PushRows: a chunk of `shard`'s ids, the
  // piece-th of its push, on the server's connection `channel` (modulo
  // their number).
  absl::Status PullRowsCall(int shard, size_t channel, uint32_t dim,
                            absl::string_view table,
                            absl::Span<const uint64_t> ids, bool create,
                            float* out);
  // A push call of rows[k][0, dim) for ids[k], built, then sent only if
  // may_send() is OK (else its error).
  absl::Status PushRowsCall(int shard, size_t channel, uint32_t dim,
                            absl::string_view table,
                            absl::Span<const uint64_t> ids,
                            absl::Span<const float* const> rows, uint32_t piece,
                            const PushTag& tag,
                            absl::FunctionRef<absl::Status()> may_send);

  const ClientOptions options_;
  const uint64_t session_;  // random, non-zero; see Push
  std::unique_ptr<Connections> conns_;
  absl::Mutex push_mu_;
  uint64_t next_sequence_ ABSL_GUARDED_BY(push_mu_) = 1;
  std::set<uint64_t> open_pushes_ ABSL_GUARDED_BY(push_mu_);  // sequences
  absl::Mutex tables_mu_;
  absl::flat_hash_map<std::string, std::unique_ptr<TableInfo>> tables_
      ABSL_GUARDED_BY(tables_mu_);
  absl::flat_hash_map<std::string, std::unique_ptr<RowTableInfo>> row_tables_
      ABSL_GUARDED_BY(tables_mu_);
};

}  // namespace ps

#endif  // SHARDPS_PS_CLIENT_CLIENT_H_
