// deploy/slurm/shardps.sbatch against a real Slurm that the test starts
// itself: munged with its own key and socket, slurmctld and slurmd on free
// ports with a private slurm.conf (one node, 2 CPUs, no accounting, no
// cgroups). A 2-server, 2-worker job must train and leave its summaries.
// Needs root and Debian's slurm-wlm and munge (deploy/install-deps.sh).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
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

std::string Output(const std::string& command) {
  return testutil::Shell(command).second;
}

bool Have(const char* path) { return access(path, X_OK) == 0; }

class SlurmTest : public testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) {
      GTEST_SKIP() << "starting slurmctld/slurmd/munged needs root (CI runs "
                      "as root)";
    }
    for (const char* b : {"/usr/sbin/munged", "/usr/sbin/slurmctld",
                          "/usr/sbin/slurmd", "/usr/bin/sbatch"}) {
      if (!Have(b)) GTEST_SKIP() << b << " missing (deploy/install-deps.sh)";
    }
    ASSERT_EQ(chmod(dir_.c_str(), 0755), 0);  // munge wants a reachable socket
    const std::string key = dir_ + "/munge.key";
    ASSERT_EQ(testutil::Shell("head -c 1024 /dev/urandom > " + key +
                              " && chmod 600 " + key)
                  .first,
              0);
    Start("munged",
          {"/usr/sbin/munged", "-F", "-f", "--socket=" + dir_ + "/munge.socket",
           "--key-file=" + key, "--pid-file=" + dir_ + "/munged.pid",
           "--seed-file=" + dir_ + "/munged.seed",
           "--log-file=" + dir_ + "/munged.log"});
    WaitFor([&] { return access((dir_ + "/munge.socket").c_str(), F_OK) == 0; },
            "munged's socket");
    const std::string conf = dir_ + "/slurm.conf";
    testutil::WriteFile(
        conf, absl::StrCat(
                  "ClusterName=shardpstest\nSlurmctldHost=localhost\n"
                  "SlurmctldPort=",
                  testutil::FreeLoopbackPort(),
                  "\nSlurmdPort=", testutil::FreeLoopbackPort(),
                  "\nSlurmUser=root\nSlurmdUser=root\nAuthType=auth/munge\n"
                  "AuthInfo=socket=",
                  dir_, "/munge.socket\nCredType=cred/munge\n",
                  "StateSaveLocation=", dir_, "/state\nSlurmdSpoolDir=", dir_,
                  "/spool\nSlurmctldPidFile=", dir_, "/slurmctld.pid\n",
                  "SlurmdPidFile=", dir_, "/slurmd.pid\nSlurmctldLogFile=",
                  dir_, "/slurmctld.log\nSlurmdLogFile=", dir_, "/slurmd.log\n",
                  "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n"
                  "JobAcctGatherType=jobacct_gather/none\n"
                  "AccountingStorageType=accounting_storage/none\n"
                  "SelectType=select/cons_tres\nSelectTypeParameters=CR_CPU\n"
                  "MpiDefault=none\nReturnToService=2\n"
                  "NodeName=localhost NodeAddr=127.0.0.1 CPUs=2 State=UNKNOWN\n"
                  "PartitionName=debug Nodes=localhost Default=YES "
                  "MaxTime=INFINITE State=UP\n"));
    mkdir((dir_ + "/state").c_str(), 0755);
    mkdir((dir_ + "/spool").c_str(), 0755);
    // Every Slurm command of this process and its children uses it.
    setenv("SLURM_CONF", conf.c_str(), 1);
    Start("slurmctld", {"/usr/sbin/slurmctld", "-D", "-i"});
    Start("slurmd", {"/usr/sbin/slurmd", "-D", "-N", "localhost"});
    WaitFor([] { return Output("sinfo -h -o %T 2>/dev/null") == "idle\n"; },
            "the node to be idle in sinfo");
  }

  void TearDown() override {
    // Jobs first (also a job of a failed test), then the daemons in reverse
    // order of starting (SIGTERM, then SIGKILL). Job steps are daemons of
    // slurmd, not our children: whatever still carries this cluster's
    // SLURM_CONF afterwards is killed.
    if (!daemons_.empty()) {
      testutil::Shell("scancel --full --signal=KILL --partition=debug");
      const absl::Time deadline = absl::Now() + absl::Seconds(20);
      while (absl::Now() < deadline &&
             !Output("squeue -h 2>/dev/null").empty()) {
        absl::SleepFor(absl::Milliseconds(100));
      }
    }
    while (!daemons_.empty()) daemons_.pop_back();
    const std::string conf = absl::StrCat("SLURM_CONF=", dir_, "/slurm.conf");
    for (const std::string& pid : std::vector<std::string>(
             absl::StrSplit(Output("ls /proc"), '\n', absl::SkipEmpty()))) {
      if (pid.find_first_not_of("0123456789") != std::string::npos ||
          std::stoi(pid) == getpid()) {
        continue;
      }
      std::string env = testutil::ReadFile("/proc/" + pid + "/environ");
      std::replace(env.begin(), env.end(), '\0', '\n');
      if (env.find(conf + "\n") != std::string::npos) {
        kill(std::stoi(pid), SIGKILL);
      }
    }
    unsetenv("SLURM_CONF");
  }

  void Start(const std::string& name, const std::vector<std::string>& argv) {
    auto p = ps::ChildProcess::Start(name, argv, dir_ + "/" + name + ".out");
    ASSERT_TRUE(p.ok()) << p.status();
    daemons_.push_back(*std::move(p));
  }

  template <typename Ready>
  void WaitFor(Ready ready, const std::string& what) {
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    while (!ready()) {
      ASSERT_LT(absl::Now(), deadline)
          << "timed out waiting for " << what
          << "; slurmctld: " << ps::LogTail(dir_ + "/slurmctld.log")
          << "; slurmd: " << ps::LogTail(dir_ + "/slurmd.log");
      absl::SleepFor(absl::Milliseconds(100));
    }
  }

  testutil::ScopedTempDir tmp_{"shardps-slurm"};
  const std::string dir_ = tmp_.path();
  std::vector<std::unique_ptr<ps::ChildProcess>> daemons_;
};

