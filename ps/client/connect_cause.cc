#include "ps/client/connect_cause.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace ps {

std::string ConnectCause(const absl::Status& attempt, absl::string_view address,
                         bool client_tls) {
  const std::string text = absl::AsciiStrToLower(attempt.message());
  auto says = [&](absl::string_view words) {
    return absl::StrContains(text, words);
  };
  std::string cause;
  if (says("connection refused")) {
    cause = absl::StrCat(
        "connection refused: is a shardps-server listening "
        "at ",
        address, "?");
  } else if (says("dns resolution failed") || says("domain name not found") ||
             says("name or service not known") || says("could not resolve")) {
    cause =
        "the host name does not resolve (DNS): check its spelling, or "
        "that the server's host is up and named";
  } else if (says("no route to host") || says("network is unreachable")) {
    cause = "no route to the host: is it up, and on this network?";
  } else if (says("wrong_version_number") || says("wrong version number")) {
    cause =
        "TLS handshake failed: the server does not speak TLS (start it "
        "with --tls_cert and --tls_key, or drop --tls_ca here)";
  } else if (says("certificate_verify_failed") ||
             says("certificate verify failed")) {
    cause =
        "TLS handshake failed: the server's certificate is not signed "
        "by --tls_ca";
  } else if (says("not in peer certificate") || says("peer name")) {
    cause = absl::StrCat(
        "TLS handshake failed: the server's certificate "
        "does not name the host in ",
        address);
  } else if (says("http2 header with status")) {
    cause = absl::StrCat("something at ", address,
                         " answers HTTP/2, but it is not a shardps-server "
                         "(a proxy, or another service on that port?)");
  } else if (says("handshake") || says("ssl") || says("tls")) {
    cause = "TLS handshake failed";
  } else if (!client_tls &&
             (says("socket closed") || says("connection reset") ||
              says("end of file") || says("broken pipe"))) {
    cause =
        "the server closed the connection at once: it may speak TLS "
        "(then give this client --tls_ca)";
  } else if (attempt.code() == absl::StatusCode::kDeadlineExceeded ||
             says("timed out") || says("timeout")) {
    cause = "no answer (timed out): a firewall, or a host that is down?";
  }
  if (cause.empty()) return std::string(attempt.message());
  return absl::StrCat(cause, " [", attempt.message(), "]");
}

}  // namespace ps
