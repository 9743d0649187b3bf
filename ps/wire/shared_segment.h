// SharedSegment is one POSIX shared memory object mapped into this process:
// the same-host data path between a client and a server (the contract is
// AttachMemoryRequest's, proto/shardps.proto). The client Creates it, with
// a random name and nonce; the server Opens it by name, checks that it is
// the object the client described (owner, mode, size, nonce) and removes
// the name, so nothing is left in /dev/shm once both have it mapped, and
// the memory goes when the last mapping does.
//
// Create reserves every page up front (posix_fallocate), so a full
// /dev/shm (containers often give it 64 MiB) is an error here rather than
// a SIGBUS at the first write.
//
// Thread-safety: the mapping is fixed for the object's life; what is
// written to it is the users' business (a slice belongs to one call).
#ifndef SHARDPS_PS_WIRE_SHARED_SEGMENT_H_
#define SHARDPS_PS_WIRE_SHARED_SEGMENT_H_

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ps {

class SharedSegment {
 public:
  static constexpr size_t kNonceBytes = 32;
  // The nonce sits in the first bytes; slices start after this many.
  static constexpr size_t kHeaderBytes = 64;

  // A new object of `bytes` bytes (at least kHeaderBytes), named and
  // nonced at random, its name still in place for the server to open.
  static absl::StatusOr<std::unique_ptr<SharedSegment>> Create(size_t bytes);
  // The object a client created, checked against what it said; its name
  // is removed. INVALID_ARGUMENT for a name not of Create's form, NOT_FOUND
  // when there is no such object here (another host or IPC namespace),
  // PERMISSION_DENIED for another owner or mode, FAILED_PRECONDITION when
  // size or nonce differ.
  static absl::StatusOr<std::unique_ptr<SharedSegment>> Open(
      absl::string_view name, size_t bytes, absl::string_view nonce);

  ~SharedSegment();
  SharedSegment(const SharedSegment&) = delete;
  SharedSegment& operator=(const SharedSegment&) = delete;

  const std::string& name() const { return name_; }
  absl::string_view nonce() const;
  size_t size() const { return size_; }
  char* data() const { return data_; }
  // Removes the name if it is still there (the creator's clean-up when the
  // server never opened it).
  void Unlink();

 private:
  SharedSegment(std::string name, char* data, size_t size)
      : name_(std::move(name)), data_(data), size_(size) {}

  const std::string name_;
  char* const data_;
  const size_t size_;
};

}  // namespace ps

#endif  // SHARDPS_PS_WIRE_SHARED_SEGMENT_H_
