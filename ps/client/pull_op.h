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
  bool is_push() const override { return false; }
  void EncodeRequest(const Chunk& chunk, grpc::ByteBuffer* request) override;
  absl::Status TakeReply(const Chunk& chunk,
                         const grpc::ByteBuffer& reply) override;

  float* const out_;
};

}  // namespace ps

#endif  // SHARDPS_PS_CLIENT_PULL_OP_H_
