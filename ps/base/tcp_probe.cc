#include "ps/base/tcp_probe.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace ps {

absl::StatusOr<ProbeResult> ProbeTcp(const std::string& address,
                                     absl::Duration timeout) {
  const size_t colon = address.rfind(':');
  int port = 0;
  sockaddr_in peer{};
  peer.sin_family = AF_INET;
  if (colon == std::string::npos ||
      !absl::SimpleAtoi(address.substr(colon + 1), &port) || port <= 0 ||
      port > 65535 ||
      ::inet_pton(AF_INET, address.substr(0, colon).c_str(), &peer.sin_addr) !=
          1) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", address, "' is not ipv4:port"));
  }
  peer.sin_port = htons(static_cast<uint16_t>(port));
  const int fd =
      ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return ProbeResult::kNoAnswer;
  ProbeResult result = ProbeResult::kNoAnswer;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&peer), sizeof peer) == 0) {
    result = ProbeResult::kListening;
  } else if (errno == ECONNREFUSED) {
    result = ProbeResult::kRefused;
  } else if (errno == EINPROGRESS) {
    pollfd p{fd, POLLOUT, 0};
    const int ready =
        ::poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout)));
    int error = 0;
    socklen_t length = sizeof error;
    if (ready == 1 &&
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) == 0) {
      result = error == 0              ? ProbeResult::kListening
               : error == ECONNREFUSED ? ProbeResult::kRefused
                                       : ProbeResult::kNoAnswer;
    }
  }
  ::close(fd);
  return result;
}

}  // namespace ps
