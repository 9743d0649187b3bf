#include "ps/base/atomic_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "ps/base/file_io.h"

namespace ps {

absl::Status WriteFileAtomically(const std::string& path,
                                 absl::string_view text) {
  const std::string tmp = absl::StrCat(path, ".tmp");
  if (absl::Status s = WriteStringToFile(tmp, text); !s.ok()) return s;
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int error = errno;
    ::unlink(tmp.c_str());
    return ErrnoStatus(error, absl::StrCat("rename ", tmp, " to"), path);
  }
  return absl::OkStatus();
}

}  // namespace ps
