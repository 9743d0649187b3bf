// End-to-end: the real shardps-server and shardps-bench binaries, started as
// separate processes the way a user or a launcher starts them.
#include <gtest/gtest.h>
#include <signal.h>

#include <regex>
#include <string>

#include "absl/strings/str_cat.h"
#include "ps/base/program.h"
#include "ps/base/server_process.h"
#include "ps/client/client.h"
#include "ps/coord/membership.h"
#include "util/etcd.h"
#include "util/files.h"
#include "util/processes.h"

namespace ps {
namespace {

class BinariesTest : public testing::Test {
 protected:
  ServerProcessOptions Options(std::string name) {
    ServerProcessOptions o;
    o.binary = SiblingBinary("shardps-server");
    o.run_dir = run_dir_;
    o.name = std::move(name);
    o.extra_args = {"--job=e2e"};
    return o;
  }

  // Runs a command, returning its exit code and everything it printed.
  static int Run(const std::string& command, std::string* output) {
    auto [code, out] = testutil::Shell(command);
    *output = out;
    return code;
  }

  testutil::ScopedTempDir tmp_{"shardps-e2e"};
  const std::string run_dir_ = tmp_.path();
};

TEST_F(BinariesTest, ServerServesThenStopsCleanlyOnSigtermAndSigint) {
  for (int sig : {SIGTERM, SIGINT}) {
    SCOPED_TRACE(sig);
    absl::StatusOr<std::unique_ptr<ServerProcess>> server =
        ServerProcess::Spawn(Options(absl::StrCat("s", sig)));
    ASSERT_TRUE(server.ok()) << server.status();
    ClientOptions o;
    o.server_addrs = {(*server)->address()};
    o.job = "e2e";
    std::unique_ptr<Client> client = *Client::Connect(o);
    ASSERT_TRUE(client->WaitReady(absl::Seconds(10)).ok());
    TableOptions t;
    t.name = "w";
    t.num_params = 100;
    t.optimizer.set_name("sgd");
    t.optimizer.set_learning_rate(1);
    ASSERT_TRUE(client->CreateTable(t).ok());
    std::vector<float> v(100, 3.0f);
    ASSERT_TRUE(client->Push("w", 0, 100, v.data()).ok());
    ASSERT_TRUE(client->Pull("w", 0, 100, v.data()).ok());
    EXPECT_EQ(v[99], -3.0f);

    const pid_t pid = (*server)->pid();
    if (sig == SIGINT) {
      kill(pid, SIGINT);
    }
    absl::Status stopped = (*server)->Stop(absl::Seconds(10));
    EXPECT_TRUE(stopped.ok()) << stopped;
    const std::string log = testutil::ReadFile((*server)->log_path());
    EXPECT_NE(log.find(absl::StrCat("listening on ", (*server)->address())),
              std::string::npos)
        << log;
    EXPECT_NE(log.find(sig == SIGTERM ? "SIGTERM received" : "SIGINT received"),
              std::string::npos)
        << log;
    EXPECT_NE(log.find("stopped"), std::string::npos) << log;
  }
}

TEST_F(BinariesTest, HungServerGivesAnErrorWithinTheDeadline) {
  // A stopped (SIGSTOP) server accepts no bytes: the client's TCP buffers
  // fill with a large push and gRPC holds the rest. Calls must still end at
  // their deadline, and the caller's memory must be safe to free afterwards.
  absl::StatusOr<std::unique_ptr<ServerProcess>> server =
      ServerProcess::Spawn(Options("hung"));
  ASSERT_TRUE(server.ok()) << server.status();
  ClientOptions o;
  o.server_addrs = {(*server)->address()};
  o.job = "e2e";
  o.rpc_timeout = absl::Seconds(2);
  std::unique_ptr<Client> client = *Client::Connect(o);
  TableOptions t;
  t.name = "w";
  t.num_params = 16 << 20;
  t.optimizer.set_name("sgd");
  t.optimizer.set_learning_rate(1);
  ASSERT_TRUE(client->CreateTable(t).ok());
  kill((*server)->pid(), SIGSTOP);
  for (int round = 0; round < 2; ++round) {
    auto grad = std::make_unique<std::vector<float>>(t.num_params, 1.0f);
    const absl::Time start = absl::Now();
    absl::Status push = client->Push("w", 0, t.num_params, grad->data());
    const absl::Duration took = absl::Now() - start;
    EXPECT_TRUE(absl::IsDeadlineExceeded(push)) << push;
    EXPECT_NE(push.message().find((*server)->address()), std::string::npos)
        << push;
    EXPECT_LT(took, absl::Seconds(6)) << "round " << round;
    grad.reset();  // freed while the connection is still stuck
    std::vector<float> out(1000);
    EXPECT_FALSE(client->Pull("w", 0, 1000, out.data()).ok());
  }
  kill((*server)->pid(), SIGCONT);
  EXPECT_TRUE((*server)->Stop().ok());
}

TEST_F(BinariesTest, ServerRefusesBadFlagsAndBusyPortsWithAClearMessage) {
  ServerProcessOptions bad = Options("bad");
  bad.extra_args.push_back("--port=99999");
  absl::StatusOr<std::unique_ptr<ServerProcess>> r = ServerProcess::Spawn(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("exit code 2"), std::string::npos)
      << r.status();
  EXPECT_NE(r.status().message().find("--port=99999"), std::string::npos)
      << r.status();

  absl::StatusOr<std::unique_ptr<ServerProcess>> first =
      ServerProcess::Spawn(Options("first"));
  ASSERT_TRUE(first.ok()) << first.status();
  ServerProcessOptions busy = Options("busy");
  busy.extra_args.push_back(absl::StrCat("--port=", (*first)->port()));
  r = ServerProcess::Spawn(busy);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("cannot listen on 127.0.0.1:" +
                                      std::to_string((*first)->port())),
            std::string::npos)
      << r.status();
}

TEST_F(BinariesTest, HelpDocumentsFlagsWithDefaults) {
  std::string out;
  Run(absl::StrCat(SiblingBinary("shardps-server"), " --help"), &out);
  for (const char* flag : {"--host", "--port", "--port_file", "--job",
                           "--max_message_mb", "--shutdown_grace_s"}) {
    EXPECT_NE(out.find(flag), std::string::npos) << flag << "\n" << out;
  }
  EXPECT_NE(out.find("default: 0"), std::string::npos) << out;
  Run(absl::StrCat(SiblingBinary("shardps-bench"), " --help"), &out);
  for (const char* flag :
       {"--spawn_servers", "--replicas", "--server_addrs", "--num_servers",
        "--etcd", "--workers", "--params", "--seconds", "--json", "--chunk_kb",
        "--channels_per_server", "--inflight", "--mode", "--dim",
        "--ids_per_call", "--id_space", "--zipf", "--row_sharding"}) {
    EXPECT_NE(out.find(flag), std::string::npos) << flag << "\n" << out;
  }
}

TEST_F(BinariesTest, BenchPrintsOneJsonLineWithEveryFigure) {
  std::string out;
  const int code =
      Run(absl::StrCat(SiblingBinary("shardps-bench"),
                       " --spawn_servers=2 --workers=2 --params=100000"
                       " --seconds=0.3 --json --compression=fp16"),
          &out);
  ASSERT_EQ(code, 0) << out;
  const std::regex line(
      R"(\{"servers":2,"replicas":1,"workers":2,"params":100000,)"
      R"("compression":"fp16","push_chunk_kb":1024,"pull_chunk_kb":1024,)"
      R"("push_MBps":([0-9.]+),"pull_MBps":([0-9.]+),)"
      R"("push_wire_MBps":([0-9.]+),"pull_wire_MBps":([0-9.]+),)"
      R"("push_p50_ms":([0-9.]+),"push_p99_ms":([0-9.]+),)"
      R"("pull_p50_ms":([0-9.]+),"pull_p99_ms":([0-9.]+),)"
      R"("push_pull_MBps":([0-9.]+),"push_pull_p50_ms":([0-9.]+),)"
      R"("push_pull_p99_ms":([0-9.]+)\})");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(out, m, line)) << out;
  for (int i = 1; i <= 11; ++i) EXPECT_GT(std::stod(m[i]), 0) << m[0];
  // fp16 moves half the bytes of the float32 parameters it carries.
  EXPECT_LT(std::stod(m[3]), 0.6 * std::stod(m[1])) << m[0];
  EXPECT_LT(std::stod(m[4]), 0.6 * std::stod(m[2])) << m[0];
}

