// Encodings of float values on the wire (proto/shardps.proto ValueEncoding):
// float32, fp16 and bf16 for pulls and pushes, and 1-bit SGD with error
// feedback for pushes.
//
// The conversions are straight-line bit arithmetic with selects instead of
// branches, so that the compiler vectorises each loop (the library builds
// with -O3); no instruction-set extension (F16C) is required, so the same
// binary runs on any x86-64 or ARM host.
//
// Thread-safety: free functions without shared state.
#ifndef SHARDPS_PS_WIRE_VALUE_CODEC_H_
#define SHARDPS_PS_WIRE_VALUE_CODEC_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/shardps.pb.h"

namespace ps {

// ONEBIT block length, in values.
constexpr size_t kOneBitBlock = 256;

// The bytes `n` values take in `encoding`.
size_t EncodedBytes(shardps::ValueEncoding encoding, size_t n);

// "float32", "fp16", "bf16", "onebit".
absl::string_view EncodingName(shardps::ValueEncoding encoding);

// IEEE half precision, round to nearest even; magnitudes beyond 65504 (the
// largest half) become +-65504. Inputs must not be NaN.
void EncodeFp16(const float* in, size_t n, char* out);
void DecodeFp16(const char* in, size_t n, float* out);

// bfloat16, round to nearest even; finite inputs stay finite (a value that
// would round past the largest bfloat16 becomes it). Inputs must not be NaN.
void EncodeBf16(const float* in, size_t n, char* out);
void DecodeBf16(const char* in, size_t n, float* out);

// 1-bit SGD with error feedback: quantizes v = grad + residual block by
// block (each value to its block's mean of non-negative or of negative
// values, by its sign), writes EncodedBytes(ONEBIT, n) bytes to `out`, and
// leaves residual = v - decoded, to be added to the next gradient.
void EncodeOneBit(const float* grad, float* residual, size_t n, char* out);
void DecodeOneBit(const char* in, size_t n, float* out);

// INVALID_ARGUMENT unless pulls can answer in `encoding`: FLOAT32, FP16 or
// BF16 (ONEBIT is for pushes only), naming it by number.
absl::Status CheckPullEncoding(shardps::ValueEncoding encoding);

// How pulls and pushes encode values for a compression setting: "none"
// (float32 both ways), "fp16" or "bf16" (both ways), "onebit" (1-bit SGD
// pushes, float32 pulls); INVALID_ARGUMENT for anything else.
struct WireEncodings {
  shardps::ValueEncoding pull = shardps::FLOAT32;
  shardps::ValueEncoding push = shardps::FLOAT32;
};
absl::StatusOr<WireEncodings> EncodingsFor(absl::string_view compression);

// Decodes `n` values of `encoding` from `in` (EncodedBytes long) into
// `out`. INVALID_ARGUMENT when the encoding is unknown.
absl::Status DecodeValues(shardps::ValueEncoding encoding, const char* in,
                          size_t n, float* out);

}  // namespace ps

#endif  // SHARDPS_PS_WIRE_VALUE_CODEC_H_
