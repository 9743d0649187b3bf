// Internal to ps::Client: a Push's or a PushPull's chunk calls
// (ps/client/chunked_op.h). Each chunk's gradient is encoded once into a
// reused buffer that gRPC sends from, with the message header written just
// in front of it (float32 values are checked for NaN and Inf in that same
// copy); a PushPull's reply values are decoded into the caller's
// buffer at the chunk's place, as a Pull's.
//
// Thread-safety: as ChunkedOp.
#ifndef SHARDPS_PS_CLIENT_PUSH_OP_H_
#define SHARDPS_PS_CLIENT_PUSH_OP_H_

#include <atomic>
#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "ps/client/chunked_op.h"
#include "ps/wire/float_pieces.h"

namespace ps {

// Whether every value of `runs` is finite; many are checked by two threads.
bool AllFiniteInParallel(absl::Span<const UnalignedFloats> runs);

// What makes a push's pieces unique on the servers, and its learning rate
// scale (PushRequest fields).
struct PushTag {
  uint64_t session = 0;
  uint64_t sequence = 0;
  uint64_t acked_below = 0;
  float lr_scale = 1.0f;
};

class PushOp final : public ChunkedOp {
 public:
  // Whether an op checks its own gradient for NaN and Inf (float32 values,
  // which it copies anyway: the first calls' as it copies them, the rest
  // before any call is sent). The caller checks any other push before it
  // encodes it.
  static bool ChecksGradient(const ClientOptions& options, bool assign) {
    return assign || options.push_encoding == shardps::FLOAT32;
  }

  // The gradient of keys [base_key, ...) of context.table is grad[0, ...).
  // ONEBIT pushes send `encoded` instead, every chunk's encoding at its
  // chunk's encoded_offset (encoded once, before the first attempt: the
  // encoding updates the residual, so a retry must send the same bytes).
  // With `out`, the calls are PushPulls whose values for keys [base_key,
  // ...) go to out[0, ...), which may be grad itself: a chunk's reply
  // lands only where that chunk's gradient was read from, after it was.
  // An `assign` op sends grad as the keys' new values (Assign calls,
  // always float32); it has no `out`.
  PushOp(OpContext context, std::vector<Chunk> chunks, const float* grad,
         const char* encoded, const PushTag& tag, float* out = nullptr,
         bool assign = false)
      : ChunkedOp(std::move(context), std::move(chunks)),
        grad_(grad),
        encoded_(encoded),
        tag_(tag),
        out_(out),
        assign_(assign),
        checks_gradient_(ChecksGradient(context_.conns->options(), assign)) {}

 private:
  OpKind kind() const override {
    return assign_           ? OpKind::kAssign
           : out_ == nullptr ? OpKind::kPush
                             : OpKind::kPushPull;
  }
  bool MayUseMemory() const override;
  void EncodeRequest(const Chunk& chunk, const MemorySlot* slot,
                     grpc::ByteBuffer* request) override;
  absl::Status TakeReply(const Chunk& chunk, const MemorySlot* slot,
                         const grpc::ByteBuffer& reply) override;
  absl::Status BeforeSending(size_t encoded) override;
  // Copies a chunk's float32 gradient to `to`, noting a non-finite value.
  void CopyGradient(const Chunk& chunk, char* to);
  // EncodeRequest of a chunk whose gradient goes into `slot`.
  void EncodeInMemory(const Chunk& chunk, const MemorySlot& slot,
                      grpc::ByteBuffer* request);
  // The request's fields but the gradient, into `header`.
  template <typename Request>
  void FillPushHeader(const Chunk& chunk, Request* header) const;

  const float* const grad_;
  const char* const encoded_;
  const PushTag tag_;
  float* const out_;
  const bool assign_;
  const bool checks_gradient_;
  // A copied chunk held NaN or Inf (written by whichever thread encodes).
  std::atomic<bool> saw_non_finite_{false};
};

}  // namespace ps

#endif  // SHARDPS_PS_CLIENT_PUSH_OP_H_