// Zipf ids (id 0 the hottest) over 4 servers: hashing spreads the hot rows,
// ranges put them all on shard 0; the servers' own counters say so.
TEST_F(BinariesTest, SparseBenchReportsEachServersLoad) {
  const std::regex line(
      R"re(\{"mode":"sparse","servers":4,"workers":2,"sharding":"(\w+)",)re"
      R"("dim":16,"ids_per_call":2000,"id_space":100000,"zipf":1.10,)"
      R"("compression":"none","distinct_per_call":([0-9]+),)"
      R"("push_ids_per_s":([0-9]+),"push_rows_per_s":([0-9]+),)"
      R"("push_p50_ms":[0-9.]+,"push_p99_ms":[0-9.]+,)"
      R"("pull_ids_per_s":([0-9]+),"pull_rows_per_s":([0-9]+),)"
      R"("pull_p50_ms":[0-9.]+,"pull_p99_ms":[0-9.]+,)"
      R"("dense_push_rows_per_s":([0-9]+),"push_cost_vs_dense":([0-9.]+),)"
      R"("server_rows_per_s":\[([0-9]+),([0-9]+),([0-9]+),([0-9]+)\],)"
      R"("server_bytes_per_s":\[[0-9,]+\],"load_max_over_mean":([0-9.]+)\})");
  double max_over_mean[2];
  const char* shardings[] = {"hash", "range"};
  for (int i = 0; i < 2; ++i) {
    std::string out;
    ASSERT_EQ(Run(absl::StrCat(SiblingBinary("shardps-bench"),
                               " --mode=sparse --spawn_servers=4 --workers=2"
                               " --ids_per_call=2000 --id_space=100000"
                               " --seconds=0.3 --json --row_sharding=",
                               shardings[i]),
                  &out),
              0)
        << out;
    std::smatch m;
    ASSERT_TRUE(std::regex_search(out, m, line)) << out;
    EXPECT_EQ(m[1], shardings[i]);
    // Zipf ids repeat: fewer distinct rows travel than ids are asked for.
    const double distinct = std::stod(m[2]);
    EXPECT_GT(distinct, 100);
    EXPECT_LT(distinct, 2000);
    for (int k : {3, 4, 5, 6, 7, 8}) EXPECT_GT(std::stod(m[k]), 0) << m[0];
    EXPECT_NEAR(std::stod(m[4]) / std::stod(m[3]), distinct / 2000, 0.01);
    for (int k = 9; k <= 12; ++k) EXPECT_GT(std::stod(m[k]), 0) << m[0];
    max_over_mean[i] = std::stod(m[13]);
    if (i == 1) {  // range: shard 0 holds the hot ids
      for (int k = 10; k <= 12; ++k) {
        EXPECT_GT(std::stod(m[9]), 3 * std::stod(m[k])) << m[0];
      }
    }
  }
  EXPECT_LT(max_over_mean[0], 1.2);
  EXPECT_GT(max_over_mean[1], 2.0);
}

