#include "ps/float_pieces.h"

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <cstring>

namespace ps {

bool AllFinite(const float* values, size_t n) {
  // Exponent bits all set means NaN or Inf. Written on the bit pattern (and
  // without an early exit) so the compiler vectorizes it.
  uint32_t bad = 0;
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &values[i], sizeof bits);
    bad |= static_cast<uint32_t>((bits & 0x7f800000u) == 0x7f800000u);
  }
  return bad == 0;
}

FloatPieces::FloatPieces(absl::Span<const absl::string_view> pieces)
    : pieces_(pieces) {
  for (absl::string_view p : pieces_) byte_size_ += p.size();
}

void FloatPieces::Read(float* out, size_t n) {
  size_t want = n * sizeof(float);
  assert(want <= remaining_bytes());
  char* dst = reinterpret_cast<char*>(out);
  while (want > 0) {
    const absl::string_view piece = pieces_[piece_];
    const size_t take = std::min(want, piece.size() - offset_);
    std::memcpy(dst, piece.data() + offset_, take);
    dst += take;
    want -= take;
    offset_ += take;
    consumed_ += take;
    if (offset_ == piece.size()) {
      ++piece_;
      offset_ = 0;
    }
  }
}

void FloatPieces::Reset() {
  piece_ = 0;
  offset_ = 0;
  consumed_ = 0;
}

bool FloatPieces::RestAllFinite() {
  alignas(64) float block[kBlockFloats];
  while (remaining_bytes() >= sizeof(float)) {
    const size_t n = std::min(kBlockFloats, remaining_bytes() / sizeof(float));
    Read(block, n);
    if (!AllFinite(block, n)) return false;
  }
  return true;
}

}  // namespace ps
