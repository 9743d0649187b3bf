#include "loader/crc32c.h"

#include <nmmintrin.h>

#include <array>
#include <cstring>

namespace loader {
namespace {

constexpr uint32_t kPolynomial = 0x82f63b78u;  // reflected Castagnoli

constexpr std::array<uint32_t, 256> MakeTable() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ kPolynomial : c >> 1;
    table[i] = c;
  }
  return table;
}
constexpr std::array<uint32_t, 256> kTable = MakeTable();

uint32_t Software(const uint8_t* p, size_t n, uint32_t crc) {
  for (size_t i = 0; i < n; ++i) crc = kTable[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
  return crc;
}

__attribute__((target("sse4.2"))) uint32_t Hardware(const uint8_t* p, size_t n,
                                                    uint32_t crc) {
  uint64_t c = crc;
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t word;
    std::memcpy(&word, p, sizeof word);
    c = _mm_crc32_u64(c, word);
  }
  uint32_t c32 = static_cast<uint32_t>(c);
  for (; n > 0; --n, ++p) c32 = _mm_crc32_u8(c32, *p);
  return c32;
}

}  // namespace

uint32_t Crc32c(const void* data, size_t n, uint32_t crc) {
  static const bool has_sse42 = __builtin_cpu_supports("sse4.2");
  const uint8_t* p = static_cast<const uint8_t*>(data);
  crc = ~crc;
  crc = has_sse42 ? Hardware(p, n, crc) : Software(p, n, crc);
  return ~crc;
}

}  // namespace loader

namespace loader {

uint32_t Crc32cPortable(const void* data, size_t n, uint32_t crc) {
  return ~Software(static_cast<const uint8_t*>(data), n, ~crc);
}

}  // namespace loader
