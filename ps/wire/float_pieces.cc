#include "ps/wire/float_pieces.h"

#include <algorithm>
#include <cassert>
#include <cstdint>

namespace ps {

bool AllFinite(UnalignedFloats values) {
  // Exponent bits all set means NaN or Inf. Written on the bit pattern and
  // without an early exit so that the compiler vectorizes it.
  uint32_t bad = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    const float v = values[i];
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    bad |= static_cast<uint32_t>((bits & 0x7f800000u) == 0x7f800000u);
  }
  return bad == 0;
}

FloatPieces::FloatPieces(absl::Span<const absl::string_view> pieces)
    : pieces_(pieces) {
  for (absl::string_view p : pieces_) byte_size_ += p.size();
}

void FloatPieces::Advance(size_t bytes) {
  offset_ += bytes;
  consumed_ += bytes;
  if (offset_ == pieces_[piece_].size()) {
    ++piece_;
    offset_ = 0;
  }
}

void FloatPieces::Read(float* out, size_t n) {
  size_t want = n * sizeof(float);
  assert(want <= remaining_bytes());
  char* dst = reinterpret_cast<char*>(out);
  while (want > 0) {
    const absl::string_view here = current();
    const size_t take = std::min(want, here.size());
    std::memcpy(dst, here.data(), take);
    dst += take;
    want -= take;
    Advance(take);
  }
}

void FloatPieces::Reset() {
  piece_ = 0;
  offset_ = 0;
  consumed_ = 0;
}

bool FloatPieces::RestAllFinite() {
  bool finite = true;
  ForEachRun(remaining_bytes() / sizeof(float), [&finite](UnalignedFloats run) {
    finite = finite && AllFinite(run);
  });
  return finite;
}

}  // namespace ps
