#include "ps/wire/float_pieces.h"

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <cstring>
#include <limits>

namespace ps {

PS_VECTOR_KERNEL Magnitudes CheckMagnitudes(UnalignedFloats values,
                                            float bound) {
  // Magnitudes compare as their bit patterns do (as int32, all >= 0), and
  // those of NaN and Inf are the largest. Two ORs and no early exit: the
  // compiler vectorizes it.
  int32_t bound_bits;
  std::memcpy(&bound_bits, &bound, sizeof bound_bits);
  bound_bits &= 0x7fffffff;
  int32_t not_finite = 0, above = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    const float v = values[i];
    int32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    bits &= 0x7fffffff;
    not_finite |= bits >= 0x7f800000;
    above |= bits > bound_bits;
  }
  return {not_finite == 0, above == 0};
}

PS_VECTOR_KERNEL bool CopyAndCheckFinite(UnalignedFloats values, char* to) {
  int32_t not_finite = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    const float v = values[i];
    int32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    std::memcpy(to + i * sizeof bits, &bits, sizeof bits);
    not_finite |= (bits & 0x7fffffff) >= 0x7f800000;
  }
  return not_finite == 0;
}

bool AllFinite(UnalignedFloats values) {
  return CheckMagnitudes(values, std::numeric_limits<float>::max()).finite;
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
  if (all_finite_) {
    piece_ = pieces_.size();
    offset_ = 0;
    consumed_ = byte_size_;
    return true;
  }
  bool finite = true;
  ForEachRun(remaining_bytes() / sizeof(float), [&finite](UnalignedFloats run) {
    finite = finite && AllFinite(run);
  });
  return finite;
}

}  // namespace ps
