#include "ps/client/push_op.h"

#include <cstring>

#include "proto/shardps.pb.h"
#include "ps/client/client.h"
#include "ps/wire/value_codec.h"
#include "ps/wire/wire_codec.h"

namespace ps {
namespace {

constexpr int kPushGradientField = shardps::PushRequest::kGradientFieldNumber;

}  // namespace

// The gradient is copied once, into a reused buffer that gRPC sends from and
// releases whenever it is done with it. Sending the caller's memory in
// place would tie its lifetime to the connection: a call that times out
// against a hung server leaves its bytes queued on the socket.
void PushOp::EncodeRequest(const Chunk& chunk, grpc::ByteBuffer* request) {
  shardps::PushRequest header;
  FillHeader(chunk, &header);
  header.set_session(tag_.session);
  header.set_sequence(tag_.sequence);
  header.set_acked_below(tag_.acked_below);
  if (tag_.lr_scale != 1.0f) header.set_learning_rate_scale(tag_.lr_scale);
  const shardps::ValueEncoding encoding =
      context_.conns->options().push_encoding;
  header.set_encoding(encoding);
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
      std::memcpy(values, grad, payload);
  }
  const size_t header_bytes =
      WriteHeaderBefore(header, kPushGradientField, payload, values);
  grpc::Slice slice = std::move(buffer).ToSlice(
      kMaxWireHeaderBytes - header_bytes, header_bytes + payload);
  *request = grpc::ByteBuffer(&slice, 1);
  context_.conns->CountPushBytes(request->Length());
}

}  // namespace ps
