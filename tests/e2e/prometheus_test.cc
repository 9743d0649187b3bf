// A real Prometheus (Debian's, started here on loopback) scrapes a 2-server,
// 2-worker shardps-launch run through the run's targets file and answers
// queries about it: the push rate, every process up, the workers' steps and
// the per-worker clock lag.
#include <curl/curl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "ps/base/child_process.h"
#include "util/data.h"
#include "util/files.h"
#include "util/launch.h"
#include "util/metrics_text.h"
#include "util/processes.h"

namespace worker {
namespace {

constexpr char kPrometheus[] = "/usr/bin/prometheus";

class PrometheusTest : public testing::Test {
 protected:
  void SetUp() override {
    if (::access(kPrometheus, X_OK) != 0) {
      GTEST_SKIP() << kPrometheus
                   << " is not installed (deploy/install-deps.sh installs "
                      "Debian's prometheus)";
    }
    ASSERT_EQ(testutil::MakeSyntheticData(
                  dir_ + "/data",
                  "--samples 4000 --features 16 --classes 3 --shards 2"),
              0);
  }

  // Starts Prometheus scraping the targets in `targets_file` every 250 ms;
  // returns once it is ready.
  void StartPrometheus(const std::string& targets_file) {
    const std::string config = dir_ + "/prometheus.yml";
    testutil::WriteFile(config, absl::StrCat("global:\n"
                                             "  scrape_interval: 250ms\n"
                                             "  scrape_timeout: 200ms\n"
                                             "scrape_configs:\n"
                                             "  - job_name: shardps\n"
                                             "    file_sd_configs:\n"
                                             "      - files: ['",
                                             targets_file,
                                             "']\n"
                                             "        refresh_interval: 1s\n"));
    port_ = testutil::FreeLoopbackPort();
    auto p = ps::ChildProcess::Start(
        "prometheus",
        {kPrometheus, "--config.file=" + config,
         "--storage.tsdb.path=" + dir_ + "/tsdb",
         absl::StrCat("--web.listen-address=127.0.0.1:", port_)},
        dir_ + "/prometheus.log");
    ASSERT_TRUE(p.ok()) << p.status();
    prometheus_ = *std::move(p);
    const absl::Time give_up = absl::Now() + absl::Seconds(60);
    while (!testutil::HttpGet(Url("/-/ready")).ok()) {
      ASSERT_LT(absl::Now(), give_up)
          << "Prometheus not ready: "
          << testutil::ReadFile(dir_ + "/prometheus.log");
      ASSERT_TRUE(prometheus_->running())
          << testutil::ReadFile(dir_ + "/prometheus.log");
      absl::SleepFor(absl::Milliseconds(100));
    }
  }

  std::string Url(const std::string& path) const {
    return absl::StrCat("http://127.0.0.1:", port_, path);
  }

  // The value of an instant query whose result is one number (a scalar or
  // a vector of one sample); NaN for an empty result.
  double Query(const std::string& expr) {
    char* escaped = curl_escape(expr.c_str(), static_cast<int>(expr.size()));
    const std::string url = Url(absl::StrCat("/api/v1/query?query=", escaped));
    curl_free(escaped);
    absl::StatusOr<std::string> body = testutil::HttpGet(url);
    EXPECT_TRUE(body.ok()) << body.status();
    if (!body.ok()) return std::nan("");
    EXPECT_NE(body->find(R"("status":"success")"), std::string::npos)
        << expr << ": " << *body;
    // ... "value":[<time>,"<number>"] ...
    const size_t value = body->find(R"("value":[)");
    if (value == std::string::npos) return std::nan("");
    const size_t open = body->find('"', body->find(',', value));
    const size_t close = body->find('"', open + 1);
    double v = std::nan("");
    EXPECT_TRUE(absl::SimpleAtod(body->substr(open + 1, close - open - 1), &v))
        << *body;
    return v;
  }

