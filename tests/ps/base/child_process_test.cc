// ChildProcess: output into its log, how it ended (named, with the log's
// last lines), CPU time, stopping politely then by force, and no process
// left behind when its owner goes.
#include "ps/base/child_process.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <string>
#include <vector>

#include "util/files.h"

namespace ps {
namespace {

std::vector<std::string> Sh(const std::string& script) {
  return {"/bin/sh", "-c", script};
}

TEST(ChildProcessTest, AnExitIsReportedWithItsCodeAndLog) {
  testutil::ScopedTempDir dir;
  absl::StatusOr<std::unique_ptr<ChildProcess>> ok = ChildProcess::Start(
      "ok", Sh("echo to-out; echo to-err >&2"), dir.path() + "/ok.log");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_TRUE((*ok)->Wait(absl::Now() + absl::Seconds(10)).ok());
  EXPECT_FALSE((*ok)->running());
  EXPECT_EQ(testutil::ReadFile(dir.path() + "/ok.log"), "to-out\nto-err\n");

  absl::StatusOr<std::unique_ptr<ChildProcess>> bad = ChildProcess::Start(
      "bad", Sh("echo line 1; echo it broke; exit 3"), dir.path() + "/b.log");
  ASSERT_TRUE(bad.ok());
  absl::Status s = (*bad)->Wait(absl::Now() + absl::Seconds(10));
  EXPECT_EQ(s.message(), "bad ended with exit code 3: line 1 | it broke");
  EXPECT_EQ((*bad)->exit_status(), s);
  EXPECT_GT((*bad)->last_pid(), 0);
  EXPECT_EQ((*bad)->pid(), -1);
}

TEST(ChildProcessTest, PollDoesNotBlockAndCpuTimeIsCounted) {
  testutil::ScopedTempDir dir;
  absl::StatusOr<std::unique_ptr<ChildProcess>> p = ChildProcess::Start(
      "spin", Sh("i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done"),
      dir.path() + "/spin.log");
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE((*p)->Poll().has_value());  // still running
  ASSERT_TRUE((*p)->Wait(absl::Now() + absl::Seconds(60)).ok());
  EXPECT_GT((*p)->cpu_seconds(), 0.01);
}

TEST(ChildProcessTest, StopIsSigtermThenSigkill) {
  testutil::ScopedTempDir dir;
  absl::StatusOr<std::unique_ptr<ChildProcess>> polite = ChildProcess::Start(
      "polite", {"/bin/sleep", "60"}, dir.path() + "/p.log");
  ASSERT_TRUE(polite.ok());
  absl::Status s = (*polite)->Stop(absl::Seconds(10));
  EXPECT_EQ(s.message(), "polite ended with signal 15: ");
  absl::StatusOr<std::unique_ptr<ChildProcess>> stubborn = ChildProcess::Start(
      "stubborn", Sh("trap '' TERM; echo ready; sleep 60 & wait"),
      dir.path() + "/s.log");
  ASSERT_TRUE(stubborn.ok());
  // Wait until the shell ignores SIGTERM before sending it.
  while (testutil::ReadFile(dir.path() + "/s.log").empty()) {
    absl::SleepFor(absl::Milliseconds(10));  // polling interval
  }
  const absl::Time start = absl::Now();
  s = (*stubborn)->Stop(absl::Milliseconds(300));
  EXPECT_TRUE(absl::IsDeadlineExceeded(s)) << s;
  EXPECT_NE(s.message().find("ignored SIGTERM for 300ms and was killed"),
            std::string::npos)
      << s;
  EXPECT_FALSE((*stubborn)->running());
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
}

TEST(ChildProcessTest, AProgramThatCannotRunIsAnErrorNamingIt) {
  testutil::ScopedTempDir dir;
  absl::StatusOr<std::unique_ptr<ChildProcess>> p = ChildProcess::Start(
      "ghost", {dir.path() + "/no-such-binary"}, dir.path() + "/g.log");
  ASSERT_TRUE(p.ok());  // the exec fails in the child
  absl::Status s = (*p)->Wait(absl::Now() + absl::Seconds(10));
  EXPECT_NE(s.message().find("exit code 127"), std::string::npos) << s;
  EXPECT_NE(s.message().find("exec " + dir.path() + "/no-such-binary failed"),
            std::string::npos)
      << s;
  s = ChildProcess::Start("nolog", {"/bin/true"}, dir.path() + "/x/y.log")
          .status();
  EXPECT_TRUE(absl::IsNotFound(s)) << s;
  EXPECT_NE(s.message().find(dir.path() + "/x/y.log"), std::string::npos);
  EXPECT_TRUE(absl::IsInvalidArgument(
      ChildProcess::Start("empty", {}, dir.path() + "/e.log").status()));
}

TEST(ChildProcessTest, DestroyingTheOwnerStopsTheProcess) {
  testutil::ScopedTempDir dir;
  pid_t pid;
  {
    absl::StatusOr<std::unique_ptr<ChildProcess>> p = ChildProcess::Start(
        "sleeper", {"/bin/sleep", "60"}, dir.path() + "/s.log");
    ASSERT_TRUE(p.ok());
    pid = (*p)->pid();
  }
  EXPECT_NE(kill(pid, 0), 0);  // reaped and gone
}

}  // namespace
}  // namespace ps
