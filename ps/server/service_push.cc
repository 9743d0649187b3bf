// ParameterService, continued: taking in a push, of a Push call or of a
// PushPull (whose answer ps/server/service.cc then reads).
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "ps/server/service.h"
#include "ps/wire/float_pieces.h"
#include "ps/wire/value_codec.h"
#include "ps/wire/wire_codec.h"

namespace ps {
namespace {

constexpr int kPushGradientField = shardps::PushRequest::kGradientFieldNumber;
static_assert(shardps::PushPullRequest::kGradientFieldNumber ==
                  kPushGradientField,
              "a PushPullRequest must parse as a PushRequest");
static_assert(shardps::AssignRequest::kValuesFieldNumber == kPushGradientField,
              "an AssignRequest's values are split as a gradient is");

// Splits a push's gradient from its other fields, which are parsed into
// *push (a PushRequest or a PushPullRequest).
template <typename Request>
absl::Status ParsePushMessage(const grpc::ByteBuffer& request,
                              SplitMessage* split, Request* push) {
  if (absl::Status s = SplitBulkField(request, kPushGradientField, split);
      !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(push->GetTypeName(), ": ", s.message()));
  }
  if (!push->ParseFromString(split->rest)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "malformed ", push->GetTypeName(),
        " (a field other than the gradient is not valid protobuf, or a "
        "string field is not UTF-8)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ParameterService::DecodePush(
    shardps::ValueEncoding encoding, Table& table, KeyRange keys,
    absl::Span<const absl::string_view> bulk, size_t bulk_bytes,
    PooledBuffer* decoded) {
  if (!shardps::ValueEncoding_IsValid(encoding)) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown gradient encoding ", static_cast<int>(encoding)));
  }
  // Checked before any buffer is sized by the request.
  if (absl::Status s = table.CheckKeys(keys); !s.ok()) return s;
  const size_t n = keys.size();
  if (bulk_bytes != EncodedBytes(encoding, n)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "gradient has ", bulk_bytes, " bytes but key range [", keys.begin, ", ",
        keys.end, ") in ", EncodingName(encoding), " needs ",
        EncodedBytes(encoding, n)));
  }
  PooledBuffer gathered;
  const absl::string_view in = Contiguous(bulk, scratch_buffers_, &gathered);
  *decoded = scratch_buffers_.Acquire(n * sizeof(float));
  return DecodeValues(encoding, in.data(), n,
                      reinterpret_cast<float*>(decoded->data()));
}

absl::Status ParameterService::HandlePush(
    const grpc::ByteBuffer& request, grpc::ByteBuffer* response,
    const grpc::CallbackServerContext* forwarded, PushOutcome* outcome_out) {
  return HandleWrite<shardps::PushRequest, shardps::PushResponse>(
      request, response, forwarded, outcome_out);
}

absl::Status ParameterService::HandleAssign(
    const grpc::ByteBuffer& request, grpc::ByteBuffer* response,
    const grpc::CallbackServerContext* forwarded, PushOutcome* outcome_out) {
  return HandleWrite<shardps::AssignRequest, shardps::AssignResponse>(
      request, response, forwarded, outcome_out);
}

template <typename Request, typename Reply>
absl::Status ParameterService::HandleWrite(
    const grpc::ByteBuffer& request, grpc::ByteBuffer* response,
    const grpc::CallbackServerContext* forwarded, PushOutcome* outcome_out) {
  TraceSpan span(tracer_, "handle_push", "server");
  SplitMessage split;
  Request push;
  if (absl::Status s = ParsePushMessage(request, &split, &push); !s.ok()) {
    return s;
  }
  Table* table = nullptr;
  absl::StatusOr<PushOutcome> outcome =
      ApplyParsedPush(push, split, forwarded, &table);
  if (!outcome.ok()) return outcome.status();
  Reply reply;
  reply.set_version(outcome->version);
  reply.set_duplicate(outcome->duplicate);
  *response = SerializeSmallMessage(reply);
  if (outcome_out != nullptr) *outcome_out = *outcome;
  return absl::OkStatus();
}

