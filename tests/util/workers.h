// Test helper: shardps-worker as a separate process, started the one way
// tests start processes (ps::ChildProcess), its output in a log.
#ifndef SHARDPS_TESTS_UTIL_WORKERS_H_
#define SHARDPS_TESTS_UTIL_WORKERS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "ps/base/program.h"
#include "util/processes.h"

namespace testutil {

// shardps-worker --server_addrs=ADDRS `flags`..., output into `log`.
inline std::unique_ptr<ps::ChildProcess> StartWorker(
    const std::vector<std::string>& addrs,
    const std::vector<std::string>& flags, const std::string& log) {
  std::vector<std::string> argv = {
      ps::SiblingBinary("shardps-worker"),
      "--server_addrs=" + absl::StrJoin(addrs, ",")};
  argv.insert(argv.end(), flags.begin(), flags.end());
  return StartProcess("shardps-worker", argv, log);
}

// Waits for a process to end (at most `limit`); its exit code, -1 if a
// signal ended it or it did not end in time (it is killed then).
inline int ExitCode(ps::ChildProcess& p,
                    absl::Duration limit = absl::Seconds(240)) {
  if (absl::IsDeadlineExceeded(p.Wait(absl::Now() + limit))) p.Kill();
  return p.exit_code();
}

}  // namespace testutil

#endif  // SHARDPS_TESTS_UTIL_WORKERS_H_
