// ParameterService, continued: the rows of sparse tables (PullRows,
// PushRows; ps/table/sparse_table.h).
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ps/server/service.h"
#include "ps/wire/value_codec.h"

namespace ps {
namespace {

// Values one PullRows or PushRows call may carry (256 MiB of float32).
constexpr uint64_t kMaxRowFloatsPerCall = uint64_t{1} << 26;

absl::Status CheckRowEncoding(shardps::ValueEncoding encoding) {
  if (encoding != shardps::FLOAT32 && encoding != shardps::FP16 &&
      encoding != shardps::BF16) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rows travel as FLOAT32, FP16 or BF16, not encoding ", encoding));
  }
  return absl::OkStatus();
}

absl::Status CheckRowCount(uint64_t ids, uint32_t dim) {
  if (ids * dim > kMaxRowFloatsPerCall) {
    return absl::InvalidArgumentError(absl::StrCat(
        ids, " rows of dim ", dim, " are more than one call carries (",
        kMaxRowFloatsPerCall, " values): split them"));
  }
  return absl::OkStatus();
}

grpc::ByteBuffer PushRowsReply(const PushOutcome& outcome) {
  shardps::PushRowsResponse reply;
  reply.set_version(outcome.version);
  reply.set_duplicate(outcome.duplicate);
  return SerializeSmallMessage(reply);
}

}  // namespace

grpc::ServerUnaryReactor* ParameterService::PullRows(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  const absl::Time start = absl::Now();
  shardps::PullRowsRequest pull;
  absl::Status status = Admit(*context);
  if (status.ok() && replicator_ != nullptr) {
    status = replicator_->CheckPrimary();
  }
  if (status.ok()) status = ParseSmallMessage(*request, &pull);
  if (status.ok()) status = AnswerPullRows(pull, response);
  return Finish(context, RpcMethod::kPullRows, start, request->Length(),
                status.ok() ? response->Length() : 0, status);
}

absl::Status ParameterService::AnswerPullRows(
    const shardps::PullRowsRequest& pull, grpc::ByteBuffer* response) {
  if (absl::Status s = CheckRowEncoding(pull.encoding()); !s.ok()) return s;
  absl::StatusOr<SparseTable*> table =
      registry_.FindSparse(pull.job(), pull.table());
  if (!table.ok()) return table.status();
  const uint32_t dim = (*table)->options().rows.dim;
  if (absl::Status s = CheckRowCount(pull.ids_size(), dim); !s.ok()) return s;
  const uint64_t n = uint64_t{static_cast<uint64_t>(pull.ids_size())} * dim;
  const size_t payload = EncodedBytes(pull.encoding(), n);
  // As for dense pulls: the rows go once into a reused buffer that gRPC
  // sends from, the message's other fields written just in front of them.
  PooledBuffer buffer = pull_buffers_.Acquire(kMaxWireHeaderBytes + payload);
  char* values = buffer.data() + kMaxWireHeaderBytes;
  if (pull.encoding() == shardps::FLOAT32) {
    if (absl::Status s = (*table)->Pull(pull.ids(), pull.create(),
                                        reinterpret_cast<float*>(values));
        !s.ok()) {
      return s;
    }
  } else {
    PooledBuffer copy = scratch_buffers_.Acquire(n * sizeof(float));
    float* floats = reinterpret_cast<float*>(copy.data());
    if (absl::Status s = (*table)->Pull(pull.ids(), pull.create(), floats);
        !s.ok()) {
      return s;
    }
    if (pull.encoding() == shardps::FP16) {
      EncodeFp16(floats, n, values);
    } else {
      EncodeBf16(floats, n, values);
    }
  }
  shardps::PullRowsResponse header;
  header.set_encoding(pull.encoding());
  const size_t header_bytes = WriteHeaderBefore(
      header, shardps::PullRowsResponse::kValuesFieldNumber, payload, values);
  grpc::Slice slice = std::move(buffer).ToSlice(
      kMaxWireHeaderBytes - header_bytes, header_bytes + payload);
  *response = grpc::ByteBuffer(&slice, 1);
  bytes_pulled_.fetch_add(payload, std::memory_order_relaxed);
  return absl::OkStatus();
}

