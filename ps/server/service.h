// ParameterService is the gRPC face of one shardps server: it admits each
// call (job token, draining), decodes the request, calls the TableRegistry
// and its Tables (ps/table/table.h, where the transactions are), and
// encodes the reply. Every method is raw (ByteBuffer): Pull, Push and
// PushPull so that the float payload goes from gRPC's slices into the
// store, and from a pooled buffer back out, without a std::string copy
// (ps/wire/wire_codec.h); all so that a request that does not parse
// is answered INVALID_ARGUMENT naming its message, as every other bad
// request, rather than gRPC's own UNIMPLEMENTED without a message.
//
// A pull (or a PushPull's answer) that waits for other workers (sync, ssp)
// ends with its call: when the client cancels it or its deadline passes,
// the table stops waiting for it. A PushPull applies its push first,
// forwards it to the replicas when there are any, and only then reads.
//
// Every handler runs to completion on the gRPC callback thread that called
// it; there is no thread per request.
//
// Thread-safety: gRPC calls the handlers concurrently; all state is either
// immutable, atomic or guarded inside TableRegistry/Table/BufferPool.
#ifndef SHARDPS_PS_SERVER_SERVICE_H_
#define SHARDPS_PS_SERVER_SERVICE_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/functional/any_invocable.h"
#include "absl/random/random.h"
#include "absl/synchronization/mutex.h"
#include "proto/shardps.grpc.pb.h"
#include "ps/obs/trace.h"
#include "ps/server/checkpointer.h"
#include "ps/server/mapped_segments.h"
#include "ps/server/replicator.h"
#include "ps/server/server_metrics.h"
#include "ps/server/waiting_pull_reactor.h"
#include "ps/table/table_registry.h"
#include "ps/wire/buffer_pool.h"
#include "ps/wire/wire_codec.h"

namespace ps {

using ParameterServiceBase =
    shardps::ParameterServer::WithRawCallbackMethod_AttachMemory<
        shardps::ParameterServer::WithRawCallbackMethod_DetachMemory<
            shardps::ParameterServer::WithRawCallbackMethod_PullRows<
                shardps::ParameterServer::WithRawCallbackMethod_PushRows<
                    shardps::ParameterServer::WithRawCallbackMethod_Assign<
                        shardps::ParameterServer::WithRawCallbackMethod_Pull<
                            shardps::ParameterServer::WithRawCallbackMethod_Push<
                                shardps::ParameterServer::
                                    WithRawCallbackMethod_PushPull<
                                        shardps::ParameterServer::
                                            WithRawCallbackMethod_CreateTable<
                                                shardps::ParameterServer::
                                                    WithRawCallbackMethod_Stats<
                                                        shardps::ParameterServer::
                                                            Service>>>>>>>>>>;

struct ServiceOptions {
  std::string job = "default";
  // The tables' messages (stragglers); null: stderr. Must outlive the
  // service.
  LogSink* log = nullptr;
  // When non-empty, every call must carry it (ps/wire/security.h).
  std::string auth_token;
  TableLimits limits;
  // FAULT INJECTION, for tests of retries: this fraction of Pull and Push
  // calls is carried out in full but answered UNAVAILABLE, as if the reply
  // were lost on the way back. 0 in normal operation.
  double drop_reply_fraction = 0;
  // Spans of request handling (ps/obs/trace.h); null: none.
  Tracer* tracer = nullptr;
  // Every answered call is counted here (ps/server/server_metrics.h); null:
  // none.
  ServerMetrics* metrics = nullptr;
  // Whether same-host clients may attach shared memory (AttachMemory), and
  // how much.
  bool shared_memory = true;
  MappedSegmentLimits memory_limits;
};

class ParameterService final : public ParameterServiceBase {
 public:
  explicit ParameterService(ServiceOptions options)
      : registry_(options.job, options.limits, options.log),
        auth_token_(std::move(options.auth_token)),
        drop_reply_fraction_(options.drop_reply_fraction),
        tracer_(options.tracer),
        metrics_(options.metrics),
        shared_memory_(options.shared_memory),
        segments_(options.memory_limits) {}

