// deploy/mpi/run.sh under a real OpenMPI mpirun (4 ranks on this host,
// oversubscribed): ranks 0-1 serve (on ports of their own choosing), ranks
// 2-3 train; a failing worker makes the whole job fail without leaving a
// server behind; a server that cannot listen fails the job at once, with
// its reason. Needs Debian's
// openmpi-bin (deploy/install-deps.sh); as root, OpenMPI's opt-in variables
// are set.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "proto/summary.pb.h"
#include "ps/base/child_process.h"
#include "ps/base/json_file.h"
#include "ps/base/program.h"
#include "ps/base/server_process.h"
#include "util/data.h"
#include "util/files.h"
#include "util/processes.h"

namespace {

class MpiTest : public testing::Test {
 protected:
  void SetUp() override {
    if (access("/usr/bin/mpirun", X_OK) != 0) {
      GTEST_SKIP() << "mpirun missing (openmpi-bin, deploy/install-deps.sh)";
    }
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    const std::string bin = ps::SiblingBinary("");
    setenv("SHARDPS_BIN", bin.substr(0, bin.size() - 1).c_str(), 1);
    setenv("SHARDPS_SERVERS", "2", 1);
    setenv("SHARDPS_SERVER_HOST", "127.0.0.1", 1);
    // Each server takes a free port and announces the one it got.
    setenv("SHARDPS_PORT", "0", 1);
    ASSERT_EQ(testutil::MakeSyntheticData(
                  dir_ + "/data",
                  "--samples 6000 --features 16 --classes 3 --shards 2"),
              0);
  }
  void TearDown() override {
    for (const char* v : {"SHARDPS_BIN", "SHARDPS_SERVERS", "SHARDPS_PORT",
                          "SHARDPS_RUN_DIR", "SHARDPS_SERVER_HOST"}) {
      unsetenv(v);
    }
  }

  absl::Status Mpirun(const std::string& run, const std::string& model) {
    setenv("SHARDPS_RUN_DIR", run.c_str(), 1);
    auto p = ps::ChildProcess::Start(
        "mpirun",
        {"/usr/bin/mpirun", "-np", "4", "--oversubscribe",
         std::string(SHARDPS_SOURCE_DIR) + "/deploy/mpi/run.sh",
         "--data=" + dir_ + "/data", "--model=" + model, "--batch=32",
         "--epochs=2"},
        run + ".log");
    EXPECT_TRUE(p.ok()) << p.status();
    return (*p)->Wait(absl::Now() + absl::Seconds(180));
  }

  testutil::ScopedTempDir tmp_{"shardps-mpi"};
  const std::string dir_ = tmp_.path();
};

TEST_F(MpiTest, RanksBelowSServeTheOthersTrain) {
  const std::string run = dir_ + "/run";
  absl::Status s = Mpirun(run, "mlp:16-8-3");
  ASSERT_TRUE(s.ok()) << s << "\n" << testutil::ReadFile(run + ".log");
  for (int rank = 0; rank < 2; ++rank) {
    shardps::WorkerSummary w;
    ASSERT_TRUE(
        ps::ReadJsonFile(absl::StrCat(run, "/summary-", rank, ".json"), &w)
            .ok());
    EXPECT_EQ(w.rank(), rank);  // MPI rank 2 + rank
    EXPECT_EQ(w.world(), 2);
    EXPECT_EQ(w.samples(), 2 * 2700u);  // 5400 training samples / 2
    EXPECT_LT(w.last_epoch_loss(), w.first_epoch_loss());
    // Rank 0 evaluates the model at the end of each epoch (-1 elsewhere).
    if (rank == 0) {
      EXPECT_GE(w.test_accuracy(), testutil::LearnedAccuracy(dir_ + "/data"));
    }
  }
  for (int i = 0; i < 2; ++i) {
    const std::string log =
        testutil::ReadFile(absl::StrCat(run, "/server-", i, ".log"));
    EXPECT_NE(log.find("stopped"), std::string::npos) << log;
  }
}

TEST_F(MpiTest, AFailingWorkerFailsTheJobAndStopsTheServers) {
  const std::string run = dir_ + "/run";
  absl::Status s = Mpirun(run, "mlp:5-3");  // the data has 16 features
  EXPECT_FALSE(s.ok());
  EXPECT_FALSE(absl::IsDeadlineExceeded(s)) << "mpirun hung";
  EXPECT_NE(testutil::ReadFile(run + "/worker-0.log").find("takes 5 features"),
            std::string::npos);
  // No server of this job is left running.
  EXPECT_NE(
      testutil::Shell("pgrep -f 'shardps-serve[r].*--port_file=" + run + "/'")
          .first,
      0);
}

TEST_F(MpiTest, AServerThatCannotListenFailsTheJobAtOnce) {
  // Port P held by a socket of this test: rank 0's server (P) cannot bind.
  const int held = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(held, 0);
  absl::Cleanup close_held = [held] { close(held); };
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(bind(held, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(held, 1), 0);
  ASSERT_EQ(getsockname(held, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  setenv("SHARDPS_PORT", std::to_string(ntohs(addr.sin_port)).c_str(), 1);
  const std::string run = dir_ + "/run";
  const absl::Time start = absl::Now();
  absl::Status s = Mpirun(run, "mlp:16-8-3");
  EXPECT_FALSE(s.ok());
  // Not the workers' wait for a server that never answers.
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
  const std::string log = testutil::ReadFile(run + ".log");
  EXPECT_NE(log.find("rank 0: shardps-server exited before listening on port " +
                     std::to_string(ntohs(addr.sin_port))),
            std::string::npos)
      << log;
}

}  // namespace