  testutil::ScopedTempDir tmp_{"shardps-prometheus"};
  const std::string dir_ = tmp_.path();
  int port_ = 0;
  std::unique_ptr<ps::ChildProcess> prometheus_;
};

TEST_F(PrometheusTest, ScrapesALaunchedRunAndAnswersThePushRate) {
  const std::string run = dir_ + "/run";
  ASSERT_EQ(::mkdir(run.c_str(), 0755), 0);
  const std::string targets = run + "/prometheus-targets.json";
  ASSERT_NO_FATAL_FAILURE(StartPrometheus(targets));
  const int base = testutil::FreePortRun(4);
  ASSERT_GT(base, 0);
  // About 14 s of training: Prometheus applies newly discovered targets
  // within 5 s, then scrapes every process every 250 ms.
  const absl::Time start = absl::Now();
  absl::Status s = testutil::RunLaunch(
      {"--servers=2", "--workers=2", "--run_dir=" + run,
       "--data=" + dir_ + "/data", absl::StrCat("--metrics_port=", base), "--",
       "--model=mlp:16-8-3", "--batch=32", "--epochs=10",
       "--emulate_compute_ms=20"},
      dir_ + "/launch.log");
  ASSERT_TRUE(s.ok()) << s << testutil::ReadFile(dir_ + "/launch.log");
  const shardps::RunSummary summary = testutil::ReadRunSummary(run);
  ASSERT_TRUE(summary.ok()) << summary.error();
  const int seconds =
      static_cast<int>(absl::ToDoubleSeconds(absl::Now() - start)) + 5;
  const std::string window = absl::StrCat("[", seconds, "s]");
  EXPECT_NE(testutil::ReadFile(targets).find(absl::StrCat("127.0.0.1:", base)),
            std::string::npos);

  // Every process was scraped, under the labels of the targets file.
  EXPECT_EQ(Query(absl::StrCat("count(max_over_time(up{role=\"server\"}",
                               window, ") == 1)")),
            2)
      << testutil::ReadFile(dir_ + "/prometheus.log");
  EXPECT_EQ(Query(absl::StrCat("count(max_over_time(up{role=\"worker\"}",
                               window, ") == 1)")),
            2);
  // The push rate while training, summed over the servers.
  const double rate = Query(absl::StrCat(
      "max_over_time(sum(rate(shardps_server_requests_total{method=\"Push\"}"
      "[2s]))[",
      seconds, "s:250ms])"));
  EXPECT_GT(rate, 0);
  // Two workers of about 50 steps/s at most (20 ms of emulated compute),
  // one push per step and server.
  EXPECT_LE(rate, 2 * 2 * 55.0);
  // No scrape saw more pushes than the run made: each worker's steps on
  // each of the 2 servers.
  uint64_t steps = 0;
  for (const shardps::WorkerSummary& w : summary.per_worker()) {
    steps += w.steps();
  }
  const double pushes = Query(absl::StrCat(
      "sum(max_over_time(shardps_server_requests_total{method=\"Push\"}",
      window, "))"));
  EXPECT_GT(pushes, 0);
  EXPECT_LE(pushes, 2.0 * steps);
  // The workers' own series: steps and a histogram per phase.
  const double worker1_steps = Query(absl::StrCat(
      "max_over_time(shardps_worker_steps_total{process=\"worker-1\"}", window,
      ")"));
  EXPECT_GT(worker1_steps, 0);
  EXPECT_LE(worker1_steps, summary.per_worker(1).steps());
  EXPECT_EQ(Query(absl::StrCat(
                "count(max_over_time(shardps_worker_step_seconds_count{"
                "process=\"worker-0\"}",
                window, "))")),
            4);
  // A clock lag per server and worker.
  EXPECT_EQ(
      Query(absl::StrCat("count(max_over_time(shardps_server_worker_clock_lag",
                         window, "))")),
      4);
}

}  // namespace
}  // namespace worker