grpc::ServerUnaryReactor* ParameterService::PushRows(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  const absl::Time start = absl::Now();
  shardps::PushRowsRequest push;
  SplitMessage split;
  bool forwarded = false;
  absl::Status status = Admit(*context);
  if (status.ok()) status = CheckRole(*context, &forwarded);
  if (status.ok()) {
    // The gradients are read where they arrived; the other fields (the ids
    // among them) are parsed.
    status = SplitBulkField(
        *request, shardps::PushRowsRequest::kGradientsFieldNumber, &split);
    if (!status.ok()) {
      status = absl::InvalidArgumentError(
          absl::StrCat(push.GetTypeName(), ": ", status.message()));
    } else if (!push.ParseFromString(split.rest)) {
      status = absl::InvalidArgumentError(absl::StrCat(
          "malformed ", push.GetTypeName(),
          " (a field other than the gradients is not valid protobuf, or a "
          "string field is not UTF-8)"));
    }
  }
  PushOutcome outcome;
  if (status.ok()) {
    status = ApplyPushRows(push, split.bulk, forwarded ? context : nullptr,
                           response, &outcome);
  }
  if (status.ok() && replicator_ != nullptr && !forwarded) {
    // As ServeWrite: acknowledged once every replica has it.
    return FinishForwarded(context, RpcMethod::kPushRows, start, request,
                           response, outcome.position);
  }
  status = MaybeDropReply(std::move(status), "push");
  return Finish(context, RpcMethod::kPushRows, start, request->Length(),
                status.ok() ? response->Length() : 0, status);
}

absl::Status ParameterService::ApplyPushRows(
    const shardps::PushRowsRequest& push,
    absl::Span<const absl::string_view> gradients,
    const grpc::CallbackServerContext* forwarded, grpc::ByteBuffer* response,
    PushOutcome* outcome_out) {
  if (absl::Status s = CheckRowEncoding(push.encoding()); !s.ok()) return s;
  // Before the table is looked up, as for dense pushes: a replica still
  // catching up may not have it yet.
  bool in_copy = false;
  if (forwarded != nullptr) {
    if (absl::Status s = CheckForwardedCall(*forwarded, push.table(), &in_copy);
        !s.ok()) {
      return s;
    }
  }
  absl::StatusOr<SparseTable*> table =
      registry_.FindSparse(push.job(), push.table());
  if (!table.ok()) return table.status();
  if (in_copy) {
    // Applied before the primary copied its state to this replica.
    *outcome_out = PushOutcome{(*table)->version(), /*duplicate=*/true};
    *response = PushRowsReply(*outcome_out);
    return absl::OkStatus();
  }
  const uint32_t dim = (*table)->options().rows.dim;
  if (absl::Status s = CheckRowCount(push.ids_size(), dim); !s.ok()) return s;
  const uint64_t n = uint64_t{static_cast<uint64_t>(push.ids_size())} * dim;
  const size_t want = EncodedBytes(push.encoding(), n);
  size_t got = 0;
  for (absl::string_view piece : gradients) got += piece.size();
  if (got != want) {
    return absl::InvalidArgumentError(
        absl::StrCat(push.ids_size(), " rows of dim ", dim, " need ", want,
                     " gradient bytes in this encoding, got ", got));
  }
  PooledBuffer gathered, decoded;
  const absl::string_view in =
      Contiguous(gradients, scratch_buffers_, &gathered);
  UnalignedFloats grads(in.data(), n);
  if (push.encoding() != shardps::FLOAT32) {
    decoded = scratch_buffers_.Acquire(n * sizeof(float));
    float* floats = reinterpret_cast<float*>(decoded.data());
    if (absl::Status s = DecodeValues(push.encoding(), in.data(), n, floats);
        !s.ok()) {
      return s;
    }
    grads = UnalignedFloats(floats, n);
  }
  SparsePush args;
  args.id =
      PushId{push.worker(), push.session(), push.sequence(), push.piece()};
  args.acked_below = push.acked_below();
  args.ids = push.ids();
  args.grads = grads;
  args.lr_scale =
      push.has_learning_rate_scale() ? push.learning_rate_scale() : 1.0f;
  absl::StatusOr<PushOutcome> outcome = (*table)->Push(args);
  if (!outcome.ok()) return outcome.status();
  if (!outcome->duplicate) {
    bytes_pushed_.fetch_add(got, std::memory_order_relaxed);
  }
  *outcome_out = *outcome;
  *response = PushRowsReply(*outcome);
  return absl::OkStatus();
}

}  // namespace ps
