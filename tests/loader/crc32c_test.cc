// CRC-32C: the standard check values, the hardware and table paths agree,
// continuing a CRC equals one pass, and TFRecord's mask.
#include "loader/crc32c.h"

#include <gtest/gtest.h>

#include <string>

namespace loader {
namespace {

TEST(Crc32cTest, MatchesKnownVectors) {
  // RFC 3720 B.4 and the common check value.
  EXPECT_EQ(Crc32c("123456789", 9), 0xe3069283u);
  const std::string zeros(32, '\0');
  EXPECT_EQ(Crc32c(zeros.data(), zeros.size()), 0x8a9136aau);
  const std::string ones(32, '\xff');
  EXPECT_EQ(Crc32c(ones.data(), ones.size()), 0x62a8ab43u);
  // The table path agrees with the hardware path on every length/alignment.
  std::string text(300, '\0');
  for (size_t i = 0; i < text.size(); ++i) text[i] = static_cast<char>(i * 31);
  for (size_t start = 0; start < 9; ++start) {
    for (size_t n : {0u, 1u, 7u, 8u, 9u, 100u, 291u}) {
      ASSERT_EQ(Crc32c(text.data() + start, n),
                Crc32cPortable(text.data() + start, n))
          << start << " " << n;
    }
  }
  EXPECT_EQ(Crc32cPortable("123456789", 9), 0xe3069283u);
  // Continuing a CRC equals computing it in one go.
  EXPECT_EQ(Crc32c("6789", 4, Crc32c("12345", 5)), 0xe3069283u);
}

TEST(Crc32cTest, MaskIsTfRecordsRotateAndAdd) {
  EXPECT_EQ(MaskCrc(0), 0xa282ead8u);
  // Rotated right by 15 (0xacf02468), plus the constant, mod 2^32.
  EXPECT_EQ(MaskCrc(0x12345678u), 0x4f730f40u);
}

}  // namespace
}  // namespace loader
