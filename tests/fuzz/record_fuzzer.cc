// libFuzzer target: arbitrary bytes as a record shard file. Scanning it
// record by record and reading spans of records must end in a clean error
// (naming the offset) or in records whose framing checks out; never a
// crash, an overread or a loop that does not advance.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "loader/random_access_file.h"
#include "loader/record_file.h"

namespace {

class MemoryFile final : public loader::RandomAccessFile {
 public:
  explicit MemoryFile(std::string bytes)
      : RandomAccessFile("fuzz-input", bytes.size()),
        bytes_(std::move(bytes)) {}

 private:
  absl::Status ReadInside(uint64_t offset, char* out,
                          uint64_t n) const override {
    std::memcpy(out, bytes_.data() + offset, n);
    return absl::OkStatus();
  }
  const std::string bytes_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = std::make_shared<MemoryFile>(
      std::string(reinterpret_cast<const char*>(data), size));
  loader::RecordReader reader(file);
  std::vector<uint64_t> offsets;
  std::string payload;
  uint64_t at = 0;
  while (at < size) {
    absl::StatusOr<uint64_t> next = reader.ReadAt(at, &payload);
    if (!next.ok()) break;
    if (*next <= at || *next > size) __builtin_trap();
    offsets.push_back(at);
    at = *next;
  }
  // The records found, read again as one span, give the same payloads.
  std::string buffer;
  size_t seen = 0;
  absl::Status span =
      reader.ReadRecords(offsets.data(), offsets.size(), at, &buffer,
                         [&](uint64_t offset, absl::string_view p) {
                           if (offset != offsets[seen++]) __builtin_trap();
                           return absl::OkStatus();
                         });
  if (!span.ok() || seen != offsets.size()) __builtin_trap();
  // Offsets taken from the input itself: any outcome but a crash is fine.
  std::vector<uint64_t> wild;
  for (size_t i = 0; i + 1 < std::min<size_t>(size, 16); i += 2) {
    wild.push_back(data[i] | (uint64_t{data[i + 1]} << 8));
  }
  std::sort(wild.begin(), wild.end());
  if (!wild.empty()) {
    reader
        .ReadRecords(
            wild.data(), wild.size(), wild.back() + 16, &buffer,
            [](uint64_t, absl::string_view) { return absl::OkStatus(); })
        .IgnoreError();
  }
  return 0;
}
