#include "ps/client/push_op.h"

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "proto/shardps.pb.h"
#include "ps/client/client.h"
#include "ps/client/pull_op.h"
#include "ps/wire/float_pieces.h"
#include "ps/wire/value_codec.h"
#include "ps/wire/wire_codec.h"

namespace ps {
namespace {

constexpr int kPushGradientField = shardps::PushRequest::kGradientFieldNumber;
constexpr int kPushPullValuesField =
    shardps::PushPullResponse::kValuesFieldNumber;

}  // namespace

// Nothing is in flight meanwhile and the check is bound by memory
// bandwidth, so a large gradient is checked by two threads, halving the
// time the servers sit idle.
bool AllFiniteInParallel(absl::Span<const UnalignedFloats> runs) {
  constexpr size_t kSplitAbove = 1 << 18;  // 1 MiB: thread start-up is noise
  size_t n = 0;
  for (const UnalignedFloats& run : runs) n += run.size();
  const auto check = [](absl::Span<const UnalignedFloats> part) {
    for (const UnalignedFloats& run : part) {
      if (!AllFinite(run)) return false;
    }
    return true;
  };
  if (n < kSplitAbove) return check(runs);
  // The helper takes the runs that hold the first half of the values.
  size_t split = 0;
  for (size_t seen = 0; split < runs.size() && seen < n / 2; ++split) {
    seen += runs[split].size();
  }
  bool first_ok = true;
  std::thread helper([&] { first_ok = check(runs.subspan(0, split)); });
  const bool rest_ok = check(runs.subspan(split));
  helper.join();
  return first_ok && rest_ok;
}

template <typename Request>
void PushOp::FillPushHeader(const Chunk& chunk, Request* header) const {
  FillHeader(chunk, header);
  header->set_session(tag_.session);
  header->set_sequence(tag_.sequence);
  header->set_acked_below(tag_.acked_below);
  if (tag_.lr_scale != 1.0f) header->set_learning_rate_scale(tag_.lr_scale);
  header->set_encoding(context_.conns->options().push_encoding);
}

bool PushOp::MayUseMemory() const {
  return PushMayUseMemory(context_.conns->options(), assign_, out_ != nullptr);
}

absl::Status PushOp::TakeReply(const Chunk& chunk, const MemorySlot* slot,
                               const grpc::ByteBuffer& reply) {
  if (out_ == nullptr) return absl::OkStatus();
  float* out = out_ + (chunk.keys.begin - context_.base_key);
  if (slot != nullptr) {
    return TakeValuesFromMemory(reply, kPushPullValuesField, *slot,
                                chunk.keys.size(), *context_.conns, out);
  }
  return TakeValues(reply, kPushPullValuesField, chunk.keys.size(),
                    *context_.conns, out);
}

void PushOp::CopyGradient(const Chunk& chunk, char* to) {
  const UnalignedFloats from(grad_ + (chunk.keys.begin - context_.base_key),
                             chunk.keys.size());
  if (!CopyAndCheckFinite(from, to)) {
    saw_non_finite_.store(true, std::memory_order_relaxed);
  }
}

absl::Status PushOp::BeforeSending(size_t encoded) {
  if (!checks_gradient_) return absl::OkStatus();
  std::vector<UnalignedFloats> rest;
  for (size_t i = encoded; i < chunks().size(); ++i) {
    const KeyRange keys = chunks()[i].keys;
    rest.emplace_back(grad_ + (keys.begin - context_.base_key), keys.size());
  }
  if (!saw_non_finite_.load(std::memory_order_relaxed) &&
      AllFiniteInParallel(rest)) {
    return absl::OkStatus();
  }
  uint64_t begin = UINT64_MAX, end = 0;
  for (const Chunk& chunk : chunks()) {
    begin = std::min(begin, chunk.keys.begin);
    end = std::max(end, chunk.keys.end);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      assign_ ? "values" : "gradient", " for '", context_.table, "' keys [",
      begin, ", ", end, ") contains NaN or Inf; nothing was sent"));
}

void PushOp::EncodeInMemory(const Chunk& chunk, const MemorySlot& slot,
                            grpc::ByteBuffer* request) {
  CopyGradient(chunk, slot.data);
  if (out_ == nullptr) {
    shardps::PushRequest push;
    FillPushHeader(chunk, &push);
    *push.mutable_memory() = slot.slice;
    *request = SerializeSmallMessage(push);
  } else {
    shardps::PushPullRequest push;
    FillPushHeader(chunk, &push);
    push.set_pull_encoding(shardps::FLOAT32);
    *push.mutable_memory() = slot.slice;
    *request = SerializeSmallMessage(push);
  }
}

// The gradient is copied once, into a reused buffer that gRPC sends from and
// releases whenever it is done with it. Sending the caller's memory in
// place would tie its lifetime to the connection: a call that times out
// against a hung server leaves its bytes queued on the socket.
void PushOp::EncodeRequest(const Chunk& chunk, const MemorySlot* slot,
                           grpc::ByteBuffer* request) {
  if (slot != nullptr) return EncodeInMemory(chunk, *slot, request);
  const shardps::ValueEncoding encoding =
      assign_ ? shardps::FLOAT32 : context_.conns->options().push_encoding;
  const size_t n = chunk.keys.size();
  const size_t payload = EncodedBytes(encoding, n);
  PooledBuffer buffer =
      context_.conns->buffers().Acquire(kMaxWireHeaderBytes + payload);
  char* values = buffer.data() + kMaxWireHeaderBytes;
  const float* grad = grad_ + (chunk.keys.begin - context_.base_key);
  switch (encoding) {
    case shardps::FP16:
      EncodeFp16(grad, n, values);
      break;
    case shardps::BF16:
      EncodeBf16(grad, n, values);
      break;
    case shardps::ONEBIT:
      std::memcpy(values, encoded_ + chunk.encoded_offset, payload);
      break;
    default:
      CopyGradient(chunk, values);
  }
  size_t header_bytes;
  if (assign_) {
    shardps::AssignRequest header;
    header.set_job(context_.conns->options().job);
    header.set_table(context_.table);
    header.set_begin(chunk.keys.begin);
    header.set_end(chunk.keys.end);
    header.set_worker(context_.conns->options().worker);
    header.set_session(tag_.session);
    header.set_sequence(tag_.sequence);
    header.set_acked_below(tag_.acked_below);
    header_bytes =
        WriteHeaderBefore(header, kPushGradientField, payload, values);
  } else if (out_ == nullptr) {
    shardps::PushRequest header;
    FillPushHeader(chunk, &header);
    header_bytes =
        WriteHeaderBefore(header, kPushGradientField, payload, values);
  } else {
    shardps::PushPullRequest header;
    FillPushHeader(chunk, &header);
    header.set_pull_encoding(context_.conns->options().pull_encoding);
    header_bytes =
        WriteHeaderBefore(header, kPushGradientField, payload, values);
  }
  grpc::Slice slice = std::move(buffer).ToSlice(
      kMaxWireHeaderBytes - header_bytes, header_bytes + payload);
  *request = grpc::ByteBuffer(&slice, 1);
}

}  // namespace ps
