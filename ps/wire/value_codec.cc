#include "ps/wire/value_codec.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace ps {
namespace {

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// One value each; written so that the loops calling them vectorise.
inline uint16_t FloatToHalf(float f) {
  constexpr float kMaxHalf = 65504.0f;
  f = std::min(std::max(f, -kMaxHalf), kMaxHalf);
  const uint32_t bits = Bits(f);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t x = bits & 0x7fffffffu;
  // Below 2^-14 the half is subnormal: adding 0.5 lines the half's
  // mantissa up with the float's low bits, and the FPU's own rounding is
  // round-to-nearest-even.
  const uint32_t subnormal = Bits(FromBits(x) + 0.5f) - 0x3f000000u;
  // Normal: rebias the exponent, round to nearest even on the 13 dropped
  // bits.
  const uint32_t odd = (x >> 13) & 1u;
  const uint32_t normal = (x + 0xc8000fffu + odd) >> 13;  // -(112 << 23)
  const uint32_t h = x < 0x38800000u ? subnormal : normal;
  return static_cast<uint16_t>(sign | h);
}

inline float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t em = static_cast<uint32_t>(h & 0x7fffu) << 13;
  const uint32_t exponent = em & 0x0f800000u;
  const uint32_t normal = em + 0x38000000u;  // rebias by 112 << 23
  // Inf and NaN keep an all-ones exponent.
  const uint32_t special = normal + 0x38000000u;
  // Subnormal halves: scale the mantissa by 2^-24 through an exact float
  // subtraction.
  const uint32_t subnormal =
      Bits(FromBits(em + 0x38800000u) - 6.103515625e-05f);
  const uint32_t magnitude = exponent == 0x0f800000u ? special
                             : exponent == 0         ? subnormal
                                                     : normal;
  return FromBits(sign | magnitude);
}

inline uint16_t FloatToBf16(float f) {
  const uint32_t bits = Bits(f);
  const uint32_t rounded = bits + 0x7fffu + ((bits >> 16) & 1u);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  // A finite value rounding up to infinity stays at the largest bfloat16.
  const uint32_t magnitude =
      std::min<uint32_t>((rounded >> 16) & 0x7fffu, 0x7f7fu);
  return static_cast<uint16_t>(sign | magnitude);
}

inline void Store16(char* out, uint16_t v) { std::memcpy(out, &v, 2); }
inline uint16_t Load16(const char* in) {
  uint16_t v;
  std::memcpy(&v, in, 2);
  return v;
}

}  // namespace

size_t EncodedBytes(shardps::ValueEncoding encoding, size_t n) {
  switch (encoding) {
    case shardps::FP16:
    case shardps::BF16:
      return 2 * n;
    case shardps::ONEBIT: {
      // Each block: two floats, then a bit per value.
      const size_t tail = n % kOneBitBlock;
      return (n / kOneBitBlock) * (8 + kOneBitBlock / 8) +
             (tail > 0 ? 8 + (tail + 7) / 8 : 0);
    }
    default:
      return 4 * n;
  }
}

absl::string_view EncodingName(shardps::ValueEncoding encoding) {
  switch (encoding) {
    case shardps::FP16:
      return "fp16";
    case shardps::BF16:
      return "bf16";
    case shardps::ONEBIT:
      return "onebit";
    default:
      return "float32";
  }
}

absl::Status CheckPullEncoding(shardps::ValueEncoding encoding) {
  if (encoding == shardps::FLOAT32 || encoding == shardps::FP16 ||
      encoding == shardps::BF16) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("pulls take float32, fp16 or bf16 values, not encoding ",
                   static_cast<int>(encoding)));
}

void EncodeFp16(const float* in, size_t n, char* out) {
  for (size_t i = 0; i < n; ++i) Store16(out + 2 * i, FloatToHalf(in[i]));
}

void DecodeFp16(const char* in, size_t n, float* out) {
  for (size_t i = 0; i < n; ++i) out[i] = HalfToFloat(Load16(in + 2 * i));
}

