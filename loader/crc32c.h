// CRC-32C (Castagnoli), as TFRecord frames use it, and TFRecord's masking.
// Debian 12 packages no CRC-32C library (Abseil's arrived after 20220623),
// so this is the one hand-written checksum: the SSE4.2 instruction where
// the CPU has it, a table otherwise.
//
// Thread-safety: pure functions.
#ifndef SHARDPS_LOADER_CRC32C_H_
#define SHARDPS_LOADER_CRC32C_H_

#include <cstddef>
#include <cstdint>

namespace loader {

// CRC-32C of data[0, n), continuing from `crc` (0 to start).
uint32_t Crc32c(const void* data, size_t n, uint32_t crc = 0);

// The same through the byte table, whatever the CPU (what Crc32c uses
// without SSE4.2); exposed so tests can check both paths agree.
uint32_t Crc32cPortable(const void* data, size_t n, uint32_t crc = 0);

// TFRecord stores masked CRCs so that a CRC of data containing CRCs stays
// well distributed.
inline uint32_t MaskCrc(uint32_t crc) {
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

}  // namespace loader

#endif  // SHARDPS_LOADER_CRC32C_H_
