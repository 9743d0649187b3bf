#include "ps/client/memory_slots.h"

#include <grpcpp/client_context.h>

#include "ps/client/client.h"
#include "ps/client/connections.h"
#include "ps/wire/grpc_status.h"

namespace ps {
namespace {

// How long a closing client waits for its Detach.
constexpr absl::Duration kDetachTimeout = absl::Milliseconds(250);

}  // namespace

absl::StatusOr<std::unique_ptr<MemorySlots>> MemorySlots::Attach(
    shardps::ParameterServer::Stub& stub, const Connections& conns,
    size_t slot_bytes, int slots, absl::Duration timeout) {
  absl::StatusOr<std::unique_ptr<SharedSegment>> segment =
      SharedSegment::Create(SharedSegment::kHeaderBytes + slot_bytes * slots);
  if (!segment.ok()) return segment.status();
  shardps::AttachMemoryRequest request;
  request.set_job(conns.options().job);
  request.set_name((*segment)->name());
  request.set_bytes((*segment)->size());
  request.set_nonce(std::string((*segment)->nonce()));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  conns.Authorize(&context);
  shardps::AttachMemoryResponse response;
  const grpc::Status status = stub.AttachMemory(&context, request, &response);
  // The server removed the name once it had the object; a refusal leaves
  // it to us.
  (*segment)->Unlink();
  if (!status.ok()) return FromGrpcStatus(status);
  return std::unique_ptr<MemorySlots>(new MemorySlots(
      stub, conns, *std::move(segment), response.segment(), slot_bytes, slots));
}

MemorySlots::MemorySlots(shardps::ParameterServer::Stub& stub,
                         const Connections& conns,
                         std::unique_ptr<SharedSegment> segment, uint64_t id,
                         size_t slot_bytes, int slots)
    : stub_(stub),
      conns_(conns),
      segment_(std::move(segment)),
      id_(id),
      slot_bytes_(slot_bytes),
      slots_(slots) {
  for (int i = slots - 1; i >= 0; --i) free_.push_back(i);
}

MemorySlots::~MemorySlots() {
  if (!closed()) Detach();
}

void MemorySlots::Detach() {
  shardps::DetachMemoryRequest request;
  request.set_job(conns_.options().job);
  request.set_segment(id_);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + kDetachTimeout));
  conns_.Authorize(&context);
  shardps::DetachMemoryResponse response;
  // Best effort: a server that is gone or slow unmaps it when it exits.
  (void)stub_.DetachMemory(&context, request, &response);
}

std::optional<MemorySlot> MemorySlots::Acquire(size_t bytes) {
  if (bytes > slot_bytes_) return std::nullopt;
  int index;
  {
    absl::MutexLock lock(&mu_);
    if (free_.empty()) return std::nullopt;
    index = free_.back();
    free_.pop_back();
  }
  const size_t offset = SharedSegment::kHeaderBytes + index * slot_bytes_;
  MemorySlot slot{this, index, segment_->data() + offset, {}};
  slot.slice.set_segment(id_);
  slot.slice.set_offset(offset);
  return slot;
}

bool MemorySlots::Release(const MemorySlot& slot, bool reusable) {
  absl::MutexLock lock(&mu_);
  if (reusable) {
    free_.push_back(slot.index);
    return false;
  }
  ++retired_;
  return retired_ == (slots_ + 1) / 2;
}

bool MemorySlots::CloseIfIdle() {
  {
    absl::MutexLock lock(&mu_);
    if (closed_) return true;
    if (static_cast<int>(free_.size()) + retired_ < slots_) return false;
    // No slot is held and, with none free, none can be taken.
    closed_ = true;
    free_.clear();
  }
  Detach();
  segment_.reset();
  return true;
}

bool MemorySlots::closed() const {
  absl::MutexLock lock(&mu_);
  return closed_;
}

bool PushMayUseMemory(const ClientOptions& options, bool assign,
                      bool answered) {
  return options.shared_memory && !assign &&
         options.push_encoding == shardps::FLOAT32 &&
         (!answered || options.pull_encoding == shardps::FLOAT32);
}

}  // namespace ps