  TableRegistry& registry() { return registry_; }
  // From now on every call is answered UNAVAILABLE ("shutting down"), which
  // clients retry, instead of being cut off by the server's shutdown.
  // Pulls waiting for other workers are answered the same way.
  void StartDraining() {
    draining_.store(true, std::memory_order_release);
    registry_.CloseWaits(absl::UnavailableError("server is shutting down"));
  }
  // Reports checkpoints_written in Stats; set before serving starts.
  void set_checkpointer(const Checkpointer* checkpointer) {
    checkpointer_ = checkpointer;
  }
  // Makes this server a replica (ps/server/replicator.h); set before
  // serving starts.
  void set_replicator(Replicator* replicator) { replicator_ = replicator; }

  // What the Stats RPC answers: tables, request and byte counts.
  void FillStats(shardps::StatsResponse* response);

  grpc::ServerUnaryReactor* CreateTable(grpc::CallbackServerContext* context,
                                        const grpc::ByteBuffer* request,
                                        grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Stats(grpc::CallbackServerContext* context,
                                  const grpc::ByteBuffer* request,
                                  grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Pull(grpc::CallbackServerContext* context,
                                 const grpc::ByteBuffer* request,
                                 grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Push(grpc::CallbackServerContext* context,
                                 const grpc::ByteBuffer* request,
                                 grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* PushPull(grpc::CallbackServerContext* context,
                                     const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Assign(grpc::CallbackServerContext* context,
                                   const grpc::ByteBuffer* request,
                                   grpc::ByteBuffer* response) override;
  // Sparse tables (ps/server/service_sparse.cc): rows by id.
  grpc::ServerUnaryReactor* PullRows(grpc::CallbackServerContext* context,
                                     const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* PushRows(grpc::CallbackServerContext* context,
                                     const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) override;
  // Same-host shared memory (ps/server/service_memory.cc).
  grpc::ServerUnaryReactor* AttachMemory(grpc::CallbackServerContext* context,
                                         const grpc::ByteBuffer* request,
                                         grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* DetachMemory(grpc::CallbackServerContext* context,
                                         const grpc::ByteBuffer* request,
                                         grpc::ByteBuffer* response) override;

  // What Pull and Push do with an encoded request once the call is admitted
  // (the fuzz target in tests/fuzz drives these directly). HandlePull calls
  // `done` with the outcome once the pull has been answered into
  // *response: at once, or later from another thread when the table's
  // consistency makes it wait (ps/table/consistency.h); request and response
  // must live until then. While it waits, the returned WaitingPull names it
  // (Table::CancelWait); else its table is null.
  using PullDone = absl::AnyInvocable<void(absl::Status) &&>;
  WaitingPull HandlePull(const grpc::ByteBuffer& request,
                         grpc::ByteBuffer* response, PullDone done);
  // `forwarded`: the call of a push the primary forwarded (null for a
  // client's), checked as Replicator::CheckForwarded says; one already in
  // the state copied from the primary is acknowledged as a duplicate.
  // *outcome, when given, gets what the push did.
  absl::Status HandlePush(
      const grpc::ByteBuffer& request, grpc::ByteBuffer* response,
      const grpc::CallbackServerContext* forwarded = nullptr,
      PushOutcome* outcome = nullptr);
  // HandlePush for an Assign call (AssignRequest, AssignResponse).
  absl::Status HandleAssign(
      const grpc::ByteBuffer& request, grpc::ByteBuffer* response,
      const grpc::CallbackServerContext* forwarded = nullptr,
      PushOutcome* outcome = nullptr);
  // A PushPull without replication: applies the push, then answers as
  // HandlePull does (`done`, the returned WaitingPull).
  WaitingPull HandlePushPull(const grpc::ByteBuffer& request,
                             grpc::ByteBuffer* response, PullDone done);

 private:
  // UNAUTHENTICATED unless the call carries the job's token; UNAVAILABLE
  // while draining.
  absl::Status Admit(const grpc::CallbackServerContext& context) const;
  // A pull request read and checked against its table, or the pull half of
  // a PushPull whose push was applied (`pushed`).
  struct ParsedPull {
    Table* table;
    KeyRange keys;
    shardps::ValueEncoding encoding;
    uint32_t worker;
    uint64_t clock;
    std::optional<PushOutcome> pushed;
    // Set: the values go into the client's shared memory, not the reply.
    std::optional<MemoryView> memory;
  };
  // The float32 values of `keys` at `slice` of an attached segment;
  // INVALID_ARGUMENT unless `encoding` is FLOAT32 (and, for a push, the
  // message carries no values of its own: `message_bytes` 0);
  // FAILED_PRECONDITION for a segment this server does not know.
  static absl::Status CheckMemoryEncoding(shardps::ValueEncoding encoding);
  absl::StatusOr<MemoryView> FindMemory(const shardps::MemorySlice& slice,
                                        shardps::ValueEncoding encoding,
                                        KeyRange keys, size_t message_bytes);
  // A push's float32 gradient in shared memory at `slice`: copied into
  // *copy (the client may still write its memory) and checked for NaN and
  // Inf on the way, its segment kept mapped by *view. Refusals as
  // FindMemory's, and INVALID_ARGUMENT for bad keys or values.
  absl::Status CopyPushFromMemory(const shardps::MemorySlice& slice,
                                  shardps::ValueEncoding encoding, Table& table,
                                  KeyRange keys, size_t message_bytes,
                                  PooledBuffer* copy, MemoryView* view);
  // Copies the pull's keys into an encoded PullResponse, or PushPullResponse
  // when it has `pushed`.
  absl::Status CopyPull(const ParsedPull& pull, grpc::ByteBuffer* response);
  // CopyPull of a pull whose values go into shared memory.
  absl::Status CopyPullToMemory(const ParsedPull& pull,
                                grpc::ByteBuffer* response);
  // Decodes a pushed gradient of `bulk_bytes` in `bulk` into *decoded (4
  // bytes per key); INVALID_ARGUMENT for an unknown encoding, bad keys or a
  // length that does not match them.
  absl::Status DecodePush(shardps::ValueEncoding encoding, Table& table,
                          KeyRange keys,
                          absl::Span<const absl::string_view> bulk,
                          size_t bulk_bytes, PooledBuffer* decoded);
  // With replication, a client's call must reach the primary; *forwarded
  // says whether the call is one the primary forwarded (its epoch in the
  // metadata), which CheckForwardedCall then checks once the table it names
  // is known.
  absl::Status CheckRole(const grpc::CallbackServerContext& context,
                         bool* forwarded) const;
  // Replicator::CheckForwarded with the call's epoch and position.
  absl::Status CheckForwardedCall(const grpc::CallbackServerContext& context,
                                  absl::string_view table, bool* in_copy) const;
  absl::StatusOr<ParsedPull> ParsePull(const grpc::ByteBuffer& request);
  // Applies a PushPull's push (as HandlePush) and returns its pull half:
  // the same keys at clock + 1. A pull encoding it cannot answer is refused
  // before the push is applied.
  absl::StatusOr<ParsedPull> ApplyPushPull(const grpc::ByteBuffer& request);
  // HandlePush and HandleAssign, by their messages.
  template <typename Request, typename Reply>
  absl::Status HandleWrite(const grpc::ByteBuffer& request,
                           grpc::ByteBuffer* response,
                           const grpc::CallbackServerContext* forwarded,
                           PushOutcome* outcome);
  // Push and Assign: admits the call, applies it (HandlePush or
  // HandleAssign) and, on a primary, answers once the replicas applied it.
  grpc::ServerUnaryReactor* ServeWrite(RpcMethod method,
                                       grpc::CallbackServerContext* context,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response);
  // Applies the push in `split` (the gradient) and `push` (the rest of a
  // PushRequest or PushPullRequest, or an AssignRequest's values);
  // *table gets its table.
  template <typename Request>
  // A push in shared memory puts its slice in *memory, when given.
  absl::StatusOr<PushOutcome> ApplyParsedPush(
      const Request& push, const SplitMessage& split,
      const grpc::CallbackServerContext* forwarded, Table** table,
      MemoryView* memory = nullptr);
  // Copies the pulled values into *response.
  absl::Status AnswerPull(const ParsedPull& pull, grpc::ByteBuffer* response);
  // Answers the pull once its table lets it read (at once for async), then
  // calls `done`.
  WaitingPull WaitThenAnswer(const ParsedPull& pull, grpc::ByteBuffer* response,
                             PullDone done);
  // `status`, or UNAVAILABLE when fault injection says to lose this
  // call's reply (`what`: "pull", "push") after carrying it out.
  absl::Status MaybeDropReply(absl::Status status, absl::string_view what);
  // Counts a call that arrived at `start` and is answered with `status`:
  // in its method's counters (Stats) and the latency metrics.
  void Record(RpcMethod method, absl::Time start, size_t bytes_in,
              size_t bytes_out, const absl::Status& status);
  // A call the primary applied: finishes it once the replicas applied it
  // too (Replicator::Forward), recording it then.
  grpc::ServerUnaryReactor* FinishForwarded(
      grpc::CallbackServerContext* context, RpcMethod method, absl::Time start,
      const grpc::ByteBuffer* request, grpc::ByteBuffer* response,
      uint64_t position);
  // Pull and PushPull: admits the call, reads it (a PushPull applies its
  // push), and answers at once or, when the table makes it wait or a
  // PushPull's push must reach the replicas first, later.
  grpc::ServerUnaryReactor* ServeRead(RpcMethod method,
                                      grpc::CallbackServerContext* context,
                                      const grpc::ByteBuffer* request,
                                      grpc::ByteBuffer* response);
  // What PullRows and PushRows do once the call is admitted and parsed
  // (a push's gradients as the pieces they arrived in; `forwarded`: the
  // call's context when the primary forwarded it, else null).
  absl::Status AnswerPullRows(const shardps::PullRowsRequest& pull,
                              grpc::ByteBuffer* response);
  absl::Status ApplyPushRows(const shardps::PushRowsRequest& push,
                             absl::Span<const absl::string_view> gradients,
                             const grpc::CallbackServerContext* forwarded,
                             grpc::ByteBuffer* response, PushOutcome* outcome);
  // Records the call and finishes it with `status`.
  grpc::ServerUnaryReactor* Finish(grpc::CallbackServerContext* context,
                                   RpcMethod method, absl::Time start,
                                   size_t bytes_in, size_t bytes_out,
                                   const absl::Status& status);

  TableRegistry registry_;
  const std::string auth_token_;
  const double drop_reply_fraction_;
  Tracer* const tracer_;
  ServerMetrics* const metrics_;
  std::atomic<bool> draining_{false};
  absl::Mutex drop_mu_;
  absl::BitGen drop_random_ ABSL_GUARDED_BY(drop_mu_);
  const Checkpointer* checkpointer_ = nullptr;
  Replicator* replicator_ = nullptr;
  BufferPool pull_buffers_;
  BufferPool scratch_buffers_;  // decoding and encoding 16-bit values
  std::atomic<uint64_t> bytes_pulled_{0};
  std::atomic<uint64_t> bytes_pushed_{0};
  const bool shared_memory_;
  MappedSegments segments_;
  std::atomic<uint64_t> memory_bytes_{0};
  // Per RpcMethod: Stats' MethodStats and request totals, and the
  // Prometheus counters of calls and bytes (StatsFamilies).
  struct MethodCounters {
    std::atomic<uint64_t> requests{0};
    std::atomic<uint64_t> errors{0};
    std::atomic<int64_t> nanos{0};
    std::atomic<uint64_t> bytes_received{0};
    std::atomic<uint64_t> bytes_sent{0};
  };
  std::array<MethodCounters, kNumRpcMethods> methods_;
  const absl::Time started_ = absl::Now();
};

}  // namespace ps

#endif  // SHARDPS_PS_SERVER_SERVICE_H_
