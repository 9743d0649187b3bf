// Crash points inside a server's last checkpoint write: the real
// shardps-server under strace, killed (or failed) at each system call of the
// write's durable steps, then restarted on its directory. Whatever the crash
// point, the restart restores a whole checkpoint (the old one before the
// rename, the new one after it) and never a torn one; a failed write is
// reported and leaves the old checkpoint. And the steps come in the order
// that makes this true: the data's fsync, the rename, the directory's fsync.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "ps/base/program.h"
#include "ps/base/server_process.h"
#include "ps/client/client.h"
#include "util/files.h"
#include "util/processes.h"
#include "util/servers.h"

namespace ps {
namespace {

constexpr char kStrace[] = "/usr/bin/strace";
constexpr uint64_t kKeys = 1000;

// The first child of `pid` (the process strace runs).
pid_t ChildOf(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/task/", pid, "/children"));
  pid_t child = 0;
  in >> child;
  return child;
}

class CheckpointCrashTest : public testing::Test {
 protected:
  void SetUp() override {
    if (::access(kStrace, X_OK) != 0) {
      GTEST_SKIP() << "strace missing (deploy/install-deps.sh installs it)";
    }
    if (testutil::RunCommand({kStrace, "-o", "/dev/null", "/bin/true"}).first !=
        0) {
      GTEST_SKIP() << "strace cannot trace here (ptrace not permitted)";
    }
    // The old checkpoint: version 1, every value -1.
    std::unique_ptr<ServerProcess> server = Start(dir_.path() + "/old", {});
    ASSERT_NE(server, nullptr);
    std::unique_ptr<Client> client = Connect(*server);
    ASSERT_TRUE(client->CreateTable(testutil::ConstantTable(kKeys, 0)).ok());
    Push(*client);
    ASSERT_TRUE(server->Stop().ok());
  }

  std::unique_ptr<ServerProcess> Start(const std::string& checkpoints,
                                       std::vector<std::string> prefix) {
    ServerProcessOptions o;
    o.binary = SiblingBinary("shardps-server");
    o.run_dir = dir_.path();
    o.name = absl::StrCat("server-", started_++);
    o.extra_args = {"--job=crash", "--checkpoint_dir=" + checkpoints,
                    "--checkpoint_every=0"};
    o.command_prefix = std::move(prefix);
    absl::StatusOr<std::unique_ptr<ServerProcess>> s = ServerProcess::Spawn(o);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *std::move(s) : nullptr;
  }

  static std::unique_ptr<Client> Connect(const ServerProcess& server) {
    ClientOptions o;
    o.server_addrs = {server.address()};
    o.job = "crash";
    absl::StatusOr<std::unique_ptr<Client>> c = Client::Connect(o);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *std::move(c) : nullptr;
  }

  static void Push(Client& client) {
    std::vector<float> ones(kKeys, 1.0f);
    ASSERT_TRUE(client.Push("w", 0, kKeys, ones.data()).ok());
  }

  // A copy of the old checkpoint's directory; the server started on it
  // under strace with `inject`, given a second push and then SIGTERM, which
  // makes it write its last checkpoint (where the injection strikes). The
  // server's log.
  std::string CrashWhileCheckpointing(const std::string& checkpoints,
                                      const std::string& inject) {
    std::filesystem::copy(dir_.path() + "/old", checkpoints,
                          std::filesystem::copy_options::recursive);
    std::unique_ptr<ServerProcess> traced = Start(
        checkpoints, {kStrace, "-f", "-qq", "-o", "/dev/null", "-e", inject});
    EXPECT_NE(traced, nullptr);
    if (traced == nullptr) return "";
    std::unique_ptr<Client> client = Connect(*traced);
    EXPECT_TRUE(
        client->OpenTable(testutil::ConstantTable(kKeys, 0), absl::Seconds(10))
            .ok());
    Push(*client);  // version 2, every value -2
    const pid_t server = ChildOf(traced->pid());
    EXPECT_GT(server, 0);
    ::kill(server, SIGTERM);
    traced->process().Wait(absl::Now() + absl::Seconds(30)).IgnoreError();
    return testutil::ReadFile(traced->log_path());
  }

