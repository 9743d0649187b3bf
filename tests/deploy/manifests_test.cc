// The compose file and the Kubernetes manifests, validated offline:
// `docker-compose config` (Debian's docker-compose), and `kubectl
// kustomize` rendered and checked against the Kubernetes schemas with the
// npm package kubernetes-models (deploy/k8s/validate, installed by
// deploy/install-deps.sh). A deliberately broken manifest must fail, so the
// validator is known to be able to.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "util/files.h"
#include "util/processes.h"

namespace {

using testutil::Shell;

const std::string kSource = SHARDPS_SOURCE_DIR;

// Runs `command` in a shell; its exit code and output (stdout + stderr).
TEST(ComposeTest, ConfigIsValidAndHasEveryRole) {
  if (access("/usr/bin/docker-compose", X_OK) != 0) {
    GTEST_SKIP() << "docker-compose missing (deploy/install-deps.sh)";
  }
  const std::string file = kSource + "/deploy/compose.yaml";
  auto [code, out] = Shell("docker-compose -f " + file + " config -q");
  EXPECT_EQ(code, 0) << out;
  std::tie(code, out) =
      Shell("docker-compose -f " + file + " config --services");
  EXPECT_EQ(code, 0) << out;
  EXPECT_EQ(out, "data\nserver-0\nserver-1\nworker-0\nworker-1\nprometheus\n");
  std::tie(code, out) = Shell("docker-compose -f " + file + " config");
  // Workers name every server and wait for them and for the data.
  EXPECT_NE(out.find("--server_addrs=server-0:7070,server-1:7070"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("service_completed_successfully"), std::string::npos);
  // Prometheus only with --profile monitoring, reading the scrape config
  // whose targets are these services' metrics ports.
  EXPECT_NE(out.find("- monitoring"), std::string::npos) << out;
  EXPECT_NE(out.find("/deploy/prometheus/compose.yml:/etc/prometheus/"
                     "prometheus.yml:ro"),
            std::string::npos)
      << out;
  const std::string scrape =
      testutil::ReadFile(kSource + "/deploy/prometheus/compose.yml");
  for (const char* service : {"server-0", "server-1", "worker-0", "worker-1"}) {
    EXPECT_NE(scrape.find(absl::StrCat("\"", service, ":9100\"")),
              std::string::npos)
        << service;
  }
  size_t with_metrics = 0;
  for (size_t at = out.find("--metrics_port=9100"); at != std::string::npos;
       at = out.find("--metrics_port=9100", at + 1)) {
    ++with_metrics;
  }
  EXPECT_EQ(with_metrics, 4u) << out;
}

// The replicated variant: etcd, two replicas of each of two shards, each
// registering the service name the others reach it at, workers following
// the primaries through etcd.
TEST(ComposeTest, ReplicatedConfigHasEtcdAndTwoReplicasOfEachShard) {
  if (access("/usr/bin/docker-compose", X_OK) != 0) {
    GTEST_SKIP() << "docker-compose missing (deploy/install-deps.sh)";
  }
  const std::string file = kSource + "/deploy/compose-replicated.yaml";
  auto [code, out] = Shell("docker-compose -f " + file + " config -q");
  EXPECT_EQ(code, 0) << out;
  std::tie(code, out) =
      Shell("docker-compose -f " + file + " config --services");
  EXPECT_EQ(code, 0) << out;
  EXPECT_EQ(out,
            "data\netcd\nserver-0-r0\nserver-1-r0\nserver-0-r1\nserver-1-r1\n"
            "worker-0\nworker-1\n");
  std::tie(code, out) = Shell("docker-compose -f " + file + " config");
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("--advertise-client-urls=http://etcd:2379"),
            std::string::npos);
  for (int shard = 0; shard < 2; ++shard) {
    for (int replica = 0; replica < 2; ++replica) {
      const std::string service = absl::StrCat("server-", shard, "-r", replica);
      const size_t at = out.find("  " + service + ":\n");
      ASSERT_NE(at, std::string::npos) << service;
      const std::string entry = out.substr(at, out.find("volumes:", at) - at);
      for (const std::string& flag : {std::string("--etcd=http://etcd:2379"),
                                      absl::StrCat("--shard=", shard),
                                      absl::StrCat("--replica=", replica),
                                      "--advertise_host=" + service}) {
        EXPECT_NE(entry.find("- " + flag + "\n"), std::string::npos)
            << service << " lacks " << flag << "\n"
            << entry;
      }
      EXPECT_NE(entry.find("restart: on-failure"), std::string::npos) << entry;
    }
  }
  size_t workers = 0;
  for (size_t at = out.find("- --etcd=http://etcd:2379\n    - --num_servers=2");
       at != std::string::npos;
       at = out.find("- --etcd=http://etcd:2379\n    - --num_servers=2",
                     at + 1)) {
    ++workers;
  }
  EXPECT_EQ(workers, 2u) << out;
  EXPECT_EQ(out.find("--server_addrs"), std::string::npos) << out;
}

// The Prometheus scrape configs of deploy/prometheus, checked by Debian's
// promtool; a broken one must fail, so the check is known to be able to.
TEST(PrometheusConfigTest, ScrapeConfigsAreValid) {
  if (access("/usr/bin/promtool", X_OK) != 0) {
    GTEST_SKIP() << "promtool missing (deploy/install-deps.sh installs "
                    "Debian's prometheus)";
  }
  for (const char* file : {"compose.yml", "kubernetes.yml"}) {
    auto [code, out] = Shell(absl::StrCat("promtool check config ", kSource,
                                          "/deploy/prometheus/", file));
    EXPECT_EQ(code, 0) << file << ": " << out;
  }
  testutil::ScopedTempDir tmp("shardps-promtool");
  const std::string broken = tmp.path() + "/broken.yml";
  testutil::WriteFile(
      broken,
      absl::StrReplaceAll(
          testutil::ReadFile(kSource + "/deploy/prometheus/compose.yml"),
          {{"scrape_interval: 5s", "scrape_interval: five"}}));
  auto [code, out] = Shell("promtool check config " + broken);
  EXPECT_NE(code, 0) << out;
}

class KubernetesTest : public testing::Test {
 protected:
  void SetUp() override {
    if (Shell("command -v kubectl").first != 0 ||
        Shell("command -v node").first != 0) {
      GTEST_SKIP() << "kubectl or node missing";
    }
    if (access((kSource + "/deploy/k8s/validate/node_modules").c_str(), F_OK) !=
        0) {
      GTEST_SKIP() << "deploy/k8s/validate/node_modules missing (run "
                      "deploy/install-deps.sh)";
    }
  }
  const std::string render_ = "kubectl kustomize " + kSource + "/deploy/k8s";
  const std::string validate_ =
      "node " + kSource + "/deploy/k8s/validate/validate.mjs";
};

TEST_F(KubernetesTest, RenderedManifestsMatchTheSchemas) {
  auto [code, out] = Shell(render_ + " | " + validate_);
  EXPECT_EQ(code, 0) << out;
  for (const char* object :
       {"valid: Service/shardps (v1)", "valid: Service/shardps-workers (v1)",
        "valid: StatefulSet/shardps-server (apps/v1)",
        "valid: Job/shardps-worker (batch/v1)", "valid: ConfigMap/"}) {
    EXPECT_NE(out.find(object), std::string::npos) << object << "\n" << out;
  }
}

TEST_F(KubernetesTest, KustomizationSetsTheShapeAndTheSafetySettings) {
  auto [code, out] = Shell(render_);
  ASSERT_EQ(code, 0) << out;
  for (const char* want :
       {"completionMode: Indexed", "completions: 2", "replicas: 2",
        "clusterIP: None", "serviceName: shardps",
        "--server_addrs=shardps-server-{i}.shardps:7070",
        "--num_servers=$(SHARDPS_SERVERS)", "SHARDPS_SERVERS: \"2\"",
        "runAsNonRoot: true", "readOnlyRootFilesystem: true",
        // The workers' pre-flight check (shardps-doctor) as an init
        // container with the workers' cluster flags.
        "initContainers:", "- shardps-doctor", "--wait_s=300",
        "readinessProbe:\n          grpc:\n            port: 7070"}) {
    EXPECT_NE(out.find(want), std::string::npos) << want;
  }
  // Both roles serve metrics on a port named `metrics`, behind the headless
  // Services that the Kubernetes scrape config resolves.
  size_t metric_ports = 0;
  for (size_t at = out.find("--metrics_port=9100"); at != std::string::npos;
       at = out.find("--metrics_port=9100", at + 1)) {
    ++metric_ports;
  }
  EXPECT_EQ(metric_ports, 2u) << out;
  size_t named_ports = 0;
  for (size_t at = out.find("- containerPort: 9100\n          name: metrics");
       at != std::string::npos;
       at =
           out.find("- containerPort: 9100\n          name: metrics", at + 1)) {
    ++named_ports;
  }
  EXPECT_EQ(named_ports, 2u) << out;
  const std::string scrape =
      testutil::ReadFile(kSource + "/deploy/prometheus/kubernetes.yml");
  for (const char* service : {"shardps", "shardps-workers"}) {
    EXPECT_NE(out.find(absl::StrCat("kind: Service\nmetadata:\n  labels:\n"
                                    "    app.kubernetes.io/part-of: shardps\n"
                                    "  name: ",
                                    service, "\n")),
              std::string::npos)
        << service << "\n"
        << out;
    EXPECT_NE(scrape.find(
                  absl::StrCat("\"", service, ".default.svc.cluster.local\"")),
              std::string::npos)
        << service;
  }
}

TEST_F(KubernetesTest, ABrokenManifestIsRejected) {
  auto [code, out] =
      Shell(render_ + " | sed 's/replicas: 2/replicas: two/' | " + validate_);
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("StatefulSet/shardps-server (apps/v1): data/spec/replicas "
                     "must be integer"),
            std::string::npos)
      << out;
}

}  // namespace
