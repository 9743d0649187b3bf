// Internal to ps::Client: one Pull or Push in flight, as its chunk calls
// (ps/client/chunk_plan.h). It keeps up to `window` calls in flight,
// launching the next as each one ends, collects the first error, and
// remembers which chunks succeeded so that a retry sends only the rest.
// PullOp and PushOp (which also makes PushPull calls) say how a chunk's
// request is encoded and its reply taken in.
//
// An op is shared by the caller and every call's callback, so that
// whichever finishes last frees it.
//
// Thread-safety: Run is called once, from the caller's thread; the
// callbacks run on gRPC's threads.
#ifndef SHARDPS_PS_CLIENT_CHUNKED_OP_H_
#define SHARDPS_PS_CLIENT_CHUNKED_OP_H_

#include <grpcpp/client_context.h>
#include <grpcpp/support/byte_buffer.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "ps/client/chunk_plan.h"
#include "ps/client/client.h"
#include "ps/client/connections.h"

namespace ps {

// Which RPC an op's calls make.
enum class OpKind { kPull, kPush, kPushPull, kAssign };

// What every chunk of one op shares.
struct OpContext {
  Connections* conns;
  std::string table;
  uint64_t base_key = 0;  // the key of the caller's buffer's first float
  uint64_t clock = 0;
  absl::Duration timeout;  // of each call
  int window = 1;          // calls in flight at most
};

class ChunkedOp : public std::enable_shared_from_this<ChunkedOp> {
 public:
  ChunkedOp(OpContext context, std::vector<Chunk> chunks)
      : context_(std::move(context)), chunks_(std::move(chunks)) {}
  virtual ~ChunkedOp() = default;
  ChunkedOp(const ChunkedOp&) = delete;
  ChunkedOp& operator=(const ChunkedOp&) = delete;

  // Runs every chunk and waits for all of them, or gives up on calls stuck
  // past their deadline (kStragglerGrace); either way nothing touches the
  // caller's buffers once this returns. The first error, named by chunk,
  // shard and server.
  absl::Status Run();

  // After Run: the chunks that did not succeed (failed, or never launched
  // after a failure), in their order, for a retry to send again.
  std::vector<Chunk> Unfinished();
  // After Run: whether a call that went through shared memory failed
  // because its server no longer knew the segment (see
  // Connections::ForgetMemory); sending the unfinished chunks again at once
  // is then worth it.
  bool memory_lost();

 protected:
  virtual OpKind kind() const = 0;
  // Whether the values may travel in shared memory (float32 both ways).
  virtual bool MayUseMemory() const = 0;
  // The request of `chunk`, into `request`; with a `slot`, its values go
  // there (and the request names it) rather than into the message.
  virtual void EncodeRequest(const Chunk& chunk, const MemorySlot* slot,
                             grpc::ByteBuffer* request) = 0;
  // Takes in a successful call's reply (and what the server left in `slot`).
  virtual absl::Status TakeReply(const Chunk& chunk, const MemorySlot* slot,
                                 const grpc::ByteBuffer& reply) = 0;
  // Called once per Run, when the requests of the first `encoded` chunks
  // (the calls that may be in flight at once) are encoded and none is sent
  // yet: an error ends the op with nothing sent. A push checks its
  // gradient here.
  virtual absl::Status BeforeSending(size_t encoded) {
    return absl::OkStatus();
  }

  // The fields both requests share.
  template <typename Message>
  void FillHeader(const Chunk& chunk, Message* m) const;

  const std::vector<Chunk>& chunks() const { return chunks_; }

  const OpContext context_;

 private:
  // gRPC ends a call at its deadline, except one whose message is stuck
  // mid-write to a peer that stopped reading (a hung server): that call ends
  // only when the connection dies. Run() gives such calls this long past
  // their deadline, then returns DEADLINE_EXCEEDED; they finish in the
  // background, holding a reference to this op but not to the caller.
  static constexpr absl::Duration kStragglerGrace = absl::Seconds(1);

  struct Call {
    grpc::ClientContext context;
    grpc::ByteBuffer request;
    grpc::ByteBuffer response;
    std::optional<MemorySlot> slot;  // the call's shared memory, if any
  };

  bool FinishedLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AbandonLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void TakeLaunchesLocked(std::vector<size_t>* launch)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string Describe(const Chunk& chunk) const;
  // A call's request (and slot), then sending it; Launch does both.
  void Prepare(size_t index);
  void Send(size_t index);
  void Launch(size_t index);
  // Gives call `index`'s slot back (reusable only after an OK call: a
  // failed one may still be read or written by the server).
  void ReleaseSlot(size_t index, bool ok);
  void OnDone(size_t index, const grpc::Status& status);
  // The outcome of a finished call, recorded in traces and metrics.
  absl::Status Outcome(size_t index, const grpc::Status& status);

  const std::vector<Chunk> chunks_;
  int window_ = 1;  // calls in flight at most: context_.window, or twice it
  std::vector<std::unique_ptr<Call>> calls_;  // one per chunk, once launched
  std::vector<absl::Time> deadlines_;         // written before each launch
  std::vector<absl::Time> started_;           // when each call was launched

  absl::Mutex mu_;
  size_t next_ ABSL_GUARDED_BY(mu_) = 0;
  int inflight_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> finished_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> succeeded_ ABSL_GUARDED_BY(mu_);
  absl::Time latest_deadline_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  bool abandoned_ ABSL_GUARDED_BY(mu_) = false;
  bool memory_lost_ ABSL_GUARDED_BY(mu_) = false;
  // OnDone calls between their abandoned_ check and their last launch.
  int callbacks_busy_ ABSL_GUARDED_BY(mu_) = 0;
};

template <typename Message>
void ChunkedOp::FillHeader(const Chunk& chunk, Message* m) const {
  m->set_job(context_.conns->options().job);
  m->set_table(context_.table);
  m->set_begin(chunk.keys.begin);
  m->set_end(chunk.keys.end);
  m->set_worker(context_.conns->options().worker);
  m->set_clock(context_.clock);
}

}  // namespace ps

#endif  // SHARDPS_PS_CLIENT_CHUNKED_OP_H_
