#include "ps/wire/value_codec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace ps {
namespace {

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint16_t Half(float f) {
  char out[2];
  EncodeFp16(&f, 1, out);
  uint16_t h;
  std::memcpy(&h, out, 2);
  return h;
}
float FromHalf(uint16_t h) {
  float f;
  DecodeFp16(reinterpret_cast<const char*>(&h), 1, &f);
  return f;
}
// The compiler's own conversions (GCC's _Float16, round to nearest even)
// are the reference.
uint16_t ReferenceHalf(float f) {
  const _Float16 h = static_cast<_Float16>(f);
  uint16_t u;
  std::memcpy(&u, &h, 2);
  return u;
}
float ReferenceFloat(uint16_t u) {
  _Float16 h;
  std::memcpy(&h, &u, 2);
  return static_cast<float>(h);
}

TEST(ValueCodecTest, Fp16DecodesEveryHalfExactly) {
  for (uint32_t u = 0; u < 65536; ++u) {
    const float want = ReferenceFloat(static_cast<uint16_t>(u));
    const float got = FromHalf(static_cast<uint16_t>(u));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << std::hex << u;
    } else {
      ASSERT_EQ(Bits(got), Bits(want)) << std::hex << u;
    }
  }
}

TEST(ValueCodecTest, Fp16EncodesLikeTheCompilerWithinRange) {
  // Every half's own value, every midpoint between neighbours (ties go to
  // even), and points either side of them.
  for (uint32_t u = 0; u < 0x7bff; ++u) {
    for (float sign : {1.0f, -1.0f}) {
      const float lo = ReferenceFloat(static_cast<uint16_t>(u));
      const float hi = ReferenceFloat(static_cast<uint16_t>(u + 1));
      const float mid = sign * (0.5f * lo + 0.5f * hi);
      for (float f : {sign * lo, mid, std::nextafter(mid, 0.0f),
                      std::nextafter(mid, sign * 1e9f)}) {
        ASSERT_EQ(Half(f), ReferenceHalf(f)) << f;
      }
    }
  }
  std::mt19937 gen(1);
  std::uniform_real_distribution<float> exponent(-30, 15.9f);
  for (int i = 0; i < 200000; ++i) {
    const float f = std::exp2(exponent(gen)) * (gen() % 2 ? 1 : -1);
    ASSERT_EQ(Half(f), ReferenceHalf(f)) << f;
  }
}

TEST(ValueCodecTest, Fp16SaturatesInsteadOfOverflowing) {
  EXPECT_EQ(FromHalf(Half(1e6f)), 65504.0f);
  EXPECT_EQ(FromHalf(Half(-70000.0f)), -65504.0f);
  EXPECT_EQ(FromHalf(Half(65519.0f)), 65504.0f);  // would round to infinity
  EXPECT_EQ(Half(-0.0f), 0x8000);
}

TEST(ValueCodecTest, Bf16RoundsToNearestEven) {
  std::mt19937 gen(2);
  std::vector<float> in;
  for (int i = 0; i < 100000; ++i) {
    in.push_back(FromBits(gen() & 0xbfffffffu));  // finite: exponent < 255
  }
  in.push_back(FromBits(0x3f808000u));  // tie, rounds down to even
  in.push_back(FromBits(0x3f818000u));  // tie, rounds up to even
  in.push_back(3.4028235e38f);          // FLT_MAX stays finite
  std::vector<char> bytes(2 * in.size());
  std::vector<float> out(in.size());
  EncodeBf16(in.data(), in.size(), bytes.data());
  DecodeBf16(bytes.data(), in.size(), out.data());
  for (size_t i = 0; i < in.size(); ++i) {
    const uint32_t lo = Bits(in[i]) & 0xffff0000u;
    const uint32_t hi = lo + 0x10000u;
    const double d_lo = std::fabs(double{in[i]} - FromBits(lo));
    const double d_hi = std::fabs(double{in[i]} - FromBits(hi));
    uint32_t want = d_lo < d_hi   ? lo
                    : d_hi < d_lo ? hi
                                  : ((lo >> 16) & 1 ? hi : lo);
    if (std::isinf(FromBits(want))) want = lo;  // saturates at the largest
    ASSERT_EQ(Bits(out[i]), want) << in[i];
  }
}

