#include "ps/server/service.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "ps/base/build_version.h"
#include "ps/wire/grpc_status.h"
#include "ps/wire/protocol_version.h"
#include "ps/wire/security.h"
#include "ps/wire/table_spec.h"
#include "ps/wire/value_codec.h"
#include "ps/wire/wire_codec.h"

namespace ps {
namespace {

constexpr int kPullValuesField = shardps::PullResponse::kValuesFieldNumber;
constexpr int kPushPullValuesField =
    shardps::PushPullResponse::kValuesFieldNumber;

}  // namespace

absl::Status ParameterService::Admit(
    const grpc::CallbackServerContext& context) const {
  if (draining_.load(std::memory_order_acquire)) {
    return absl::UnavailableError("server is shutting down");
  }
  return CheckAuthorization(context.client_metadata(), auth_token_);
}

absl::Status ParameterService::CheckRole(
    const grpc::CallbackServerContext& context, bool* forwarded) const {
  *forwarded = false;
  if (replicator_ == nullptr) return absl::OkStatus();
  const auto& metadata = context.client_metadata();
  if (metadata.find(kEpochMetadataKey) == metadata.end()) {
    return replicator_->CheckPrimary();
  }
  *forwarded = true;
  return absl::OkStatus();
}

absl::Status ParameterService::CheckForwardedCall(
    const grpc::CallbackServerContext& context, absl::string_view table,
    bool* in_copy) const {
  const auto& metadata = context.client_metadata();
  if (absl::Status s = replicator_->CheckReplicationToken(metadata); !s.ok()) {
    return s;
  }
  auto text = [&](const char* key) {
    auto it = metadata.find(key);
    return it == metadata.end()
               ? absl::string_view("0")
               : absl::string_view(it->second.data(), it->second.size());
  };
  return replicator_->CheckForwarded(
      text(kEpochMetadataKey), text(kPositionMetadataKey), table, in_copy);
}

absl::Status ParameterService::MaybeDropReply(absl::Status status,
                                              absl::string_view what) {
  if (!status.ok() || drop_reply_fraction_ <= 0) return status;
  absl::MutexLock lock(&drop_mu_);
  if (!absl::Bernoulli(drop_random_, drop_reply_fraction_)) return status;
  return absl::UnavailableError(
      absl::StrCat("FAULT INJECTION: ", what, " reply dropped"));
}

void ParameterService::Record(RpcMethod method, absl::Time start,
                              size_t bytes_in, size_t bytes_out,
                              const absl::Status& status) {
  const absl::Duration latency = absl::Now() - start;
  MethodCounters& m = methods_[static_cast<int>(method)];
  m.requests.fetch_add(1, std::memory_order_relaxed);
  m.nanos.fetch_add(absl::ToInt64Nanoseconds(latency),
                    std::memory_order_relaxed);
  m.bytes_received.fetch_add(bytes_in, std::memory_order_relaxed);
  m.bytes_sent.fetch_add(bytes_out, std::memory_order_relaxed);
  if (!status.ok()) m.errors.fetch_add(1, std::memory_order_relaxed);
  if (metrics_ != nullptr) metrics_->RecordCall(method, status.code(), latency);
}

grpc::ServerUnaryReactor* ParameterService::Finish(
    grpc::CallbackServerContext* context, RpcMethod method, absl::Time start,
    size_t bytes_in, size_t bytes_out, const absl::Status& status) {
  Record(method, start, bytes_in, bytes_out, status);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

grpc::ServerUnaryReactor* ParameterService::CreateTable(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  const absl::Time start = absl::Now();
  shardps::CreateTableRequest create;
  shardps::CreateTableResponse reply;
  bool forwarded = false;
  absl::Status status = Admit(*context);
  if (status.ok()) status = CheckRole(*context, &forwarded);
  if (status.ok()) status = ParseSmallMessage(*request, &create);
  if (status.ok() && forwarded) {
    bool in_copy = false;  // a table creation has no position
    status = CheckForwardedCall(*context, create.table(), &in_copy);
  }
  if (status.ok() && replicator_ != nullptr &&
      create.consistency().mode() != shardps::CONSISTENCY_ASYNC &&
      create.consistency().straggler_policy() == shardps::STRAGGLER_DROP) {
    status = absl::FailedPreconditionError(
        "replicated servers (--etcd) do not take the straggler policy drop "
        "yet (a primary's decision to drop a worker is not forwarded): use "
        "fail");
  }
  if (status.ok() && IsSparse(create)) {
    bool created = false;
    absl::StatusOr<SparseTable*> table =
        registry_.CreateSparseTable(create, &created);
    if (table.ok()) {
      reply.set_created(created);
      *response = SerializeSmallMessage(reply);
    }
    status = table.status();
  } else if (status.ok()) {
    bool created = false;
    absl::StatusOr<Table*> table = registry_.CreateTable(create, &created);
    if (table.ok()) {
      reply.set_begin((*table)->range().begin);
      reply.set_end((*table)->range().end);
      reply.set_created(created);
      *response = SerializeSmallMessage(reply);
    }
    status = table.status();
  }
  if (status.ok() && replicator_ != nullptr && !forwarded) {
    return FinishForwarded(context, RpcMethod::kCreateTable, start, request,
                           response, 0);
  }
  return Finish(context, RpcMethod::kCreateTable, start, request->Length(),
                status.ok() ? response->Length() : 0, status);
}

grpc::ServerUnaryReactor* ParameterService::FinishForwarded(
    grpc::CallbackServerContext* context, RpcMethod method, absl::Time start,
    const grpc::ByteBuffer* request, grpc::ByteBuffer* response,
    uint64_t position) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  replicator_->Forward(
      RpcMethodName(method), request, position,
      [this, reactor, method, start, request, response](absl::Status status) {
        if (method != RpcMethod::kCreateTable) {
          status = MaybeDropReply(std::move(status), "push");
        }
        Record(method, start, request->Length(),
               status.ok() ? response->Length() : 0, status);
        reactor->Finish(ToGrpcStatus(status));
      });
  return reactor;
}

void ParameterService::FillStats(shardps::StatsResponse* response) {
  registry_.FillStats(response);
  response->set_bytes_pulled(bytes_pulled_.load());
  response->set_bytes_pushed(bytes_pushed_.load());
  response->set_duplicate_pushes(registry_.DuplicatePushes());
  if (checkpointer_ != nullptr) {
    response->set_checkpoints_written(checkpointer_->written());
  }
  uint64_t errors = 0;
  for (int i = 0; i < kNumRpcMethods; ++i) {
    const MethodCounters& m = methods_[i];
    shardps::MethodStats* out = response->add_methods();
    out->set_method(RpcMethodName(static_cast<RpcMethod>(i)));
    out->set_requests(m.requests.load());
    out->set_errors(m.errors.load());
    out->set_seconds(m.nanos.load() * 1e-9);
    out->set_bytes_received(m.bytes_received.load());
    out->set_bytes_sent(m.bytes_sent.load());
    // A refused AttachMemory is how a client learns that it is on another
    // host: the negotiation, not a bad request.
    if (i != static_cast<int>(RpcMethod::kAttachMemory)) {
      errors += out->errors();
    }
  }
  response->set_pull_requests(
      response->methods(static_cast<int>(RpcMethod::kPull)).requests());
  response->set_push_requests(
      response->methods(static_cast<int>(RpcMethod::kPush)).requests());
  response->set_push_pull_requests(
      response->methods(static_cast<int>(RpcMethod::kPushPull)).requests());
  response->set_rejected_requests(errors);
  response->set_uptime_seconds(absl::ToDoubleSeconds(absl::Now() - started_));
  response->set_protocol_version(kProtocolVersion);
  response->set_build_version(std::string(BuildVersion()));
  response->set_memory_segments(segments_.size());
  response->set_memory_bytes(memory_bytes_.load());
  if (replicator_ != nullptr) {
    response->set_role(replicator_->role());
    response->set_epoch(replicator_->epoch());
  }
}

grpc::ServerUnaryReactor* ParameterService::Stats(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  const absl::Time start = absl::Now();
  shardps::StatsRequest stats;
  absl::Status status = Admit(*context);
  if (status.ok()) status = ParseSmallMessage(*request, &stats);
  if (status.ok()) {
    status = CheckPeerProtocol("the client", stats.protocol_version(),
                               stats.build_version());
  }
  if (status.ok()) status = registry_.CheckJob(stats.job());
  if (status.ok()) {
    shardps::StatsResponse reply;
    FillStats(&reply);
    *response = SerializeSmallMessage(reply);
  }
  return Finish(context, RpcMethod::kStats, start, request->Length(),
                status.ok() ? response->Length() : 0, status);
}

grpc::ServerUnaryReactor* ParameterService::Pull(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return ServeRead(RpcMethod::kPull, context, request, response);
}

grpc::ServerUnaryReactor* ParameterService::PushPull(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return ServeRead(RpcMethod::kPushPull, context, request, response);
}

grpc::ServerUnaryReactor* ParameterService::ServeRead(
    RpcMethod method, grpc::CallbackServerContext* context,
    const grpc::ByteBuffer* request, grpc::ByteBuffer* response) {
  const absl::Time start = absl::Now();
  const size_t bytes_in = request->Length();
  absl::Status admitted = Admit(*context);
  if (admitted.ok() && replicator_ != nullptr) {
    admitted = replicator_->CheckPrimary();
  }
  if (!admitted.ok()) {
    return Finish(context, method, start, bytes_in, 0, admitted);
  }
  const bool push_pull = method == RpcMethod::kPushPull;
  const char* what = push_pull ? "push_pull" : "pull";
  absl::StatusOr<ParsedPull> read =
      push_pull ? ApplyPushPull(*request) : ParsePull(*request);
  // A PushPull's push reaches every replica before its answer is read.
  const bool forward = push_pull && replicator_ != nullptr;
  if (!read.ok() || (!forward && !read->table->pulls_may_wait())) {
    // The common case (async), answered here with gRPC's own reactor.
    absl::Status status =
        read.ok() ? AnswerPull(*read, response) : read.status();
    status = MaybeDropReply(std::move(status), what);
    return Finish(context, method, start, bytes_in,
                  status.ok() ? response->Length() : 0, status);
  }
  // One that may wait for other workers (sync, ssp) or for the replicas is
  // answered later, from the thread that releases it, or ended with its
  // call.
  auto* reactor = new WaitingPullReactor();
  PullDone done = [this, reactor, response, start, bytes_in, method,
                   what](absl::Status status) {
    status = MaybeDropReply(std::move(status), what);
    Record(method, start, bytes_in, status.ok() ? response->Length() : 0,
           status);
    reactor->Answer(ToGrpcStatus(status));
  };
  if (!forward) {
    reactor->Started(WaitThenAnswer(*read, response, std::move(done)));
    return reactor;
  }
  // The request parses as a PushRequest; a duplicate is forwarded too, as
  // Push does.
  replicator_->Forward(
      "Push", request, read->pushed->position,
      [this, reactor, pull = *read, response,
       done = std::move(done)](absl::Status status) mutable {
        if (!status.ok()) {
          std::move(done)(std::move(status));
          reactor->Started({});
          return;
        }
        reactor->Started(WaitThenAnswer(pull, response, std::move(done)));
      });
  return reactor;
}

grpc::ServerUnaryReactor* ParameterService::Push(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return ServeWrite(RpcMethod::kPush, context, request, response);
}

grpc::ServerUnaryReactor* ParameterService::Assign(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return ServeWrite(RpcMethod::kAssign, context, request, response);
}

grpc::ServerUnaryReactor* ParameterService::ServeWrite(
    RpcMethod method, grpc::CallbackServerContext* context,
    const grpc::ByteBuffer* request, grpc::ByteBuffer* response) {
  const absl::Time start = absl::Now();
  const size_t bytes_in = request->Length();
  bool forwarded = false;
  absl::Status status = Admit(*context);
  if (status.ok()) status = CheckRole(*context, &forwarded);
  if (!status.ok()) {
    return Finish(context, method, start, bytes_in, 0, status);
  }
  PushOutcome outcome;
  const grpc::CallbackServerContext* from = forwarded ? context : nullptr;
  status = method == RpcMethod::kAssign
               ? HandleAssign(*request, response, from, &outcome)
               : HandlePush(*request, response, from, &outcome);
  if (status.ok() && replicator_ != nullptr && !forwarded) {
    // Acknowledged once every replica has it; a duplicate is forwarded
    // too, in case its first arrival's forward had not finished.
    return FinishForwarded(context, method, start, request, response,
                           outcome.position);
  }
  status = MaybeDropReply(std::move(status), "push");
  return Finish(context, method, start, bytes_in,
                status.ok() ? response->Length() : 0, status);
}

absl::StatusOr<ParameterService::ParsedPull> ParameterService::ParsePull(
    const grpc::ByteBuffer& request) {
  shardps::PullRequest pull;
  if (absl::Status s = ParseSmallMessage(request, &pull); !s.ok()) return s;
  absl::StatusOr<Table*> table = registry_.Find(pull.job(), pull.table());
  if (!table.ok()) return table.status();
  const KeyRange keys{pull.begin(), pull.end()};
  if (absl::Status s = (*table)->CheckKeys(keys); !s.ok()) return s;
  if (absl::Status s = CheckPullEncoding(pull.encoding()); !s.ok()) return s;
  ParsedPull parsed{*table,       keys,         pull.encoding(), pull.worker(),
                    pull.clock(), std::nullopt, std::nullopt};
  if (pull.has_memory()) {
    absl::StatusOr<MemoryView> memory =
        FindMemory(pull.memory(), pull.encoding(), keys, 0);
    if (!memory.ok()) return memory.status();
    parsed.memory = *std::move(memory);
  }
  return parsed;
}

absl::Status ParameterService::AnswerPull(const ParsedPull& pull,
                                          grpc::ByteBuffer* response) {
  TraceSpan span(tracer_, "handle_pull", "server");
  return CopyPull(pull, response);
}

WaitingPull ParameterService::WaitThenAnswer(const ParsedPull& pull,
                                             grpc::ByteBuffer* response,
                                             PullDone done) {
  const uint64_t ticket =
      pull.table->WhenReadable(pull.worker, pull.clock,
                               [this, pull, response, done = std::move(done)](
                                   absl::Status status) mutable {
                                 if (status.ok())
                                   status = AnswerPull(pull, response);
                                 std::move(done)(std::move(status));
                               });
  if (ticket == 0) return {};
  return {pull.table, ticket};
}

WaitingPull ParameterService::HandlePull(const grpc::ByteBuffer& request,
                                         grpc::ByteBuffer* response,
                                         PullDone done) {
  absl::StatusOr<ParsedPull> pull = ParsePull(request);
  if (!pull.ok()) {
    std::move(done)(pull.status());
    return {};
  }
  return WaitThenAnswer(*pull, response, std::move(done));
}

absl::Status ParameterService::CopyPull(const ParsedPull& pull,
                                        grpc::ByteBuffer* response) {
  Table& table = *pull.table;
  const KeyRange keys = pull.keys;
  const shardps::ValueEncoding encoding = pull.encoding;
  const size_t n = keys.size();
  if (pull.memory.has_value()) return CopyPullToMemory(pull, response);
  const size_t payload = EncodedBytes(encoding, n);
  // Values are copied once, from the store straight into a reused buffer that
  // gRPC sends from, with the message header written just in front of them.
  PooledBuffer buffer = pull_buffers_.Acquire(kMaxWireHeaderBytes + payload);
  char* values = buffer.data() + kMaxWireHeaderBytes;
  absl::StatusOr<uint64_t> version;
  if (encoding == shardps::FLOAT32) {
    version = table.Read(keys, reinterpret_cast<float*>(values));
  } else {
    // Copied out under the stripe locks first, then encoded.
    PooledBuffer copy = scratch_buffers_.Acquire(n * sizeof(float));
    float* floats = reinterpret_cast<float*>(copy.data());
    version = table.Read(keys, floats);
    if (encoding == shardps::FP16) {
      EncodeFp16(floats, n, values);
    } else {
      EncodeBf16(floats, n, values);
    }
  }
  if (!version.ok()) return version.status();
  size_t header_bytes;
  if (pull.pushed.has_value()) {
    shardps::PushPullResponse header;
    header.set_version(*version);
    header.set_duplicate(pull.pushed->duplicate);
    header_bytes =
        WriteHeaderBefore(header, kPushPullValuesField, payload, values);
  } else {
    shardps::PullResponse header;
    header.set_version(*version);
    header_bytes = WriteHeaderBefore(header, kPullValuesField, payload, values);
  }
  grpc::Slice slice = std::move(buffer).ToSlice(
      kMaxWireHeaderBytes - header_bytes, header_bytes + payload);
  *response = grpc::ByteBuffer(&slice, 1);
  bytes_pulled_.fetch_add(payload, std::memory_order_relaxed);
  return absl::OkStatus();
}

}  // namespace ps
