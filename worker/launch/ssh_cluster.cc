#include "worker/launch/ssh_cluster.h"

#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"

namespace worker {
namespace {

constexpr char kSsh[] = "/usr/bin/ssh";

std::vector<std::string> SshPrefix(const SshHost& h,
                                   const std::vector<std::string>& ssh_args,
                                   bool tty) {
  std::vector<std::string> argv = {kSsh};
  // -tt: the remote process gets SIGHUP if the connection drops (the
  // launcher died); BatchMode: fail instead of asking for a password.
  if (tty) argv.push_back("-tt");
  argv.insert(argv.end(),
              {"-o", "BatchMode=yes", "-p", absl::StrCat(h.ssh_port)});
  argv.insert(argv.end(), ssh_args.begin(), ssh_args.end());
  argv.insert(argv.end(), {h.destination, "--"});
  return argv;
}

HostSlot Slot(const SshHost& h, const std::vector<std::string>& ssh_args) {
  HostSlot slot;
  slot.address = h.host;
  slot.remote = true;
  slot.command_prefix = SshPrefix(h, ssh_args, /*tty=*/true);
  slot.stop_prefix = SshPrefix(h, ssh_args, /*tty=*/false);
  return slot;
}

}  // namespace

absl::StatusOr<std::vector<SshHost>> ReadHostfile(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    return absl::NotFoundError(absl::StrCat("cannot read --hostfile=", path));
  std::vector<SshHost> hosts;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    absl::string_view text = absl::StripAsciiWhitespace(
        absl::string_view(line).substr(0, line.find('#')));
    if (text.empty()) continue;
    SshHost h;
    const size_t colon = text.rfind(':');
    if (colon != absl::string_view::npos) {
      if (!absl::SimpleAtoi(text.substr(colon + 1), &h.ssh_port) ||
          h.ssh_port < 1 || h.ssh_port > 65535) {
        return absl::InvalidArgumentError(absl::StrCat(
            path, " line ", n, ": '", text, "' has no valid ssh port"));
      }
      text = text.substr(0, colon);
    }
    if (text.empty() || text.find_first_of(" \t") != absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, " line ", n, ": '", line, "' is not [user@]host[:port]"));
    }
    h.destination = std::string(text);
    const size_t at = text.find('@');
    h.host =
        std::string(at == absl::string_view::npos ? text : text.substr(at + 1));
    hosts.push_back(std::move(h));
  }
  if (hosts.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--hostfile=", path, " lists no host"));
  }
  return hosts;
}

SshSlots PlaceOnHosts(const std::vector<SshHost>& hosts, int servers,
                      int workers, int base_port,
                      const std::vector<std::string>& ssh_args) {
  SshSlots p;
  const size_t n = hosts.size();
  for (int i = 0; i < servers; ++i) {
    p.servers.push_back(Slot(hosts[i % n], ssh_args));
    p.servers.back().port = base_port + i;
  }
  for (int r = 0; r < workers; ++r) {
    p.workers.push_back(Slot(hosts[(servers + r) % n], ssh_args));
  }
  return p;
}

std::string ShellQuote(absl::string_view arg) {
  return absl::StrCat("'", absl::StrReplaceAll(arg, {{"'", "'\\''"}}), "'");
}

}  // namespace worker
