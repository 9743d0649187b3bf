#include "ps/base/server_process.h"

#include <unistd.h>

#include <cstdio>

#include "absl/memory/memory.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "ps/base/port_file.h"

namespace ps {

absl::StatusOr<std::unique_ptr<ServerProcess>> ServerProcess::Spawn(
    const ServerProcessOptions& options) {
  const std::string port_path =
      absl::StrCat(options.run_dir, "/", options.name, ".port");
  std::remove(port_path.c_str());
  std::vector<std::string> args = options.command_prefix;
  args.insert(args.end(),
              {options.binary, absl::StrCat("--host=", options.host),
               absl::StrCat("--port=", options.port),
               absl::StrCat("--port_file=", port_path)});
  args.insert(args.end(), options.extra_args.begin(), options.extra_args.end());
  absl::StatusOr<std::unique_ptr<ChildProcess>> child = ChildProcess::Start(
      options.name, args,
      absl::StrCat(options.run_dir, "/", options.name, ".log"));
  if (!child.ok()) return child.status();
  auto server =
      absl::WrapUnique(new ServerProcess(options.host, *std::move(child)));

  const absl::Time deadline = absl::Now() + options.start_timeout;
  while (true) {
    absl::StatusOr<int> port = ReadPortFile(port_path);
    if (port.ok()) {
      server->port_ = *port;
      return server;
    }
    if (!absl::IsNotFound(port.status())) return port.status();
    if (std::optional<absl::Status> ended = server->process_->Poll();
        ended.has_value()) {
      return absl::UnavailableError(absl::StrCat(
          options.binary, " exited before serving: ", ended->message()));
    }
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat(options.binary, " wrote no port file within ",
                       absl::FormatDuration(options.start_timeout), ": ",
                       LogTail(server->log_path())));
    }
    absl::SleepFor(absl::Milliseconds(10));  // polling interval
  }
}

std::string ServerProcess::address() const {
  return absl::StrCat(host_, ":", port_);
}

absl::Status ServerProcess::Stop(absl::Duration grace) {
  return process_->Stop(grace);
}

void ServerProcess::Kill() { process_->Kill(); }

}  // namespace ps
