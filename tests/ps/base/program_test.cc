// Program start-up pieces: sibling binaries, signal names, stop signals
// taken by the thread that waits for them, and the default log.
#include "ps/base/program.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "ps/base/log.h"

namespace ps {
namespace {

TEST(ProgramTest, SiblingBinariesAreBesideThisOne) {
  const std::string server = SiblingBinary("shardps-server");
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  ASSERT_GT(n, 0);
  std::string dir(self, n);
  dir = dir.substr(0, dir.rfind('/'));
  EXPECT_EQ(server, dir + "/shardps-server");
}

TEST(ProgramTest, SignalsAreNamedAsUsersKnowThem) {
  EXPECT_EQ(SignalName(SIGTERM), "SIGTERM");
  EXPECT_EQ(SignalName(SIGINT), "SIGINT");
  EXPECT_EQ(SignalName(SIGHUP), "SIGHUP");
  EXPECT_EQ(SignalName(12345), "signal 12345");
}

TEST(ProgramTest, StopSignalsAreTakenByTheWaiterNotTheProcess) {
  // The mask is per thread: this test blocks the signals in a thread of its
  // own, which then waits for them; a SIGHUP sent to that thread would
  // otherwise end the test binary.
  int got = 0, timed_out = -1;
  std::thread waiter([&] {
    const StopSignals stop;
    timed_out = stop.WaitFor(absl::Milliseconds(10));
    pthread_kill(pthread_self(), SIGHUP);
    got = stop.Wait();
  });
  waiter.join();
  EXPECT_EQ(timed_out, 0);
  EXPECT_EQ(got, SIGHUP);
}

TEST(LogTest, NullMeansStderrWithTheProgramsName) {
  testing::internal::CaptureStderr();
  Logf(nullptr, "restored %d tables", 3);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(err, std::string(program_invocation_short_name) +
                     ": restored 3 tables\n");
}

}  // namespace
}  // namespace ps
