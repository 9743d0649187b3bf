// What shardps-launch checks and prepares before placing anything.
#include "worker/launch/launch_run.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <string>

#include "util/files.h"

namespace worker {
namespace {

absl::Status TryLaunch(LaunchRequest r) {
  return RunLaunch(std::move(r), [](absl::Duration) { return false; }).status();
}

TEST(LaunchRunTest, AFreshTokenIsRandomAndPrivate) {
  testutil::ScopedTempDir dir;
  const std::string a = dir.path() + "/a.token", b = dir.path() + "/b.token";
  ASSERT_TRUE(WriteFreshToken(a).ok());
  ASSERT_TRUE(WriteFreshToken(b).ok());
  const std::string token = testutil::ReadFile(a);
  EXPECT_EQ(token.size(), 65u);  // 32 bytes in hex, and a newline
  EXPECT_EQ(token.find_first_not_of("0123456789abcdef\n"), std::string::npos);
  EXPECT_NE(token, testutil::ReadFile(b));
  struct stat st;
  ASSERT_EQ(::stat(a.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST(LaunchRunTest, BadRequestsAreRefusedBeforeAnythingStarts) {
  testutil::ScopedTempDir dir;
  LaunchRequest r;
  EXPECT_EQ(TryLaunch(r).message(), "--run_dir is required");
  r.launch.run_dir = dir.path() + "/new/run";
  r.launch.servers = 0;
  EXPECT_EQ(TryLaunch(r).message(),
            "--servers and --workers must be in [1, 250]");
  r.launch.servers = 1;
  r.launch.cluster = "cloud";
  absl::Status s = TryLaunch(r);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find("--cluster=cloud"), std::string::npos) << s;
  // The run directory was made, with its parents, and a token in it.
  EXPECT_EQ(testutil::ReadFile(dir.path() + "/new/run/job.token").size(), 65u);
  testutil::WriteFile(dir.path() + "/file", "x");
  r.launch.run_dir = dir.path() + "/file/run";
  s = TryLaunch(r);
  EXPECT_NE(s.message().find("cannot create directory " + dir.path() +
                             "/file/run: Not a directory"),
            std::string::npos)
      << s;
}

}  // namespace
}  // namespace worker