template <typename Request>
absl::StatusOr<PushOutcome> ParameterService::ApplyParsedPush(
    const Request& push, const SplitMessage& split,
    const grpc::CallbackServerContext* forwarded, Table** table_out,
    MemoryView* memory_out) {
  // Before the table is looked up: a replica still catching up may not
  // have it yet, and says so (UNAVAILABLE, retried by the primary).
  bool in_copy = false;
  if (forwarded != nullptr) {
    if (absl::Status s = CheckForwardedCall(*forwarded, push.table(), &in_copy);
        !s.ok()) {
      return s;
    }
  }
  absl::StatusOr<Table*> table = registry_.Find(push.job(), push.table());
  if (!table.ok()) return table.status();
  Table& t = **table;
  *table_out = &t;
  // Applied before the primary copied its state to this replica.
  if (in_copy) return PushOutcome{t.version(), true, 0};
  const KeyRange keys{push.begin(), push.end()};
  size_t wire_bytes = 0;
  for (absl::string_view piece : split.bulk) wire_bytes += piece.size();
  PushArgs args;
  args.worker = push.worker();
  args.keys = keys;
  args.session = push.session();
  args.sequence = push.sequence();
  args.acked_below = push.acked_below();
  if constexpr (std::is_same_v<Request, shardps::AssignRequest>) {
    FloatPieces values(split.bulk);
    return t.Assign(args, values);
  } else {
    // An encoded gradient is decoded into a reused buffer; float32 is read
    // in place from the request.
    absl::Span<const absl::string_view> pieces = split.bulk;
    PooledBuffer decoded;
    absl::string_view decoded_view;
    size_t memory_bytes = 0;
    bool known_finite = false;
    if (push.has_memory()) {
      MemoryView view;
      if (absl::Status s =
              CopyPushFromMemory(push.memory(), push.encoding(), t, keys,
                                 wire_bytes, &decoded, &view);
          !s.ok()) {
        return s;
      }
      memory_bytes = keys.size() * sizeof(float);
      decoded_view = absl::string_view(decoded.data(), memory_bytes);
      known_finite = true;
      pieces = absl::MakeConstSpan(&decoded_view, 1);
      if (memory_out != nullptr) *memory_out = std::move(view);
    } else if (push.encoding() != shardps::FLOAT32) {
      if (absl::Status s = DecodePush(push.encoding(), t, keys, split.bulk,
                                      wire_bytes, &decoded);
          !s.ok()) {
        return s;
      }
      decoded_view = absl::string_view(decoded.data(), keys.size() * 4);
      pieces = absl::MakeConstSpan(&decoded_view, 1);
    }
    FloatPieces gradient(pieces);
    if (known_finite) gradient.MarkAllFinite();
    args.clock = push.clock();
    args.lr_scale =
        push.has_learning_rate_scale() ? push.learning_rate_scale() : 1.0f;
    absl::StatusOr<PushOutcome> outcome = t.ApplyPush(args, gradient);
    if (outcome.ok() && !outcome->duplicate) {
      bytes_pushed_.fetch_add(wire_bytes, std::memory_order_relaxed);
      memory_bytes_.fetch_add(memory_bytes, std::memory_order_relaxed);
    }
    return outcome;
  }
}

absl::StatusOr<ParameterService::ParsedPull> ParameterService::ApplyPushPull(
    const grpc::ByteBuffer& request) {
  TraceSpan span(tracer_, "handle_push", "server");
  SplitMessage split;
  shardps::PushPullRequest push;
  if (absl::Status s = ParsePushMessage(request, &split, &push); !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckPullEncoding(push.pull_encoding()); !s.ok()) {
    return s;
  }
  if (push.has_memory()) {
    if (absl::Status s = CheckMemoryEncoding(push.pull_encoding()); !s.ok()) {
      return s;
    }
  }
  Table* table = nullptr;
  MemoryView memory;
  absl::StatusOr<PushOutcome> outcome =
      ApplyParsedPush(push, split, nullptr, &table, &memory);
  if (!outcome.ok()) return outcome.status();
  ParsedPull pull{
      table,         {push.begin(), push.end()}, push.pull_encoding(),
      push.worker(), push.clock() + 1,           *outcome,
      std::nullopt};
  if (push.has_memory()) pull.memory = std::move(memory);
  return pull;
}

WaitingPull ParameterService::HandlePushPull(const grpc::ByteBuffer& request,
                                             grpc::ByteBuffer* response,
                                             PullDone done) {
  absl::StatusOr<ParsedPull> applied = ApplyPushPull(request);
  if (!applied.ok()) {
    std::move(done)(applied.status());
    return {};
  }
  return WaitThenAnswer(*applied, response, std::move(done));
}

}  // namespace ps
