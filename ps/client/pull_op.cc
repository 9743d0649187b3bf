#include "ps/client/pull_op.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "proto/shardps.pb.h"
#include "ps/client/client.h"
#include "ps/wire/value_codec.h"
#include "ps/wire/wire_codec.h"

namespace ps {
namespace {

constexpr int kPullValuesField = shardps::PullResponse::kValuesFieldNumber;

}  // namespace

bool PullOp::MayUseMemory() const {
  return context_.conns->options().pull_encoding == shardps::FLOAT32;
}

void PullOp::EncodeRequest(const Chunk& chunk, const MemorySlot* slot,
                           grpc::ByteBuffer* request) {
  shardps::PullRequest pull;
  FillHeader(chunk, &pull);
  pull.set_encoding(context_.conns->options().pull_encoding);
  if (slot != nullptr) *pull.mutable_memory() = slot->slice;
  *request = SerializeSmallMessage(pull);
}

absl::Status PullOp::TakeReply(const Chunk& chunk, const MemorySlot* slot,
                               const grpc::ByteBuffer& reply) {
  float* out = out_ + (chunk.keys.begin - context_.base_key);
  if (slot != nullptr) {
    return TakeValuesFromMemory(reply, kPullValuesField, *slot,
                                chunk.keys.size(), *context_.conns, out);
  }
  return TakeValues(reply, kPullValuesField, chunk.keys.size(), *context_.conns,
                    out);
}

absl::Status TakeValuesFromMemory(const grpc::ByteBuffer& reply,
                                  int values_field, const MemorySlot& slot,
                                  size_t n, Connections& conns, float* out) {
  conns.CountPullBytes(reply.Length());
  SplitMessage split;
  if (absl::Status s = SplitBulkField(reply, values_field, &split); !s.ok()) {
    return s;
  }
  if (!split.bulk.empty()) {
    return absl::DataLossError(
        "server sent values in its reply to a call whose values go through "
        "shared memory");
  }
  std::memcpy(out, slot.data, n * sizeof(float));
  conns.CountMemoryPullBytes(n * sizeof(float));
  return absl::OkStatus();
}

absl::Status TakeValues(const grpc::ByteBuffer& reply, int values_field,
                        size_t n, Connections& conns, float* out) {
  conns.CountPullBytes(reply.Length());
  SplitMessage split;
  if (absl::Status s = SplitBulkField(reply, values_field, &split); !s.ok()) {
    return s;
  }
  size_t got = 0;
  for (absl::string_view piece : split.bulk) got += piece.size();
  const shardps::ValueEncoding encoding = conns.options().pull_encoding;
  const size_t want = EncodedBytes(encoding, n);
  if (got != want) {
    return absl::DataLossError(absl::StrCat("server sent ", got, " bytes of ",
                                            EncodingName(encoding),
                                            " values, expected ", want));
  }
  if (encoding == shardps::FLOAT32) {
    char* dst = reinterpret_cast<char*>(out);
    for (absl::string_view piece : split.bulk) {
      std::memcpy(dst, piece.data(), piece.size());
      dst += piece.size();
    }
    return absl::OkStatus();
  }
  // The 16-bit decoders read one contiguous run.
  PooledBuffer gathered;
  const absl::string_view in =
      Contiguous(split.bulk, conns.buffers(), &gathered);
  return DecodeValues(encoding, in.data(), n, out);
}

}  // namespace ps
