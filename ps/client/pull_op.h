// Internal to ps::Client: a Pull's chunk calls (ps/client/chunked_op.h).
// Each reply's values, in the client's pull encoding, are decoded into the
// caller's buffer at the chunk's place.
//
// Thread-safety: as ChunkedOp.
#ifndef SHARDPS_PS_CLIENT_PULL_OP_H_
#define SHARDPS_PS_CLIENT_PULL_OP_H_

#include <vector>

#include "ps/client/chunked_op.h"

namespace ps {

class PullOp final : public ChunkedOp {
 public:
  // Keys [base_key, ...) of context.table go to out[0, ...).
  PullOp(OpContext context, std::vector<Chunk> chunks, float* out)
      : ChunkedOp(std::move(context), std::move(chunks)), out_(out) {}

 private:
  OpKind kind() const override { return OpKind::kPull; }
  bool MayUseMemory() const override;
  void EncodeRequest(const Chunk& chunk, const MemorySlot* slot,
                     grpc::ByteBuffer* request) override;
  absl::Status TakeReply(const Chunk& chunk, const MemorySlot* slot,
                         const grpc::ByteBuffer& reply) override;

  float* const out_;
};

// Decodes the `n` values of bulk field `values_field` of a Pull or PushPull
// reply, in the client's pull encoding, into out[0, n); DATA_LOSS when the
// reply holds another number of bytes.
absl::Status TakeValues(const grpc::ByteBuffer& reply, int values_field,
                        size_t n, Connections& conns, float* out);
// The same for a reply whose `n` values the server wrote into `slot`.
absl::Status TakeValuesFromMemory(const grpc::ByteBuffer& reply,
                                  int values_field, const MemorySlot& slot,
                                  size_t n, Connections& conns, float* out);

}  // namespace ps

#endif  // SHARDPS_PS_CLIENT_PULL_OP_H_
