// ParameterService, continued: same-host shared memory. A client attaches
// a segment once; its Pull, Push and PushPull chunks then name slices of it
// (ps/server/service.cc and service_push.cc read and write them).
#include "absl/strings/str_cat.h"
#include "ps/server/service.h"
#include "ps/wire/float_pieces.h"
#include "ps/wire/value_codec.h"

namespace ps {

grpc::ServerUnaryReactor* ParameterService::AttachMemory(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  const absl::Time start = absl::Now();
  shardps::AttachMemoryRequest attach;
  absl::Status status = Admit(*context);
  if (status.ok()) status = ParseSmallMessage(*request, &attach);
  if (status.ok()) status = registry_.CheckJob(attach.job());
  if (status.ok() && !shared_memory_) {
    status = absl::FailedPreconditionError(
        "this server takes no shared memory (--shared_memory=false)");
  }
  // A replica's push is forwarded as its message, which must hold the
  // values.
  if (status.ok() && replicator_ != nullptr) {
    status = absl::FailedPreconditionError(
        "a replicated server takes values in messages only");
  }
  if (status.ok()) {
    absl::StatusOr<uint64_t> segment = segments_.Attach(attach);
    if (segment.ok()) {
      shardps::AttachMemoryResponse reply;
      reply.set_segment(*segment);
      *response = SerializeSmallMessage(reply);
    } else {
      status = segment.status();
    }
  }
  return Finish(context, RpcMethod::kAttachMemory, start, request->Length(),
                status.ok() ? response->Length() : 0, status);
}

grpc::ServerUnaryReactor* ParameterService::DetachMemory(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  const absl::Time start = absl::Now();
  shardps::DetachMemoryRequest detach;
  absl::Status status = Admit(*context);
  if (status.ok()) status = ParseSmallMessage(*request, &detach);
  if (status.ok()) status = registry_.CheckJob(detach.job());
  if (status.ok()) status = segments_.Detach(detach.segment());
  if (status.ok())
    *response = SerializeSmallMessage(shardps::DetachMemoryResponse());
  return Finish(context, RpcMethod::kDetachMemory, start, request->Length(),
                status.ok() ? response->Length() : 0, status);
}

absl::Status ParameterService::CheckMemoryEncoding(
    shardps::ValueEncoding encoding) {
  if (encoding == shardps::FLOAT32) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "values in shared memory are float32, not ", EncodingName(encoding)));
}

absl::StatusOr<MemoryView> ParameterService::FindMemory(
    const shardps::MemorySlice& slice, shardps::ValueEncoding encoding,
    KeyRange keys, size_t message_bytes) {
  if (absl::Status s = CheckMemoryEncoding(encoding); !s.ok()) return s;
  if (message_bytes != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("a push names shared memory and also carries ",
                     message_bytes, " bytes of gradient"));
  }
  absl::StatusOr<MemoryView> view =
      segments_.Find(slice, keys.size() * sizeof(float));
  // A well-behaved client meets an unknown segment only when this server
  // restarted since it attached: it must attach again first. The code is
  // one no other failure of a call with a slice has (a wrong job is
  // refused at AttachMemory), so the client can tell.
  if (absl::IsNotFound(view.status())) {
    return absl::FailedPreconditionError(
        absl::StrCat(view.status().message(),
                     " here (the server restarted?): attach it again"));
  }
  return view;
}

absl::Status ParameterService::CopyPushFromMemory(
    const shardps::MemorySlice& slice, shardps::ValueEncoding encoding,
    Table& table, KeyRange keys, size_t message_bytes, PooledBuffer* copy,
    MemoryView* view) {
  if (absl::Status s = table.CheckKeys(keys); !s.ok()) return s;
  absl::StatusOr<MemoryView> found =
      FindMemory(slice, encoding, keys, message_bytes);
  if (!found.ok()) return found.status();
  // Copied out first: the check for non-finite values and the update must
  // see the same values, and the client's memory is the client's. The copy
  // is the check.
  *copy = scratch_buffers_.Acquire(keys.size() * sizeof(float));
  if (!CopyAndCheckFinite(UnalignedFloats(found->data, keys.size()),
                          copy->data())) {
    return absl::InvalidArgumentError(absl::StrCat("gradient for key range [",
                                                   keys.begin, ", ", keys.end,
                                                   ") contains NaN or Inf"));
  }
  *view = *std::move(found);
  return absl::OkStatus();
}

absl::Status ParameterService::CopyPullToMemory(const ParsedPull& pull,
                                                grpc::ByteBuffer* response) {
  absl::StatusOr<uint64_t> version =
      pull.table->Read(pull.keys, reinterpret_cast<float*>(pull.memory->data));
  if (!version.ok()) return version.status();
  if (pull.pushed.has_value()) {
    shardps::PushPullResponse reply;
    reply.set_version(*version);
    reply.set_duplicate(pull.pushed->duplicate);
    *response = SerializeSmallMessage(reply);
  } else {
    shardps::PullResponse reply;
    reply.set_version(*version);
    *response = SerializeSmallMessage(reply);
  }
  memory_bytes_.fetch_add(pull.keys.size() * sizeof(float),
                          std::memory_order_relaxed);
  return absl::OkStatus();
}

}  // namespace ps
