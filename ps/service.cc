#include "ps/service.h"

#include "absl/strings/str_cat.h"
#include "ps/float_pieces.h"
#include "ps/grpc_status.h"
#include "ps/security.h"
#include "ps/wire_codec.h"

namespace ps {
namespace {

constexpr int kPullValuesField = shardps::PullResponse::kValuesFieldNumber;
constexpr int kPushGradientField = shardps::PushRequest::kGradientFieldNumber;

}  // namespace

absl::Status ParameterService::Admit(
    const grpc::CallbackServerContext& context) const {
  if (draining_.load(std::memory_order_acquire)) {
    return absl::UnavailableError("server is shutting down");
  }
  if (auth_token_.empty()) return absl::OkStatus();
  const auto& metadata = context.client_metadata();
  auto it = metadata.find(kAuthMetadataKey);
  if (it != metadata.end() &&
      ConstantTimeEquals(
          BearerValue(auth_token_),
          absl::string_view(it->second.data(), it->second.size()))) {
    return absl::OkStatus();
  }
  // Says nothing about the expected token.
  return absl::UnauthenticatedError(
      it == metadata.end() ? "this server needs the job's auth token"
                           : "wrong auth token");
}

bool ParameterService::DropReply() {
  if (drop_reply_fraction_ <= 0) return false;
  absl::MutexLock lock(&drop_mu_);
  return absl::Bernoulli(drop_random_, drop_reply_fraction_);
}

grpc::ServerUnaryReactor* ParameterService::Finish(
    grpc::CallbackServerContext* context, const absl::Status& status) {
  if (!status.ok()) rejected_requests_.fetch_add(1, std::memory_order_relaxed);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

grpc::ServerUnaryReactor* ParameterService::CreateTable(
    grpc::CallbackServerContext* context,
    const shardps::CreateTableRequest* request,
    shardps::CreateTableResponse* response) {
  if (absl::Status s = Admit(*context); !s.ok()) {
    return Finish(context, s);
  }
  bool created = false;
  absl::StatusOr<Table*> table = registry_.CreateTable(*request, &created);
  if (table.ok()) {
    response->set_begin((*table)->store->range().begin);
    response->set_end((*table)->store->range().end);
    response->set_created(created);
  }
  return Finish(context, table.status());
}

grpc::ServerUnaryReactor* ParameterService::Stats(
    grpc::CallbackServerContext* context, const shardps::StatsRequest* request,
    shardps::StatsResponse* response) {
  absl::Status status = Admit(*context);
  if (status.ok()) status = registry_.CheckJob(request->job());
  if (status.ok()) {
    registry_.FillStats(response);
    response->set_pull_requests(pull_requests_.load());
    response->set_push_requests(push_requests_.load());
    response->set_bytes_pulled(bytes_pulled_.load());
    response->set_bytes_pushed(bytes_pushed_.load());
    response->set_rejected_requests(rejected_requests_.load());
    response->set_duplicate_pushes(registry_.DuplicatePushes());
    if (checkpointer_ != nullptr) {
      response->set_checkpoints_written(checkpointer_->written());
    }
  }
  return Finish(context, status);
}

grpc::ServerUnaryReactor* ParameterService::Pull(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  pull_requests_.fetch_add(1, std::memory_order_relaxed);
  if (absl::Status s = Admit(*context); !s.ok()) {
    return Finish(context, s);
  }
  // A pull that must wait for other workers (sync, ssp) is answered later,
  // from the thread that releases it; the reactor stays open meanwhile.
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  HandlePull(*request, response, [this, reactor](absl::Status status) {
    if (status.ok() && DropReply()) {
      status = absl::UnavailableError("FAULT INJECTION: pull reply dropped");
    }
    if (!status.ok()) {
      rejected_requests_.fetch_add(1, std::memory_order_relaxed);
    }
    reactor->Finish(ToGrpcStatus(status));
  });
  return reactor;
}

grpc::ServerUnaryReactor* ParameterService::Push(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  push_requests_.fetch_add(1, std::memory_order_relaxed);
  if (absl::Status s = Admit(*context); !s.ok()) {
    return Finish(context, s);
  }
  absl::Status status = HandlePush(*request, response);
  if (status.ok() && DropReply()) {
    status = absl::UnavailableError("FAULT INJECTION: push reply dropped");
  }
  return Finish(context, status);
}

void ParameterService::HandlePull(const grpc::ByteBuffer& request,
                                  grpc::ByteBuffer* response, PullDone done) {
  shardps::PullRequest pull;
  if (absl::Status s = ParseSmallMessage(request, &pull); !s.ok()) {
    return std::move(done)(s);
  }
  absl::StatusOr<Table*> table = registry_.Find(pull.job(), pull.table());
  if (!table.ok()) return std::move(done)(table.status());
  const KeyRange keys{pull.begin(), pull.end()};
  if (absl::Status s = (*table)->store->CheckKeys(keys); !s.ok()) {
    return std::move(done)(s);
  }
  (*table)->consistency.Pull(
      pull.worker(), pull.clock(),
      [this, table = *table, keys, response,
       done = std::move(done)](absl::Status status) mutable {
        if (status.ok()) status = CopyPull(*table, keys, response);
        std::move(done)(std::move(status));
      });
}

absl::Status ParameterService::CopyPull(Table& table, KeyRange keys,
                                        grpc::ByteBuffer* response) {
  const size_t payload = keys.size() * sizeof(float);
  // Values are copied once, from the store straight into a reused buffer that
  // gRPC sends from, with the message header written just in front of them.
  PooledBuffer buffer = pull_buffers_.Acquire(kMaxWireHeaderBytes + payload);
  char* values = buffer.data() + kMaxWireHeaderBytes;
  absl::StatusOr<uint64_t> version =
      table.store->Pull(keys, reinterpret_cast<float*>(values));
  if (!version.ok()) return version.status();
  shardps::PullResponse header;
  header.set_version(*version);
  const size_t header_bytes =
      WriteHeaderBefore(header, kPullValuesField, payload, values);
  grpc::Slice slice = std::move(buffer).ToSlice(
      kMaxWireHeaderBytes - header_bytes, header_bytes + payload);
  *response = grpc::ByteBuffer(&slice, 1);
  bytes_pulled_.fetch_add(payload, std::memory_order_relaxed);
  return absl::OkStatus();
}

absl::Status ParameterService::HandlePush(const grpc::ByteBuffer& request,
                                          grpc::ByteBuffer* response) {
  SplitMessage split;
  if (absl::Status s = SplitBulkField(request, kPushGradientField, &split);
      !s.ok()) {
    return s;
  }
  shardps::PushRequest push;
  if (!push.ParseFromString(split.rest)) {
    return absl::InvalidArgumentError("malformed PushRequest fields");
  }
  absl::StatusOr<Table*> table = registry_.Find(push.job(), push.table());
  if (!table.ok()) return table.status();
  Table& t = **table;
  const KeyRange keys{push.begin(), push.end()};
  FloatPieces gradient(split.bulk);
  // Validate first: a rejected push must not even touch the ledger.
  if (absl::Status s = t.store->CheckPush(keys, gradient); !s.ok()) return s;
  const PushId id{push.worker(), push.session(), push.sequence(), keys.begin};
  shardps::PushResponse reply;
  {
    absl::ReaderMutexLock hold(&t.snapshot_mu);
    absl::StatusOr<Admission> admission =
        t.ledger.Admit(id, push.acked_below());
    if (!admission.ok()) return admission.status();
    if (admission->kind == Admission::kDuplicate) {
      reply.set_duplicate(true);
      reply.set_version(admission->version != 0 ? admission->version
                                                : t.store->version());
    } else {
      absl::StatusOr<uint64_t> version =
          t.consistency.Push(push.worker(), push.clock(), keys, gradient);
      if (!version.ok()) {
        t.ledger.Abort(id);
        return version.status();
      }
      t.ledger.Commit(id, *version);
      t.RecordClock(push.worker(), push.clock());
      reply.set_version(*version);
      bytes_pushed_.fetch_add(gradient.byte_size(), std::memory_order_relaxed);
    }
  }
  *response = SerializeSmallMessage(reply);
  return absl::OkStatus();
}

}  // namespace ps
