// MappedSegments holds the shared memory segments that same-host clients
// attached to this server (AttachMemory, proto/shardps.proto), and checks
// every slice a call names against them.
//
// A client that dies without detaching leaves its segment mapped; the
// limits bound what such leftovers can hold, and a server at its limit
// refuses new segments (RESOURCE_EXHAUSTED), which sends those clients'
// values through the messages instead.
//
// Thread-safety: all methods may be called concurrently. A MemoryView
// keeps its segment mapped after a Detach until the view is gone.
#ifndef SHARDPS_PS_SERVER_MAPPED_SEGMENTS_H_
#define SHARDPS_PS_SERVER_MAPPED_SEGMENTS_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/random/random.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "proto/shardps.pb.h"
#include "ps/wire/shared_segment.h"

namespace ps {

struct MappedSegmentLimits {
  int max_segments = 256;
  uint64_t max_bytes = uint64_t{4} << 30;
};

// A checked slice of an attached segment.
struct MemoryView {
  std::shared_ptr<const SharedSegment> segment;  // keeps it mapped
  char* data = nullptr;
};

class MappedSegments {
 public:
  explicit MappedSegments(MappedSegmentLimits limits) : limits_(limits) {}
  MappedSegments(const MappedSegments&) = delete;
  MappedSegments& operator=(const MappedSegments&) = delete;

  // Opens and maps the client's segment (SharedSegment::Open's errors);
  // its id, random and never 0.
  absl::StatusOr<uint64_t> Attach(const shardps::AttachMemoryRequest& request);
  // NOT_FOUND when no such segment is attached.
  absl::Status Detach(uint64_t segment);
  // The `bytes` at `slice`: NOT_FOUND for an unknown segment,
  // INVALID_ARGUMENT for an offset that is not a multiple of 64 or a slice
  // that leaves the segment or overlaps its header.
  absl::StatusOr<MemoryView> Find(const shardps::MemorySlice& slice,
                                  uint64_t bytes) const;

  int size() const;

 private:
  const MappedSegmentLimits limits_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, std::shared_ptr<const SharedSegment>> segments_
      ABSL_GUARDED_BY(mu_);
  uint64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  absl::BitGen ids_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ps

#endif  // SHARDPS_PS_SERVER_MAPPED_SEGMENTS_H_
