#include "ps/client/server_addrs.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace ps {
absl::StatusOr<HostPort> SplitServerAddress(absl::string_view addr) {
  const size_t colon = addr.rfind(':');
  uint32_t port = 0;
  if (colon == absl::string_view::npos || colon == 0 ||
      !absl::SimpleAtoi(addr.substr(colon + 1), &port) || port == 0 ||
      port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("server address '", addr,
                     "' is not host:port with a port in 1..65535"));
  }
  absl::string_view host = addr.substr(0, colon);
  if (absl::ConsumePrefix(&host, "[")) absl::ConsumeSuffix(&host, "]");
  return HostPort{std::string(host), static_cast<int>(port)};
}

absl::StatusOr<std::vector<std::string>> ParseServerAddrs(
    absl::string_view addrs, int count) {
  addrs = absl::StripAsciiWhitespace(addrs);
  if (addrs.empty()) {
    return absl::InvalidArgumentError("no server addresses given");
  }
  std::vector<std::string> out;
  if (absl::StrContains(addrs, "{i}")) {
    if (count <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "server address pattern '", addrs, "' needs a server count > 0"));
    }
    for (int i = 0; i < count; ++i) {
      out.push_back(absl::StrReplaceAll(addrs, {{"{i}", absl::StrCat(i)}}));
    }
  } else {
    for (absl::string_view part : absl::StrSplit(addrs, ',')) {
      out.emplace_back(absl::StripAsciiWhitespace(part));
    }
    if (count > 0 && static_cast<int>(out.size()) != count) {
      return absl::InvalidArgumentError(
          absl::StrCat("server count is ", count, " but ", out.size(),
                       " addresses were given: '", addrs, "'"));
    }
  }
  for (const std::string& addr : out) {
    if (absl::Status s = SplitServerAddress(addr).status(); !s.ok()) return s;
  }
  return out;
}

}  // namespace ps
