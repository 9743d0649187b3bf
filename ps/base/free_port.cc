#include "ps/base/free_port.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "ps/base/file_io.h"

namespace ps {

absl::StatusOr<int> PickFreePort(const std::string& ipv4_host) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  if (::inet_pton(AF_INET, ipv4_host.c_str(), &address.sin_addr) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", ipv4_host, "' is not an IPv4 address"));
  }
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoStatus(errno, "open a socket for", ipv4_host);
  socklen_t length = sizeof address;
  const bool bound =
      ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0;
  const int error = errno;
  ::close(fd);
  if (!bound) return ErrnoStatus(error, "bind a port on", ipv4_host);
  return static_cast<int>(ntohs(address.sin_port));
}

}  // namespace ps
