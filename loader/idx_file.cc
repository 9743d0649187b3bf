#include "loader/idx_file.h"

#include <zlib.h>

#include <memory>

#include "absl/strings/str_cat.h"

namespace loader {
namespace {

struct GzCloser {
  void operator()(gzFile_s* f) const { gzclose(f); }
};

}  // namespace

absl::StatusOr<IdxArray> ReadIdx(const std::string& path, int rank) {
  std::unique_ptr<gzFile_s, GzCloser> file(gzopen(path.c_str(), "rb"));
  if (file == nullptr) {
    return absl::NotFoundError(absl::StrCat("cannot open ", path));
  }
  uint64_t offset = 0;
  auto read = [&](void* out, uint64_t n, const char* what) -> absl::Status {
    char* dst = static_cast<char*>(out);
    uint64_t left = n;
    while (left > 0) {
      const unsigned chunk =
          static_cast<unsigned>(std::min<uint64_t>(left, 1u << 30));
      const int got = gzread(file.get(), dst, chunk);
      if (got <= 0) {
        return absl::DataLossError(
            absl::StrCat(path, ": truncated ", what, " at byte offset ",
                         offset + (n - left), " (", n, " bytes expected)"));
      }
      dst += got;
      left -= static_cast<uint64_t>(got);
    }
    offset += n;
    return absl::OkStatus();
  };
  auto big_endian = [](const unsigned char* b) {
    return (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) |
           (uint32_t{b[2]} << 8) | uint32_t{b[3]};
  };
  unsigned char word[4];
  if (absl::Status s = read(word, 4, "magic"); !s.ok()) return s;
  const uint32_t magic = big_endian(word);
  const uint32_t want = 0x00000800u | static_cast<uint32_t>(rank);
  if (magic != want) {
    return absl::DataLossError(absl::StrCat(
        path, ": wrong magic 0x", absl::Hex(magic, absl::kZeroPad8),
        " at byte offset 0 (expected 0x", absl::Hex(want, absl::kZeroPad8),
        ", unsigned bytes of rank ", rank, ")"));
  }
  IdxArray out;
  uint64_t total = 1;
  for (int d = 0; d < rank; ++d) {
    if (absl::Status s = read(word, 4, "dimension"); !s.ok()) return s;
    out.dims.push_back(big_endian(word));
    total *= out.dims.back();
  }
  if (total > (uint64_t{1} << 34)) {
    return absl::DataLossError(
        absl::StrCat(path, ": implausible dimensions (", total, " values)"));
  }
  out.bytes.resize(total);
  if (absl::Status s = read(out.bytes.data(), total, "data"); !s.ok()) return s;
  char extra;
  if (gzread(file.get(), &extra, 1) > 0) {
    return absl::DataLossError(absl::StrCat(
        path, ": unexpected bytes after the data at byte offset ", offset));
  }
  return out;
}

}  // namespace loader