void EncodeBf16(const float* in, size_t n, char* out) {
  for (size_t i = 0; i < n; ++i) Store16(out + 2 * i, FloatToBf16(in[i]));
}

void DecodeBf16(const char* in, size_t n, float* out) {
  for (size_t i = 0; i < n; ++i) {
    out[i] = FromBits(static_cast<uint32_t>(Load16(in + 2 * i)) << 16);
  }
}

void EncodeOneBit(const float* grad, float* residual, size_t n, char* out) {
  for (size_t begin = 0; begin < n; begin += kOneBitBlock) {
    const size_t m = std::min(kOneBitBlock, n - begin);
    float* r = residual + begin;
    const float* g = grad + begin;
    // v = g + r, kept in r until it becomes the new residual.
    float pos_sum = 0, neg_sum = 0, pos_count = 0;
    for (size_t i = 0; i < m; ++i) {
      const float v = g[i] + r[i];
      r[i] = v;
      const bool pos = v >= 0;
      pos_sum += pos ? v : 0.0f;
      neg_sum += pos ? 0.0f : v;
      pos_count += pos ? 1.0f : 0.0f;
    }
    const float neg_count = static_cast<float>(m) - pos_count;
    const float positive = pos_count > 0 ? pos_sum / pos_count : 0.0f;
    const float negative = neg_count > 0 ? neg_sum / neg_count : 0.0f;
    std::memcpy(out, &positive, sizeof positive);
    std::memcpy(out + 4, &negative, sizeof negative);
    unsigned char* bits = reinterpret_cast<unsigned char*>(out + 8);
    // A byte at a time, so that the loops carry no dependence across bytes.
    for (size_t byte = 0; byte < (m + 7) / 8; ++byte) {
      unsigned char b = 0;
      const size_t end = std::min<size_t>(8, m - 8 * byte);
      for (size_t j = 0; j < end; ++j) {
        b |= static_cast<unsigned char>(r[8 * byte + j] >= 0) << j;
      }
      bits[byte] = b;
    }
    for (size_t i = 0; i < m; ++i) r[i] -= r[i] >= 0 ? positive : negative;
    out += 8 + (m + 7) / 8;
  }
}

void DecodeOneBit(const char* in, size_t n, float* out) {
  for (size_t begin = 0; begin < n; begin += kOneBitBlock) {
    const size_t m = std::min(kOneBitBlock, n - begin);
    float positive, negative;
    std::memcpy(&positive, in, sizeof positive);
    std::memcpy(&negative, in + 4, sizeof negative);
    const unsigned char* bits = reinterpret_cast<const unsigned char*>(in + 8);
    for (size_t i = 0; i < m; ++i) {
      out[begin + i] = (bits[i / 8] >> (i % 8)) & 1 ? positive : negative;
    }
    in += 8 + (m + 7) / 8;
  }
}

absl::StatusOr<WireEncodings> EncodingsFor(absl::string_view compression) {
  if (compression == "none") return WireEncodings{};
  if (compression == "fp16") return WireEncodings{shardps::FP16, shardps::FP16};
  if (compression == "bf16") return WireEncodings{shardps::BF16, shardps::BF16};
  if (compression == "onebit") {
    return WireEncodings{shardps::FLOAT32, shardps::ONEBIT};
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown compression '", compression,
                   "' (expected none, fp16, bf16 or onebit)"));
}

absl::Status DecodeValues(shardps::ValueEncoding encoding, const char* in,
                          size_t n, float* out) {
  switch (encoding) {
    case shardps::FLOAT32:
      std::memcpy(out, in, n * sizeof(float));
      return absl::OkStatus();
    case shardps::FP16:
      DecodeFp16(in, n, out);
      return absl::OkStatus();
    case shardps::BF16:
      DecodeBf16(in, n, out);
      return absl::OkStatus();
    case shardps::ONEBIT:
      DecodeOneBit(in, n, out);
      return absl::OkStatus();
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("unknown value encoding ", static_cast<int>(encoding)));
  }
}

}  // namespace ps