TEST_F(SlurmTest, SbatchRunsTwoServersAndTwoWorkers) {
  ASSERT_EQ(testutil::MakeSyntheticData(
                dir_ + "/data",
                "--samples 6000 --features 16 --classes 3 --shards 2"),
            0);
  // Two consecutive ports (the sbatch script uses PORT + server index).
  const int port = testutil::FreePortRun(2);
  ASSERT_GT(port, 0);
  const std::string run = dir_ + "/run";
  setenv("SHARDPS_SERVERS", "2", 1);
  setenv("SHARDPS_PORT", std::to_string(port).c_str(), 1);
  setenv("SHARDPS_RUN_DIR", run.c_str(), 1);
  const std::string bin = ps::SiblingBinary("");
  setenv("SHARDPS_BIN", bin.substr(0, bin.size() - 1).c_str(), 1);
  auto sbatch = ps::ChildProcess::Start(
      "sbatch",
      {"/usr/bin/sbatch", "--wait", "--ntasks=4", "--chdir=" + dir_,
       "--output=" + dir_ + "/job.out",
       std::string(SHARDPS_SOURCE_DIR) + "/deploy/slurm/shardps.sbatch",
       "--data=" + dir_ + "/data", "--model=mlp:16-8-3", "--batch=32",
       "--epochs=2"},
      dir_ + "/sbatch.out");
  ASSERT_TRUE(sbatch.ok()) << sbatch.status();
  absl::Status s = (*sbatch)->Wait(absl::Now() + absl::Seconds(180));
  EXPECT_TRUE(s.ok()) << s << "\njob output: "
                      << testutil::ReadFile(dir_ + "/job.out");
  // The pre-flight check passed both servers before the workers started.
  shardps::ClusterCheckReport preflight;
  ASSERT_TRUE(ps::ReadJsonFile(run + "/preflight.json", &preflight).ok())
      << testutil::ReadFile(dir_ + "/job.out");
  EXPECT_TRUE(preflight.ok());
  EXPECT_EQ(preflight.servers_ready(), 2u);
  for (int rank = 0; rank < 2; ++rank) {
    shardps::WorkerSummary w;
    absl::Status read =
        ps::ReadJsonFile(absl::StrCat(run, "/summary-", rank, ".json"), &w);
    ASSERT_TRUE(read.ok()) << read << "\n"
                           << testutil::ReadFile(dir_ + "/job.out");
    // Rank and world came from SLURM_PROCID / SLURM_NTASKS of the step.
    EXPECT_EQ(w.rank(), rank);
    EXPECT_EQ(w.world(), 2);
    EXPECT_EQ(w.samples(), 2 * 2700u);  // 5400 training samples / 2, 2 epochs
    EXPECT_LT(w.last_epoch_loss(), w.first_epoch_loss());
    // Rank 0 evaluates the model at the end of each epoch (-1 elsewhere).
    if (rank == 0) {
      EXPECT_GE(w.test_accuracy(), testutil::LearnedAccuracy(dir_ + "/data"));
    }
  }
  for (int i = 0; i < 2; ++i) {
    const std::string log =
        testutil::ReadFile(absl::StrCat(run, "/server-", i, ".log"));
    EXPECT_NE(log.find(absl::StrCat("listening on 0.0.0.0:", port + i)),
              std::string::npos)
        << log;
    EXPECT_NE(log.find("stopped"), std::string::npos) << log;  // clean stop
  }
  for (const char* v :
       {"SHARDPS_SERVERS", "SHARDPS_PORT", "SHARDPS_RUN_DIR", "SHARDPS_BIN"}) {
    unsetenv(v);
  }
}

}  // namespace