TEST_F(BinariesTest, SparseBenchRefusesBadFlagsByName) {
  std::string out;
  const std::string bench = SiblingBinary("shardps-bench");
  EXPECT_EQ(Run(bench + " --mode=rows --spawn_servers=1", &out), 1);
  EXPECT_NE(out.find("--mode must be dense or sparse"), std::string::npos)
      << out;
  EXPECT_EQ(Run(bench + " --mode=sparse --zipf=0.5 --spawn_servers=1", &out),
            1);
  EXPECT_NE(out.find("--zipf must be 0"), std::string::npos) << out;
  EXPECT_EQ(Run(bench + " --mode=sparse --row_sharding=mod", &out), 1);
  EXPECT_NE(out.find("--row_sharding must be hash or range"), std::string::npos)
      << out;
}

TEST_F(BinariesTest, BenchMeasuresReplicatedServers) {
  if (!testutil::HaveEtcd()) {
    GTEST_SKIP() << testutil::kEtcd
                 << " is missing (deploy/install-deps.sh installs etcd-server)";
  }
  std::string out;
  const int code =
      Run(absl::StrCat(SiblingBinary("shardps-bench"),
                       " --spawn_servers=2 --replicas=2 --workers=1"
                       " --params=100000 --seconds=0.3 --json"),
          &out);
  ASSERT_EQ(code, 0) << out;
  const std::regex line(
      R"(\{"servers":2,"replicas":2,"workers":1,"params":100000,)"
      R"("compression":"none","push_chunk_kb":256,"pull_chunk_kb":1024,)"
      R"("push_MBps":([0-9.]+),"pull_MBps":([0-9.]+),)");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(out, m, line)) << out;
  EXPECT_GT(std::stod(m[1]), 0) << m[0];
  EXPECT_GT(std::stod(m[2]), 0) << m[0];
  // Replicas need servers the bench starts itself.
  EXPECT_EQ(Run(absl::StrCat(SiblingBinary("shardps-bench"),
                             " --server_addrs=127.0.0.1:1 --replicas=2"),
                &out),
            1);
  EXPECT_NE(out.find("--replicas"), std::string::npos) << out;
}

