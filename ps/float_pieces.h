// FloatPieces reads a little-endian float32 array that arrived as several byte
// pieces (gRPC slices) whose boundaries and addresses need not be aligned to a
// float. Readers copy small blocks into caller buffers, so the payload is
// never gathered into one big contiguous copy.
//
// Thread-safety: a FloatPieces is a cursor; use one per thread. The pieces it
// points at must outlive it.
#ifndef SHARDPS_PS_FLOAT_PIECES_H_
#define SHARDPS_PS_FLOAT_PIECES_H_

#include <cstddef>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace ps {

// True when no value is NaN or +-Inf.
bool AllFinite(const float* values, size_t n);

class FloatPieces {
 public:
  // Floats moved per Read in the helpers below: 4 KiB stays in L1.
  static constexpr size_t kBlockFloats = 1024;

  explicit FloatPieces(absl::Span<const absl::string_view> pieces);

  size_t byte_size() const { return byte_size_; }
  size_t remaining_bytes() const { return byte_size_ - consumed_; }

  // Copies the next `n` floats into `out`; requires 4 * n <= remaining_bytes().
  void Read(float* out, size_t n);

  // Rewinds to the first byte.
  void Reset();

  // Reads everything left and reports whether all of it is finite.
  bool RestAllFinite();

 private:
  absl::Span<const absl::string_view> pieces_;
  size_t byte_size_ = 0;
  size_t piece_ = 0;   // index of the piece being read
  size_t offset_ = 0;  // bytes of pieces_[piece_] already read
  size_t consumed_ = 0;
};

}  // namespace ps

#endif  // SHARDPS_PS_FLOAT_PIECES_H_
