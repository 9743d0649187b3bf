#include "ps/client/chunked_op.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "ps/client/client.h"

namespace ps {
namespace {

// Per OpKind: the RPC, the name in messages, the trace span of a call.
struct KindNames {
  const char* method;
  const char* name;
  const char* span;
};
constexpr KindNames kKindNames[] = {
    {"/shardps.ParameterServer/Pull", "pull", "pull_rpc"},
    {"/shardps.ParameterServer/Push", "push", "push_rpc"},
    {"/shardps.ParameterServer/PushPull", "push_pull", "push_pull_rpc"},
    {"/shardps.ParameterServer/Assign", "assign", "assign_rpc"},
};
const KindNames& NamesOf(OpKind kind) {
  return kKindNames[static_cast<int>(kind)];
}

}  // namespace

std::vector<Chunk> ChunkedOp::Unfinished() {
  absl::MutexLock lock(&mu_);
  std::vector<Chunk> out;
  for (size_t i = 0; i < chunks_.size(); ++i) {
    if (!succeeded_[i]) out.push_back(chunks_[i]);
  }
  return out;
}

bool ChunkedOp::memory_lost() {
  absl::MutexLock lock(&mu_);
  return memory_lost_;
}

absl::Status ChunkedOp::Run() {
  window_ = context_.window;
  // A call through shared memory holds no socket buffer, only a slot:
  // twice the window (every slot) keeps the servers busier.
  if (MayUseMemory() && context_.conns->PrepareMemory(chunks_)) window_ *= 2;
  calls_.resize(chunks_.size());
  deadlines_.resize(chunks_.size());
  started_.resize(chunks_.size());
  std::vector<size_t> launch;
  {
    absl::MutexLock lock(&mu_);
    finished_.assign(chunks_.size(), false);
    succeeded_.assign(chunks_.size(), false);
    TakeLaunchesLocked(&launch);
  }
  for (size_t i : launch) Prepare(i);
  // TakeLaunchesLocked takes the chunks in order, so these are the first.
  if (absl::Status s = BeforeSending(launch.size()); !s.ok()) {
    // Nothing was sent: the slots may serve the next call.
    for (size_t i : launch) {
      ReleaseSlot(i, true);
      calls_[i].reset();
    }
    absl::MutexLock lock(&mu_);
    inflight_ = 0;
    error_ = s;
    return s;
  }
  for (size_t i : launch) Send(i);
  absl::MutexLock lock(&mu_);
  const absl::Condition finished(this, &ChunkedOp::FinishedLocked);
  while (!mu_.AwaitWithDeadline(finished, latest_deadline_ + kStragglerGrace)) {
    if (absl::Now() >= latest_deadline_ + kStragglerGrace) {
      AbandonLocked();
      break;
    }
  }
  return error_;
}

bool ChunkedOp::FinishedLocked() const {
  return inflight_ == 0 && callbacks_busy_ == 0 &&
         (next_ == chunks_.size() || !error_.ok());
}

void ChunkedOp::AbandonLocked() {
  abandoned_ = true;
  for (size_t i = 0; i < next_; ++i) {
    if (!finished_[i] && error_.ok()) {
      const Chunk& chunk = chunks_[i];
      error_ = absl::DeadlineExceededError(absl::StrCat(
          Describe(chunk), " on shard ", chunk.shard, " at ",
          context_.conns->server(chunk.shard).address,
          ": no answer within the deadline (the server stopped reading)"));
    }
  }
  // Callbacks already past the abandoned_ check may still be writing to
  // the caller's buffer or launching calls; let them finish first. Then the
  // calls still in flight become the connections' abandoned calls.
  mu_.Await(absl::Condition(
      +[](int* busy) { return *busy == 0; }, &callbacks_busy_));
  context_.conns->AddAbandoned(inflight_);
}

void ChunkedOp::TakeLaunchesLocked(std::vector<size_t>* launch) {
  while (error_.ok() && next_ < chunks_.size() && inflight_ < window_) {
    const absl::Time deadline = absl::Now() + context_.timeout;
    deadlines_[next_] = deadline;
    latest_deadline_ = std::max(latest_deadline_, deadline);
    launch->push_back(next_++);
    ++inflight_;
  }
}

std::string ChunkedOp::Describe(const Chunk& chunk) const {
  return absl::StrCat(NamesOf(kind()).name, " of '", context_.table, "' keys [",
                      chunk.keys.begin, ", ", chunk.keys.end, ")");
}

void ChunkedOp::Launch(size_t index) {
  Prepare(index);
  Send(index);
}

void ChunkedOp::Prepare(size_t index) {
  const Chunk& chunk = chunks_[index];
  calls_[index] = std::make_unique<Call>();
  started_[index] = absl::Now();
  Call& call = *calls_[index];
  call.context.set_deadline(absl::ToChronoTime(deadlines_[index]));
  context_.conns->Authorize(&call.context);
  if (MayUseMemory()) {
    if (MemorySlots* memory = context_.conns->Memory(chunk.shard)) {
      call.slot = memory->Acquire(chunk.keys.size() * sizeof(float));
    }
  }
  EncodeRequest(chunk, call.slot ? &*call.slot : nullptr, &call.request);
}

void ChunkedOp::Send(size_t index) {
  const Chunk& chunk = chunks_[index];
  ServerConn& server = context_.conns->server(chunk.shard);
  Call& call = *calls_[index];
  // Counted as sent, not as encoded: a push refused before sending sent
  // nothing. (A pull's traffic is its replies, counted as they arrive.)
  if (kind() != OpKind::kPull) {
    context_.conns->CountPushBytes(call.request.Length());
    if (call.slot.has_value()) {
      context_.conns->CountMemoryPushBytes(chunk.keys.size() * sizeof(float));
    }
  }
  // The callback owns a reference: a call outliving Run() keeps its
  // context alive. gRPC holds its own reference to the call while it runs
  // the callback, so the op (and its contexts) may be freed from there.
  server.bulk_stubs[chunk.channel]->UnaryCall(
      &call.context, NamesOf(kind()).method, grpc::StubOptions(), &call.request,
      &call.response, [self = shared_from_this(), index](grpc::Status status) {
        self->OnDone(index, status);
      });
}

absl::Status ChunkedOp::Outcome(size_t index, const grpc::Status& status) {
  const Chunk& chunk = chunks_[index];
  const ClientOptions& options = context_.conns->options();
  const Call& call = *calls_[index];
  const absl::Time now = absl::Now();
  if (options.tracer != nullptr) {
    options.tracer->Record(NamesOf(kind()).span, "client", started_[index], now,
                           "shard", chunk.shard);
  }
  if (options.metrics != nullptr) {
    // A PushPull counts as a push: its gradient is what makes it.
    options.metrics->RecordCall(kind() == OpKind::kPull
                                    ? ClientMetrics::Method::kPull
                                    : ClientMetrics::Method::kPush,
                                chunk.shard, status.ok(), call.request.Length(),
                                call.response.Length(), now - started_[index]);
  }
  const ServerConn& server = context_.conns->server(chunk.shard);
  if (!status.ok())
    return server.Annotate(Describe(chunk), chunk.shard, status);
  absl::Status taken =
      TakeReply(chunk, call.slot ? &*call.slot : nullptr, call.response);
  if (!taken.ok()) return server.Annotate(Describe(chunk), chunk.shard, taken);
  return absl::OkStatus();
}

void ChunkedOp::ReleaseSlot(size_t index, bool ok) {
  const std::optional<MemorySlot>& slot = calls_[index]->slot;
  if (slot.has_value() && slot->owner->Release(*slot, ok)) {
    context_.conns->ForgetMemory(chunks_[index].shard, slot->owner,
                                 "failed calls left half its slots retired");
  }
}

// Each call's context is destroyed here, in its own completion callback
// (gRPC keeps its own reference to the call meanwhile), while the Client
// is known to be alive: a context holds a channel reference, and the last
// reference to a channel must not be dropped on one of gRPC's callback
// threads, which the channel's teardown joins.
void ChunkedOp::OnDone(size_t index, const grpc::Status& status) {
  bool abandoned;
  {
    absl::MutexLock lock(&mu_);
    abandoned = abandoned_;
    if (abandoned) {
      --inflight_;
    } else {
      ++callbacks_busy_;
    }
  }
  if (abandoned) {
    // Run() has returned: the caller's buffers may be gone; the
    // connections wait for their abandoned calls before they close.
    ReleaseSlot(index, false);
    calls_[index].reset();
    context_.conns->AbandonedDone();
    return;
  }
  const absl::Status result = Outcome(index, status);
  const std::optional<MemorySlot>& slot = calls_[index]->slot;
  // The server restarted and no longer knows the segment (its answer to
  // that alone): the next call attaches again.
  const bool memory_lost =
      slot.has_value() &&
      status.error_code() == grpc::StatusCode::FAILED_PRECONDITION;
  if (memory_lost) {
    context_.conns->ForgetMemory(chunks_[index].shard, slot->owner,
                                 "the server no longer knows it");
  }
  ReleaseSlot(index, result.ok());
  calls_[index].reset();
  std::vector<size_t> launch;
  {
    absl::MutexLock lock(&mu_);
    --inflight_;
    finished_[index] = true;
    succeeded_[index] = result.ok();
    memory_lost_ = memory_lost_ || memory_lost;
    if (!result.ok() && error_.ok()) error_ = result;
    TakeLaunchesLocked(&launch);
  }
  for (size_t i : launch) Launch(i);
  absl::MutexLock lock(&mu_);
  --callbacks_busy_;
}

}  // namespace ps
