#include "ps/server/mapped_segments.h"

#include "absl/strings/str_cat.h"

namespace ps {
namespace {

constexpr uint64_t kSliceAlignment = 64;

}  // namespace

absl::StatusOr<uint64_t> MappedSegments::Attach(
    const shardps::AttachMemoryRequest& request) {
  {
    absl::MutexLock lock(&mu_);
    if (segments_.size() >= static_cast<size_t>(limits_.max_segments) ||
        request.bytes() > limits_.max_bytes - bytes_) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "this server has ", segments_.size(), " shared memory segments of ",
          bytes_, " bytes mapped; another of ", request.bytes(),
          " would pass its limit of ", limits_.max_segments, " or ",
          limits_.max_bytes, " bytes"));
    }
  }
  // Opened outside the lock: it touches the file system.
  absl::StatusOr<std::unique_ptr<SharedSegment>> opened =
      SharedSegment::Open(request.name(), request.bytes(), request.nonce());
  if (!opened.ok()) return opened.status();
  absl::MutexLock lock(&mu_);
  if (segments_.size() >= static_cast<size_t>(limits_.max_segments) ||
      request.bytes() > limits_.max_bytes - bytes_) {
    return absl::ResourceExhaustedError(
        "this server's shared memory limit was reached meanwhile");
  }
  uint64_t id = 0;
  while (id == 0 || segments_.contains(id)) id = ids_();
  bytes_ += request.bytes();
  segments_.emplace(id, std::move(*opened));
  return id;
}

absl::Status MappedSegments::Detach(uint64_t segment) {
  absl::MutexLock lock(&mu_);
  auto it = segments_.find(segment);
  if (it == segments_.end()) {
    return absl::NotFoundError(
        absl::StrCat("no shared memory segment ", segment, " is attached"));
  }
  bytes_ -= it->second->size();
  segments_.erase(it);
  return absl::OkStatus();
}

absl::StatusOr<MemoryView> MappedSegments::Find(
    const shardps::MemorySlice& slice, uint64_t bytes) const {
  std::shared_ptr<const SharedSegment> segment;
  {
    absl::MutexLock lock(&mu_);
    auto it = segments_.find(slice.segment());
    if (it == segments_.end()) {
      return absl::NotFoundError(absl::StrCat("no shared memory segment ",
                                              slice.segment(), " is attached"));
    }
    segment = it->second;
  }
  const uint64_t size = segment->size();
  if (slice.offset() % kSliceAlignment != 0 ||
      slice.offset() < SharedSegment::kHeaderBytes || slice.offset() > size ||
      bytes > size - slice.offset()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shared memory slice of ", bytes, " bytes at offset ", slice.offset(),
        " does not fit segment ", slice.segment(), " (", size,
        " bytes, slices at multiples of ", kSliceAlignment, " from ",
        SharedSegment::kHeaderBytes, ")"));
  }
  char* data = segment->data() + slice.offset();
  return MemoryView{std::move(segment), data};
}

int MappedSegments::size() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(segments_.size());
}

}  // namespace ps
