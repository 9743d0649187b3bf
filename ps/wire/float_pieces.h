// Float payloads as they arrive off the wire: little-endian float32 arrays in
// one or more byte pieces (gRPC slices) whose boundaries and addresses need
// not be aligned to a float. The kernels read them in place, through
// unaligned loads, so a pushed gradient is never copied on the server.
//
// Thread-safety: a FloatPieces is a cursor; use one per thread. The pieces it
// points at must outlive it.
#ifndef SHARDPS_PS_WIRE_FLOAT_PIECES_H_
#define SHARDPS_PS_WIRE_FLOAT_PIECES_H_

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

// Marks a loop over floats that the compiler builds twice, for AVX2 and
// for any x86-64, the loader picking one per process (GCC's function
// multi-versioning): these loops run at the speed of their vector width,
// and the baseline x86-64 has only 16-byte vectors.
#if defined(__x86_64__) && defined(__GNUC__)
#define PS_VECTOR_KERNEL __attribute__((target_clones("avx2", "default")))
#else
#define PS_VECTOR_KERNEL
#endif

namespace ps {

// n float32 values at any byte address.
class UnalignedFloats {
 public:
  UnalignedFloats(const char* bytes, size_t n) : bytes_(bytes), n_(n) {}
  UnalignedFloats(const float* values, size_t n)
      : bytes_(reinterpret_cast<const char*>(values)), n_(n) {}

  size_t size() const { return n_; }
  // The n floats from position `pos` on.
  UnalignedFloats Sub(size_t pos, size_t n) const {
    return UnalignedFloats(bytes_ + pos * sizeof(float), n);
  }
  // A memcpy load is the defined way to read a float at any address; the
  // compiler turns it into a plain (vector) unaligned load.
  float operator[](size_t i) const {
    float v;
    std::memcpy(&v, bytes_ + i * sizeof(float), sizeof v);
    return v;
  }

 private:
  const char* bytes_;
  size_t n_;
};

// True when no value is NaN or +-Inf.
bool AllFinite(UnalignedFloats values);
// Whether no value is NaN or +-Inf, and whether every |value| is at most
// `bound` (>= 0; NaN's and Inf's are above any).
struct Magnitudes {
  bool finite;
  bool within;
};
Magnitudes CheckMagnitudes(UnalignedFloats values, float bound);
// Copies `values` to `to` (any address, not overlapping them) and says
// whether all of them are finite: one pass where a check and then a copy
// would read them twice.
bool CopyAndCheckFinite(UnalignedFloats values, char* to);

class FloatPieces {
 public:
  explicit FloatPieces(absl::Span<const absl::string_view> pieces);

  size_t byte_size() const { return byte_size_; }
  size_t remaining_bytes() const { return byte_size_ - consumed_; }

  // Consumes the next `n` floats (4 * n <= remaining_bytes()), passing them
  // to fn(UnalignedFloats) in order, as few runs as the pieces allow. A float
  // split across two pieces is passed alone, from a 4-byte copy.
  template <typename Fn>
  void ForEachRun(size_t n, Fn&& fn);

  // Copies the next `n` floats into `out`; requires 4 * n <= remaining_bytes().
  void Read(float* out, size_t n);

  // Rewinds to the first byte.
  void Reset();

  // Reads everything left and reports whether all of it is finite.
  bool RestAllFinite();
  // Says that every value is known finite: the caller checked them as it
  // copied them into pieces no one else writes, so RestAllFinite need not
  // read them again.
  void MarkAllFinite() { all_finite_ = true; }

 private:
  void Advance(size_t bytes);
  absl::string_view current() const { return pieces_[piece_].substr(offset_); }

  absl::Span<const absl::string_view> pieces_;
  size_t byte_size_ = 0;
  size_t piece_ = 0;   // index of the piece being read
  size_t offset_ = 0;  // bytes of pieces_[piece_] already read
  size_t consumed_ = 0;
  bool all_finite_ = false;
};

template <typename Fn>
void FloatPieces::ForEachRun(size_t n, Fn&& fn) {
  while (n > 0) {
    const absl::string_view here = current();
    const size_t whole = std::min(n, here.size() / sizeof(float));
    if (whole > 0) {
      fn(UnalignedFloats(here.data(), whole));
      Advance(whole * sizeof(float));
      n -= whole;
    } else if (here.empty()) {
      Advance(0);
    } else {
      char straddling[sizeof(float)];
      Read(reinterpret_cast<float*>(straddling), 1);
      fn(UnalignedFloats(straddling, 1));
      --n;
    }
  }
}

}  // namespace ps

#endif  // SHARDPS_PS_WIRE_FLOAT_PIECES_H_
