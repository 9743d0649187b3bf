// Reading gzip-compressed IDX files, the format MNIST and Fashion-MNIST ship
// in: a big-endian magic (0x00000801 labels, 0x00000803 images), dimension
// sizes, then unsigned bytes.
//
// Thread-safety: a free function without shared state.
#ifndef SHARDPS_LOADER_IDX_FILE_H_
#define SHARDPS_LOADER_IDX_FILE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace loader {

struct IdxArray {
  std::vector<uint32_t> dims;  // e.g. {60000, 28, 28}
  std::string bytes;           // product(dims) values, row-major
};

// Reads a gzip'd (or plain) IDX file of unsigned bytes with `rank`
// dimensions. Errors name the file and the (uncompressed) byte offset.
absl::StatusOr<IdxArray> ReadIdx(const std::string& path, int rank);

}  // namespace loader

#endif  // SHARDPS_LOADER_IDX_FILE_H_