  // Restarts a server on `checkpoints`: the version and values it restored.
  void ExpectRestored(const std::string& checkpoints, uint64_t version) {
    std::unique_ptr<ServerProcess> server = Start(checkpoints, {});
    ASSERT_NE(server, nullptr);
    EXPECT_FALSE(std::filesystem::exists(checkpoints + "/checkpoint.tmp"));
    std::unique_ptr<Client> client = Connect(*server);
    ASSERT_TRUE(
        client->OpenTable(testutil::ConstantTable(kKeys, 0), absl::Seconds(10))
            .ok());
    absl::StatusOr<std::vector<shardps::StatsResponse>> stats = client->Stats();
    ASSERT_TRUE(stats.ok());
    EXPECT_EQ((*stats)[0].tables(0).restored_version(), version);
    std::vector<float> values(kKeys);
    ASSERT_TRUE(client->Pull("w", 0, kKeys, values.data()).ok());
    EXPECT_EQ(values, std::vector<float>(kKeys, -static_cast<float>(version)));
    EXPECT_TRUE(server->Stop().ok());
  }

  testutil::ScopedTempDir dir_{"shardps-crash"};
  int started_ = 0;
};

TEST_F(CheckpointCrashTest, AKillAtEachDurableStepRestoresAWholeCheckpoint) {
  // In the server's main thread, rename 1 is the port file's; fsync 1 and 2
  // and rename 2 belong to the last checkpoint.
  struct Point {
    const char* where;
    const char* inject;
    uint64_t restored;
  };
  const Point points[] = {
      {"before the data is durable", "inject=fsync:signal=KILL:when=1", 1},
      {"at the rename", "inject=rename:signal=KILL:when=2", 1},
      {"after the rename, before the directory's fsync",
       "inject=fsync:signal=KILL:when=2", 2},
  };
  int i = 0;
  for (const Point& p : points) {
    SCOPED_TRACE(p.where);
    const std::string dir = absl::StrCat(dir_.path(), "/crash-", i++);
    CrashWhileCheckpointing(dir, p.inject);
    ExpectRestored(dir, p.restored);
  }
}

TEST_F(CheckpointCrashTest, AFailedWriteIsReportedAndKeepsTheOldCheckpoint) {
  const std::pair<const char*, const char*> failures[] = {
      {"inject=fsync:error=EIO:when=1", "Input/output error"},
      {"inject=rename:error=EACCES:when=2", "Permission denied"},
  };
  int i = 0;
  for (const auto& [inject, reason] : failures) {
    SCOPED_TRACE(inject);
    const std::string dir = absl::StrCat(dir_.path(), "/fail-", i++);
    const std::string log = CrashWhileCheckpointing(dir, inject);
    EXPECT_NE(log.find("last checkpoint failed"), std::string::npos) << log;
    EXPECT_NE(log.find(dir + "/checkpoint"), std::string::npos) << log;
    EXPECT_NE(log.find(reason), std::string::npos) << log;
    ExpectRestored(dir, 1);
  }
}

TEST_F(CheckpointCrashTest, DataIsDurableBeforeTheRenameAndTheRenameAfter) {
  const std::string dir = dir_.path() + "/order";
  const std::string trace = dir_.path() + "/trace.txt";
  std::filesystem::copy(dir_.path() + "/old", dir,
                        std::filesystem::copy_options::recursive);
  std::unique_ptr<ServerProcess> traced =
      Start(dir, {kStrace, "-f", "-y", "-qq", "-o", trace, "-e",
                  "trace=fsync,fdatasync,rename,renameat,renameat2"});
  ASSERT_NE(traced, nullptr);
  ::kill(ChildOf(traced->pid()), SIGTERM);
  ASSERT_TRUE(traced->process().Wait(absl::Now() + absl::Seconds(30)).ok());
  std::vector<std::string> steps;
  for (absl::string_view line :
       absl::StrSplit(testutil::ReadFile(trace), '\n')) {
    if (absl::StrContains(line, dir)) steps.emplace_back(line);
  }
  ASSERT_EQ(steps.size(), 3u) << testutil::ReadFile(trace);
  EXPECT_TRUE(absl::StrContains(steps[0], "fsync(") &&
              absl::StrContains(steps[0], dir + "/checkpoint.tmp>"))
      << steps[0];
  EXPECT_TRUE(absl::StrContains(steps[1], "rename") &&
              absl::StrContains(steps[1], "\"" + dir + "/checkpoint\""))
      << steps[1];
  EXPECT_TRUE(absl::StrContains(steps[2], "fsync(") &&
              absl::StrContains(steps[2], "<" + dir + ">"))
      << steps[2];
}

}  // namespace
}  // namespace ps
