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

}  // namespace

grpc::ServerUnaryReactor* ParameterService::PullRows(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  const absl::Time start = absl::Now();
  shardps::PullRowsRequest pull;
  absl::Status status = Admit(*context);
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
  shardps::PullRowsResponse reply;
  reply.set_encoding(pull.encoding());
  std::string* bytes = reply.mutable_values();
  bytes->resize(EncodedBytes(pull.encoding(), n));
  if (pull.encoding() == shardps::FLOAT32) {
    // The reply's own buffer (from operator new, so aligned for floats)
    // takes the rows: no copy.
    if (absl::Status s = (*table)->Pull(
            pull.ids(), pull.create(), reinterpret_cast<float*>(bytes->data()));
        !s.ok()) {
      return s;
    }
  } else {
    std::vector<float> values(n);
    if (absl::Status s =
            (*table)->Pull(pull.ids(), pull.create(), values.data());
        !s.ok()) {
      return s;
    }
    if (pull.encoding() == shardps::FP16) {
      EncodeFp16(values.data(), n, bytes->data());
    } else {
      EncodeBf16(values.data(), n, bytes->data());
    }
  }
  bytes_pulled_.fetch_add(bytes->size(), std::memory_order_relaxed);
  *response = SerializeSmallMessage(reply);
  return absl::OkStatus();
}

grpc::ServerUnaryReactor* ParameterService::PushRows(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  const absl::Time start = absl::Now();
  shardps::PushRowsRequest push;
  absl::Status status = Admit(*context);
  if (status.ok()) status = ParseSmallMessage(*request, &push);
  if (status.ok()) {
    status = MaybeDropReply(ApplyPushRows(push, response), "push");
  }
  return Finish(context, RpcMethod::kPushRows, start, request->Length(),
                status.ok() ? response->Length() : 0, status);
}

absl::Status ParameterService::ApplyPushRows(
    const shardps::PushRowsRequest& push, grpc::ByteBuffer* response) {
  if (absl::Status s = CheckRowEncoding(push.encoding()); !s.ok()) return s;
  absl::StatusOr<SparseTable*> table =
      registry_.FindSparse(push.job(), push.table());
  if (!table.ok()) return table.status();
  const uint32_t dim = (*table)->options().rows.dim;
  if (absl::Status s = CheckRowCount(push.ids_size(), dim); !s.ok()) return s;
  const uint64_t n = uint64_t{static_cast<uint64_t>(push.ids_size())} * dim;
  const size_t want = EncodedBytes(push.encoding(), n);
  if (push.gradients().size() != want) {
    return absl::InvalidArgumentError(absl::StrCat(
        push.ids_size(), " rows of dim ", dim, " need ", want,
        " gradient bytes in this encoding, got ", push.gradients().size()));
  }
  std::vector<float> decoded;
  UnalignedFloats grads(push.gradients().data(), n);
  if (push.encoding() != shardps::FLOAT32) {
    decoded.resize(n);
    if (absl::Status s = DecodeValues(push.encoding(), push.gradients().data(),
                                      n, decoded.data());
        !s.ok()) {
      return s;
    }
    grads = UnalignedFloats(decoded.data(), n);
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
    bytes_pushed_.fetch_add(push.gradients().size(), std::memory_order_relaxed);
  }
  shardps::PushRowsResponse reply;
  reply.set_version(outcome->version);
  reply.set_duplicate(outcome->duplicate);
  *response = SerializeSmallMessage(reply);
  return absl::OkStatus();
}

}  // namespace ps