TEST(ValueCodecTest, EncodedSizes) {
  EXPECT_EQ(EncodedBytes(shardps::FLOAT32, 10), 40u);
  EXPECT_EQ(EncodedBytes(shardps::FP16, 10), 20u);
  EXPECT_EQ(EncodedBytes(shardps::BF16, 10), 20u);
  EXPECT_EQ(EncodedBytes(shardps::ONEBIT, 256), 40u);
  EXPECT_EQ(EncodedBytes(shardps::ONEBIT, 512 + 9), 80u + 8 + 2);
  EXPECT_EQ(EncodedBytes(shardps::ONEBIT, 1), 9u);
}

TEST(ValueCodecTest, OneBitUsesEachBlocksMeansAndKeepsTheError) {
  // One block of 4 and a second, partial one: signs decode to the mean of
  // the block's non-negative or negative values.
  std::vector<float> g(256 + 3, 0.0f);
  g[0] = 3;
  g[1] = 1;
  g[2] = -2;
  g[3] = -4;
  g[256] = -1;
  g[257] = -3;
  g[258] = 5;
  std::vector<float> residual(g.size(), 0.0f), decoded(g.size());
  std::vector<char> bytes(EncodedBytes(shardps::ONEBIT, g.size()));
  EncodeOneBit(g.data(), residual.data(), g.size(), bytes.data());
  DecodeOneBit(bytes.data(), g.size(), decoded.data());
  // Block 1: non-negative 3, 1 and 252 zeros -> 4 / 254; negative -> -3.
  EXPECT_FLOAT_EQ(decoded[0], 4.0f / 254);
  EXPECT_FLOAT_EQ(decoded[4], 4.0f / 254);
  EXPECT_FLOAT_EQ(decoded[2], -3.0f);
  EXPECT_FLOAT_EQ(decoded[256], -2.0f);
  EXPECT_FLOAT_EQ(decoded[258], 5.0f);
  for (size_t i = 0; i < g.size(); ++i) {
    EXPECT_NEAR(decoded[i] + residual[i], g[i], 1e-6f) << i;
  }
}

TEST(ValueCodecTest, OneBitErrorFeedbackDeliversTheWholeGradientOverTime) {
  // With the error fed back, the decoded pushes sum to the true gradients'
  // sum up to one residual, however coarse each single push is.
  const size_t n = 1000;
  std::mt19937 gen(3);
  std::normal_distribution<float> normal;
  std::vector<float> g(n), residual(n, 0.0f), decoded(n), sent(n, 0.0f),
      truth(n, 0.0f);
  std::vector<char> bytes(EncodedBytes(shardps::ONEBIT, n));
  for (int step = 0; step < 200; ++step) {
    for (size_t i = 0; i < n; ++i) {
      g[i] = normal(gen) * 0.1f + (i % 7 == 0 ? 0.05f : -0.01f);
      truth[i] += g[i];
    }
    EncodeOneBit(g.data(), residual.data(), n, bytes.data());
    DecodeOneBit(bytes.data(), n, decoded.data());
    for (size_t i = 0; i < n; ++i) sent[i] += decoded[i];
  }
  for (size_t i = 0; i < n; ++i) {
    EXPECT_NEAR(sent[i] + residual[i], truth[i], 1e-3f) << i;
    EXPECT_LT(std::fabs(residual[i]), 2.0f) << i;
  }
}

TEST(ValueCodecTest, DecodeValuesRefusesAnUnknownEncoding) {
  float out;
  char in[4] = {};
  EXPECT_TRUE(absl::IsInvalidArgument(
      DecodeValues(static_cast<shardps::ValueEncoding>(9), in, 1, &out)));
}

}  // namespace
}  // namespace ps
