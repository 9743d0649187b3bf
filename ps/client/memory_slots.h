// Internal to ps::Client: its shared memory at one same-host server
// (AttachMemory, proto/shardps.proto), cut into equal slots. A chunk call
// whose values fit takes a slot for its life: the gradient is written
// there before the call, and the server writes a pull's values there
// before it answers.
//
// A slot goes back to the free list only after its call ended OK, when the
// server is known to be done with it. A call that failed may still be read
// or written by the server later (a deadline ends the call here, not
// there), so its slot is retired. Once half the slots are retired the
// client attaches a fresh segment (Connections::ForgetMemory) and lets
// this one go (CloseIfIdle) when no call holds its slots: the server keeps its
// own mapping for as long as a late handler needs it, so nothing the
// client uses can be touched then.
//
// Thread-safety: all methods may be called concurrently.
#ifndef SHARDPS_PS_CLIENT_MEMORY_SLOTS_H_
#define SHARDPS_PS_CLIENT_MEMORY_SLOTS_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/shardps.grpc.pb.h"
#include "ps/wire/shared_segment.h"

namespace ps {

class Connections;
struct ClientOptions;
class MemorySlots;

struct MemorySlot {
  MemorySlots* owner;
  int index;
  char* data;
  shardps::MemorySlice slice;  // where the server finds it
};

class MemorySlots {
 public:
  // Creates a segment of `slots` slots of `slot_bytes` (a multiple of 64)
  // and attaches it to the server behind `stub` within `timeout`; the
  // server's refusal as it answered (see AttachMemoryRequest).
  static absl::StatusOr<std::unique_ptr<MemorySlots>> Attach(
      shardps::ParameterServer::Stub& stub, const Connections& conns,
      size_t slot_bytes, int slots, absl::Duration timeout);
  // Detaches the segment from the server (briefly; a server that is gone
  // has unmapped it anyway) and unmaps it here.
  ~MemorySlots();
  MemorySlots(const MemorySlots&) = delete;
  MemorySlots& operator=(const MemorySlots&) = delete;

  // A free slot for `bytes` bytes; none when they do not fit a slot or
  // every slot is taken.
  std::optional<MemorySlot> Acquire(size_t bytes);
  // Gives the slot back once its call ended; `reusable` only when it ended
  // OK. True for the release that retires half the slots: the segment is
  // worn out, worth replacing.
  bool Release(const MemorySlot& slot, bool reusable);

  // When no call holds a slot: detaches the segment from the server and
  // unmaps it here, after which Acquire finds no slot; true if it did (or
  // had before).
  bool CloseIfIdle();
  bool closed() const;

 private:
  MemorySlots(shardps::ParameterServer::Stub& stub, const Connections& conns,
              std::unique_ptr<SharedSegment> segment, uint64_t id,
              size_t slot_bytes, int slots);

  shardps::ParameterServer::Stub& stub_;
  const Connections& conns_;
  void Detach();

  // Read without mu_ only by the holder of a slot; reset by CloseIfIdle
  // when there is none.
  std::unique_ptr<SharedSegment> segment_;
  const uint64_t id_;
  const size_t slot_bytes_;
  const int slots_;
  mutable absl::Mutex mu_;
  std::vector<int> free_ ABSL_GUARDED_BY(mu_);
  int retired_ ABSL_GUARDED_BY(mu_) = 0;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

// Whether a push's values may travel in shared memory under `options`:
// float32 gradients, and float32 answers when it is a PushPull
// (`answered`); never an Assign.
bool PushMayUseMemory(const ClientOptions& options, bool assign, bool answered);

}  // namespace ps

#endif  // SHARDPS_PS_CLIENT_MEMORY_SLOTS_H_
