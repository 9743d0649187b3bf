// The container image for real: deploy/podman-setup.sh (private podman
// configuration, a debootstrapped base image), `podman build` of
// deploy/Dockerfile, then 2 server and 2 worker containers on the host
// network train Fashion-MNIST (the shards baked into the image) for a few
// steps and leave their summaries in a mounted directory. Needs root; the
// build takes several minutes (label deploy).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "proto/summary.pb.h"
#include "ps/base/json_file.h"
#include "util/files.h"
#include "util/processes.h"

namespace {

using testutil::Shell;

const std::string kSource = SHARDPS_SOURCE_DIR;
const std::string kImage = "localhost/shardps:ctest";

class ContainerTest : public testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) {
      GTEST_SKIP() << "podman with this machine's settings needs root (CI "
                      "runs as root)";
    }
    auto [code, out] = Shell(kSource + "/deploy/podman-setup.sh");
    ASSERT_EQ(code, 0) << out;
    // The script prints the environment podman needs.
    for (absl::string_view line : absl::StrSplit(out, '\n')) {
      if (!absl::ConsumePrefix(&line, "export ")) continue;
      for (absl::string_view kv : absl::StrSplit(line, ' ')) {
        std::vector<std::string> p =
            absl::StrSplit(kv, absl::MaxSplits('=', 1));
        if (p.size() == 2) setenv(p[0].c_str(), p[1].c_str(), 1);
      }
    }
    const char* conf = getenv("CONTAINERS_CONF");
    ASSERT_NE(conf, nullptr) << out;
    // One run at a time owns the storage: a second run (another checkout on
    // this machine) waits here. The lock dies with its process, so whatever
    // containers are left once it is held belong to runs that were killed,
    // e.g. a build's working containers, which keep its images "in use".
    const std::string lock_path = std::string(absl::string_view(conf).substr(
                                      0, absl::string_view(conf).rfind('/'))) +
                                  "/suite.lock";
    lock_fd_ = open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    ASSERT_GE(lock_fd_, 0) << lock_path;
    ASSERT_EQ(flock(lock_fd_, LOCK_EX), 0) << lock_path;
    std::tie(code, out) = Shell(
        "podman rm -a -f && podman ps --external -a -q | xargs -r podman rm "
        "-f");
    ASSERT_EQ(code, 0) << out;
  }

  void TearDown() override {
    for (const std::string& c : containers_) Shell("podman rm -f " + c);
    if (lock_fd_ >= 0) close(lock_fd_);
  }

  // Starts a detached container on the host network; its name.
  std::string Run(const std::string& name, const std::string& args) {
    const std::string full =
        absl::StrCat("shardps-ctest-", getpid(), "-", name);
    containers_.push_back(full);
    auto [code, out] =
        Shell(absl::StrCat("podman run -d --network host --name ", full, " -v ",
                           dir_, "/run:/results ", kImage, " ", args));
    EXPECT_EQ(code, 0) << out;
    return full;
  }

  testutil::ScopedTempDir tmp_{"shardps-container"};
  const std::string dir_ = tmp_.path();
  std::vector<std::string> containers_;
  int lock_fd_ = -1;
};

TEST_F(ContainerTest, ImageRunsTwoServersAndTwoWorkers) {
  // The build compiles the project on two cores, beside other suites: it
  // has ~5 minutes alone, so more than Shell's usual limit (the suite's
  // ctest timeout is 25 minutes).
  auto [code, out] = Shell(
      absl::StrCat(
          "cd ", kSource,
          " && podman build --isolation chroot --network host --pull=never "
          "--build-arg BASE=localhost/debian:bookworm -f deploy/Dockerfile -t ",
          kImage, " ."),
      absl::Minutes(15));
  // The build stage, and the image this tag named before, stay behind as
  // unnamed images (over 1 GB each in vfs storage): removed whether or not
  // the build worked. The storage is this suite's own (podman-setup.sh).
  const auto [prune_code, pruned] = Shell("podman image prune -f");
  EXPECT_EQ(prune_code, 0) << pruned;
  ASSERT_EQ(code, 0) << out.substr(out.size() > 4000 ? out.size() - 4000 : 0);

  // One image, every role (etcd for replicated shards), no compiler, not
  // root.
  std::tie(code, out) = Shell(absl::StrCat(
      "podman run --rm ", kImage,
      " bash -c 'id -u; for b in shardps-server shardps-worker shardps-launch "
      "shardps-data etcd; do command -v $b; done; command -v g++ || echo "
      "no-g++; "
      "ls /data/fashion-mnist'"));
  EXPECT_EQ(code, 0) << out;
  EXPECT_EQ(out,
            "10001\n/usr/local/bin/shardps-server\n/usr/local/bin/"
            "shardps-worker\n/usr/local/bin/shardps-launch\n/usr/local/bin/"
            "shardps-data\n/usr/bin/etcd\nno-g++\ntest\ntrain\n");

  ASSERT_EQ(chmod(dir_.c_str(), 0755), 0);
  ASSERT_EQ(mkdir((dir_ + "/run").c_str(), 0777), 0);
  ASSERT_EQ(chmod((dir_ + "/run").c_str(), 0777), 0);  // the image's user
  std::vector<int> ports;
  std::vector<std::string> addrs;
  for (int i = 0; i < 2; ++i) {
    ports.push_back(testutil::FreeLoopbackPort());
    addrs.push_back(absl::StrCat("127.0.0.1:", ports.back()));
  }
  std::vector<std::string> servers;
  for (int i = 0; i < 2; ++i) {
    servers.push_back(Run(absl::StrCat("server-", i),
                          absl::StrCat("shardps-server --host=127.0.0.1 "
                                       "--port=",
                                       ports[i], " --job=ctest")));
  }
  std::vector<std::string> workers;
  for (int r = 0; r < 2; ++r) {
    workers.push_back(Run(
        absl::StrCat("worker-", r),
        absl::StrCat("shardps-worker --server_addrs=", addrs[0], ",", addrs[1],
                     " --job=ctest --rank=", r,
                     " --world=2 --data=/data/fashion-mnist --run_dir=/results"
                     " --batch=64 --max_steps=50 --ready_timeout_s=60")));
  }
  for (const std::string& w : workers) {
    std::tie(code, out) = Shell("podman wait " + w);
    EXPECT_EQ(code, 0) << out;
    EXPECT_EQ(out, "0\n") << w << ": " << Shell("podman logs " + w).second;
  }
  for (int r = 0; r < 2; ++r) {
    shardps::WorkerSummary s;
    absl::Status read =
        ps::ReadJsonFile(absl::StrCat(dir_, "/run/summary-", r, ".json"), &s);
    ASSERT_TRUE(read.ok()) << read;
    EXPECT_EQ(s.rank(), r);
    EXPECT_EQ(s.steps(), 50u);
    EXPECT_EQ(s.partition_records(), 30000u);  // 60,000 images / 2
    // Fashion-MNIST's test set has 1,000 images of each of 10 classes
    // (chance 0.1); 2 x 50 steps of 64 reach about 0.75 outside the image.
    if (r == 0) {
      EXPECT_GE(s.test_accuracy(), 0.55);
    }
  }
  for (const std::string& s : servers) {
    std::tie(code, out) = Shell("podman stop -t 10 " + s);
    EXPECT_EQ(code, 0) << out;
    EXPECT_NE(Shell("podman logs " + s).second.find("stopped"),
              std::string::npos);  // a clean SIGTERM exit
  }
}

}  // namespace
