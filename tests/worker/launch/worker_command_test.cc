// WorkerCommand: a worker's command line, shardps-worker's or a Python
// script's, with the worker's own flags first and the launcher's after.
#include "worker/launch/worker_command.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace worker {
namespace {

using testing::ElementsAre;

LaunchOptions TwoWorkers() {
  LaunchOptions o;
  o.servers = 2;
  o.workers = 2;
  o.run_dir = "/runs/a";
  o.job = "j";
  o.worker_binary = "/bin/shardps-worker";
  o.worker_args = {"--epochs=2"};
  o.worker_hosts.resize(2);
  o.worker_hosts[0].address = "10.0.0.1";
  o.worker_hosts[1].address = "10.0.0.2";
  return o;
}

TEST(WorkerCommandTest, TheCppWorkerGetsItsFlagsThenTheLaunchers) {
  EXPECT_THAT(
      WorkerCommand(TwoWorkers(), {{"h:1", "h:2"}, ""}, 1, "worker-1"),
      ElementsAre("/bin/shardps-worker", "--epochs=2", "--server_addrs=h:1,h:2",
                  "--world=2", "--loader=parallel", "--overlap=none",
                  "--run_dir=/runs/a", "--job=j", "--rank=1"));
}

TEST(WorkerCommandTest, APythonScriptRunsThroughEnvWithThePackagesPath) {
  LaunchOptions o = TwoWorkers();
  o.worker_script = "/src/train.py";
  o.python_path = "/build/python";
  o.trace = true;
  o.metrics_port = 9000;
  o.replicas = 3;
  EXPECT_THAT(WorkerCommand(o, {{}, "http://127.0.0.1:2379"}, 0, "worker-0"),
              ElementsAre("/usr/bin/env", "PYTHONPATH=/build/python",
                          "/usr/bin/python3", "/src/train.py", "--epochs=2",
                          "--etcd=http://127.0.0.1:2379", "--world=2",
                          "--loader=parallel", "--overlap=none",
                          "--run_dir=/runs/a", "--job=j", "--num_servers=2",
                          "--rank=0", "--trace=/runs/a/worker-0.trace.json",
                          "--trace_name=worker-0",
                          // After the 2 x 3 server processes' ports.
                          "--metrics_port=9006", "--metrics_host=10.0.0.1"));
}

TEST(WorkerCommandTest, AnInstalledPackageNeedsNoPythonPath) {
  LaunchOptions o = TwoWorkers();
  o.worker_script = "/src/train.py";
  o.python = "/opt/python3";
  const std::vector<std::string> argv =
      WorkerCommand(o, {{"h:1", "h:2"}, ""}, 0, "worker-0");
  EXPECT_THAT(std::vector<std::string>(argv.begin(), argv.begin() + 3),
              ElementsAre("/opt/python3", "/src/train.py", "--epochs=2"));
}

}  // namespace
}  // namespace worker
