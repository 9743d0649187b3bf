// Helpers for tests that run shardps-launch as a process.
#ifndef SHARDPS_TESTS_UTIL_LAUNCH_H_
#define SHARDPS_TESTS_UTIL_LAUNCH_H_

#include <gtest/gtest.h>
#include <signal.h>

#include <cerrno>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "proto/summary.pb.h"
#include "ps/base/json_file.h"
#include "ps/base/program.h"
#include "util/processes.h"

namespace testutil {

// Starts shardps-launch with `args`, its output into `log`.
inline std::unique_ptr<ps::ChildProcess> StartLaunch(
    const std::vector<std::string>& args, const std::string& log) {
  std::vector<std::string> argv = {ps::SiblingBinary("shardps-launch")};
  argv.insert(argv.end(), args.begin(), args.end());
  return StartProcess("shardps-launch", argv, log);
}

// Runs shardps-launch to the end (at most `limit`); its exit status.
inline absl::Status RunLaunch(const std::vector<std::string>& args,
                              const std::string& log,
                              absl::Duration limit = absl::Seconds(300)) {
  std::unique_ptr<ps::ChildProcess> p = StartLaunch(args, log);
  if (p == nullptr) return absl::InternalError("cannot start shardps-launch");
  return p->Wait(absl::Now() + limit);
}

inline shardps::RunSummary ReadRunSummary(const std::string& run_dir) {
  shardps::RunSummary s;
  absl::Status status = ps::ReadJsonFile(run_dir + "/summary.json", &s);
  EXPECT_TRUE(status.ok()) << status;
  return s;
}

// Every process the run started has ended.
inline void ExpectNoProcessLeft(const shardps::RunSummary& s) {
  EXPECT_FALSE(s.processes().empty());
  for (const shardps::ProcessRecord& p : s.processes()) {
    EXPECT_GT(p.pid(), 0) << p.name();
    EXPECT_FALSE(Alive(p.pid()))
        << p.name() << " (pid " << p.pid() << ") outlived the launcher";
  }
}

}  // namespace testutil

#endif  // SHARDPS_TESTS_UTIL_LAUNCH_H_
