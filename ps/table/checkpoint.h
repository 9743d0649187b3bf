// A server's checkpoint file: every table's spec, values, optimizer state,
// version, per-worker clocks and push ledger (so exactly-once holds across a
// restore), written atomically.
//
// Layout, all integers little-endian:
//   "SPSCKPT1"                                     8-byte magic
//   block: u64 length | u32 CRC-32 of payload | payload
//   block 0          CheckpointHeader (proto/checkpoint.proto)
//   blocks           each table's arrays in header order, raw float32, cut
//                    into blocks of at most kMaxBlockBytes
//   last block       "END", then the end of the file
// A reader checks every length and CRC, so a truncated or damaged file is
// refused with its name and the byte offset, never half-loaded.
//
// Thread-safety: free functions without shared state.
#ifndef SHARDPS_PS_TABLE_CHECKPOINT_H_
#define SHARDPS_PS_TABLE_CHECKPOINT_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "ps/table/table.h"

namespace ps {

constexpr size_t kMaxBlockBytes = size_t{16} << 20;

struct Checkpoint {
  std::string job;
  absl::Time written;
  std::vector<TableSnapshot> tables;
};

// Writes a checkpoint of `tables` to `path`: into `path`.tmp, fsync, rename
// over `path`, fsync of the directory. A crash at any point leaves the old
// file or the new one whole. Errors name the file.
absl::Status WriteCheckpoint(const std::string& path, absl::string_view job,
                             const std::vector<TableSnapshot>& tables);

// Reads a checkpoint. DATA_LOSS names the file and byte offset of anything
// truncated, damaged or inconsistent. Files of format 1 (whose consistency
// mode and straggler policy were strings) are read into today's enums.
absl::StatusOr<Checkpoint> ReadCheckpoint(const std::string& path);

}  // namespace ps

#endif  // SHARDPS_PS_TABLE_CHECKPOINT_H_