TEST_F(BinariesTest, BenchFindsAReplicatedJobStartedElsewhereThroughEtcd) {
  if (!testutil::HaveEtcd()) {
    GTEST_SKIP() << testutil::kEtcd
                 << " is missing (deploy/install-deps.sh installs etcd-server)";
  }
  std::unique_ptr<EtcdProcess> etcd = testutil::StartEtcd(run_dir_);
  ASSERT_NE(etcd, nullptr);
  std::vector<std::unique_ptr<ServerProcess>> replicas;
  for (int r = 0; r < 2; ++r) {
    ServerProcessOptions o = Options(absl::StrCat("replica-", r));
    o.extra_args = {"--job=elsewhere", "--etcd=" + etcd->endpoint(),
                    "--shard=0", absl::StrCat("--replica=", r)};
    absl::StatusOr<std::unique_ptr<ServerProcess>> s = ServerProcess::Spawn(o);
    ASSERT_TRUE(s.ok()) << s.status();
    replicas.push_back(*std::move(s));
  }
  // Both replicas ready in the layout before the bench reads it.
  std::unique_ptr<EtcdClient> client =
      testutil::EtcdClientFor(etcd->endpoint());
  ASSERT_NE(client, nullptr);
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  int ready = 0;
  while (ready < 2 && absl::Now() < deadline) {
    absl::StatusOr<JobLayout> layout = ReadLayout(*client, "elsewhere", 1);
    ready = 0;
    if (layout.ok()) {
      for (const ReplicaAddress& r : layout->shards[0].replicas) {
        ready += r.ready ? 1 : 0;
      }
    }
    if (ready < 2) absl::SleepFor(absl::Milliseconds(50));
  }
  ASSERT_EQ(ready, 2);
  std::string out;
  const std::string bench = absl::StrCat(
      SiblingBinary("shardps-bench"), " --etcd=", etcd->endpoint(),
      " --job=elsewhere --num_servers=1 --params=100000 --seconds=0.3 --json");
  ASSERT_EQ(Run(bench, &out), 0) << out;
  const std::regex line(
      R"(\{"servers":1,"replicas":2,"workers":1,"params":100000,)"
      R"("compression":"none","push_chunk_kb":256,"pull_chunk_kb":1024,)"
      R"("push_MBps":([0-9.]+),"pull_MBps":([0-9.]+),)");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(out, m, line)) << out;
  EXPECT_GT(std::stod(m[1]), 0) << m[0];
  EXPECT_GT(std::stod(m[2]), 0) << m[0];
  for (const auto& r : replicas) {
    EXPECT_TRUE(r->Stop(absl::Seconds(10)).ok());
  }
  EXPECT_EQ(Run(absl::StrCat(SiblingBinary("shardps-bench"),
                             " --etcd=", etcd->endpoint(), " --seconds=0.1"),
                &out),
            1);
  EXPECT_NE(out.find("--etcd needs --num_servers"), std::string::npos) << out;
}

TEST_F(BinariesTest, ServerNamesABadReplicationTokenFlag) {
  const std::string server =
      SiblingBinary("shardps-server") + " --host=127.0.0.1";
  std::string out;
  EXPECT_NE(Run(server + " --replication_token_file=" + run_dir_ +
                    "/missing.token --etcd=http://127.0.0.1:1",
                &out),
            0);
  EXPECT_NE(out.find("--replication_token_file: "), std::string::npos) << out;
  EXPECT_NE(out.find("missing.token"), std::string::npos) << out;
  EXPECT_NE(
      Run(server + " --replication_token_file=" + run_dir_ + "/any", &out), 0);
  EXPECT_NE(out.find("is for replicated servers (--etcd)"), std::string::npos)
      << out;
}

TEST_F(BinariesTest, BenchWithoutServersSaysWhatIsMissing) {
  std::string out;
  EXPECT_EQ(Run(SiblingBinary("shardps-bench"), &out), 1);
  EXPECT_NE(out.find("--server_addrs"), std::string::npos) << out;
  EXPECT_EQ(Run(absl::StrCat(SiblingBinary("shardps-bench"),
                             " --spawn_servers=1 --chunk_kb=-1"),
                &out),
            1);
  EXPECT_NE(out.find("--chunk_kb must be >= 0"), std::string::npos) << out;
}

}  // namespace
}  // namespace ps
