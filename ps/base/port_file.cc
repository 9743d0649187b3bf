#include "ps/base/port_file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "ps/base/atomic_file.h"

namespace ps {

absl::Status WritePortFile(const std::string& path, int port) {
  return WriteFileAtomically(path, absl::StrCat(port, "\n"));
}

absl::StatusOr<int> ReadPortFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("no port file ", path));
  std::stringstream text;
  text << in.rdbuf();
  int port = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(text.str()), &port) ||
      port <= 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("port file ", path, " does not hold a port"));
  }
  return port;
}

}  // namespace ps
