// Commands at a host slot: as they are on this host or through a prefix;
// through a remote shell as one quoted string that first prints its PID,
// which stopping it uses.
#include "worker/launch/remote_process.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "util/files.h"

namespace worker {
namespace {

TEST(RemoteProcessTest, CommandsRunAsTheirSlotSays) {
  HostSlot here;
  EXPECT_EQ(CommandAt(here, {"/bin/x", "--a=1"}),
            (std::vector<std::string>{"/bin/x", "--a=1"}));
  HostSlot ns;
  ns.command_prefix = {"/usr/bin/ip", "netns", "exec", "h3"};
  EXPECT_EQ(CommandAt(ns, {"/bin/x"}),
            (std::vector<std::string>{"/usr/bin/ip", "netns", "exec", "h3",
                                      "/bin/x"}));
  HostSlot ssh;
  ssh.remote = true;
  ssh.command_prefix = {"/usr/bin/ssh", "h"};
  EXPECT_EQ(CommandAt(ssh, {"/bin/x", "it's"}),
            (std::vector<std::string>{
                "/usr/bin/ssh", "h",
                "echo shardps-pid $$; exec '/bin/x' 'it'\\''s'"}));
}

TEST(RemoteProcessTest, TheRemotePidIsTheFirstOneItPrinted) {
  testutil::ScopedTempDir dir;
  const std::string log = dir.path() + "/w.log";
  EXPECT_EQ(RemotePid(log), 0);
  testutil::WriteFile(log,
                      "Warning: added host\nshardps-pid 4242\nshardps-pid 1\n");
  EXPECT_EQ(RemotePid(log), 4242);
}

TEST(RemoteProcessTest, ARemoteShellProcessIsStoppedThroughItsPid) {
  // A "remote" shell that is this host: sh -c runs the quoted command, and
  // the stop prefix runs `kill -TERM PID` here too.
  testutil::ScopedTempDir dir;
  HostSlot slot;
  slot.remote = true;
  slot.command_prefix = {"/bin/sh", "-c"};
  slot.stop_prefix = {"/bin/sh", "-c"};
  const std::string log = dir.path() + "/sleeper.log";
  absl::StatusOr<std::unique_ptr<ps::ChildProcess>> p = ps::ChildProcess::Start(
      "sleeper", CommandAt(slot, {"/bin/sleep", "60"}), log);
  ASSERT_TRUE(p.ok()) << p.status();
  while (RemotePid(log) == 0) {
    absl::SleepFor(absl::Milliseconds(10));  // polling interval
  }
  const absl::Time start = absl::Now();
  absl::Status s = StopAt(**p, slot, absl::Seconds(10));
  EXPECT_NE(s.message().find("signal 15"), std::string::npos) << s;
  EXPECT_FALSE((*p)->running());
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

}  // namespace
}  // namespace worker
