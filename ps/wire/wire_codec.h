// Hand encoding of the two bulk messages, PullResponse and PushRequest, over
// gRPC slices, byte-for-byte as protobuf encodes them (proto/shardps.proto):
// the float payload travels as its own slice, neither copied into nor parsed
// out of a std::string. The small fields around it still go through the
// generated protobuf classes.
//
// Thread-safety: free functions without shared state.
#ifndef SHARDPS_PS_WIRE_WIRE_CODEC_H_
#define SHARDPS_PS_WIRE_WIRE_CODEC_H_

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "google/protobuf/message_lite.h"
#include "ps/wire/buffer_pool.h"

namespace ps {

// Room reserved in front of a payload for the encoded message around it.
// Job and table names are at most 128 bytes each, so headers stay below it.
constexpr size_t kMaxWireHeaderBytes = 512;

// A message split into its bulk `bytes` field, as pieces pointing into the
// received slices, and every other field re-encoded as a small protobuf.
struct SplitMessage {
  std::vector<grpc::Slice> slices;  // keeps `bulk` alive
  std::vector<absl::string_view> bulk;
  std::string rest;
};

// Walks the protobuf encoding in `buffer`, putting the length-delimited field
// `bulk_field` into out->bulk and all other fields into out->rest.
// INVALID_ARGUMENT names the byte offset of malformed input.
absl::Status SplitBulkField(const grpc::ByteBuffer& buffer, int bulk_field,
                            SplitMessage* out);

// Parses a small protobuf message from a buffer.
absl::Status ParseSmallMessage(const grpc::ByteBuffer& buffer,
                               google::protobuf::MessageLite* message);

// Serializes a small protobuf message into a one-slice buffer.
grpc::ByteBuffer SerializeSmallMessage(
    const google::protobuf::MessageLite& message);

// Writes, ending right before `payload_start`, the encoding of `fields`
// followed by the tag and length of bytes field `bulk_field` holding
// `payload_bytes`; returns the header's length. At most kMaxWireHeaderBytes
// bytes before payload_start are written; requires `fields` to leave
// `bulk_field` empty and to encode in less than that. The result matches
// protobuf's own encoding when `bulk_field` is the highest field number.
size_t WriteHeaderBefore(const google::protobuf::MessageLite& fields,
                         int bulk_field, size_t payload_bytes,
                         char* payload_start);

// The bytes of `pieces` as one contiguous run: the single piece itself, or
// (for several) a copy in a buffer from `pool`, held by *storage.
absl::string_view Contiguous(absl::Span<const absl::string_view> pieces,
                             BufferPool& pool, PooledBuffer* storage);

}  // namespace ps

#endif  // SHARDPS_PS_WIRE_WIRE_CODEC_H_
