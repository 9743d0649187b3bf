// Prometheus metrics of servers and clients: the endpoint serves them over
// HTTP, and every counted call, byte and clock matches what happened.
#include <grpcpp/create_channel.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "proto/shardps.grpc.pb.h"
#include "ps/client/client.h"
#include "ps/client/client_metrics.h"
#include "ps/obs/metrics_endpoint.h"
#include "ps/obs/trace.h"
#include "ps/server/server.h"
#include "ps/server/server_metrics.h"
#include "util/files.h"
#include "util/metrics_text.h"
#include "util/servers.h"

namespace ps {
namespace {

using testutil::HttpGet;
using testutil::SeriesValue;

std::string Url(int port) {
  return absl::StrCat("http://127.0.0.1:", port, "/metrics");
}

TEST(MetricsEndpointTest, ServesItsRegistryAndCollectorsUntilStopped) {
  absl::StatusOr<std::unique_ptr<MetricsEndpoint>> endpoint =
      MetricsEndpoint::Start("127.0.0.1", 0);
  ASSERT_TRUE(endpoint.ok()) << endpoint.status();
  MetricsEndpoint& e = **endpoint;
  ASSERT_GT(e.port(), 0);
  prometheus::BuildCounter()
      .Name("test_things_total")
      .Help("h")
      .Register(e.registry())
      .Add({{"kind", "a"}})
      .Increment(3);
  int scrapes = 0;
  e.AddCollector([&scrapes] {
    auto family =
        MakeFamily("test_scrapes", "h", prometheus::MetricType::Gauge);
    AddSample(family, {{"who", "me"}}, ++scrapes);
    return std::vector<prometheus::MetricFamily>{family};
  });
  absl::StatusOr<std::string> page = HttpGet(Url(e.port()));
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ(SeriesValue(*page, R"(test_things_total{kind="a"})"), 3);
  EXPECT_EQ(SeriesValue(*page, R"(test_scrapes{who="me"})"), 1);
  page = HttpGet(Url(e.port()));
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ(SeriesValue(*page, R"(test_scrapes{who="me"})"), 2);
  EXPECT_TRUE(std::isnan(SeriesValue(*page, "test_absent")));

  e.Stop();
  EXPECT_FALSE(HttpGet(Url(e.port())).ok());
  EXPECT_EQ(scrapes, 2);
  e.Stop();  // idempotent
}

TEST(MetricsEndpointTest, ABusyPortIsAnErrorNamingTheAddress) {
  absl::StatusOr<std::unique_ptr<MetricsEndpoint>> first =
      MetricsEndpoint::Start("127.0.0.1", 0);
  ASSERT_TRUE(first.ok()) << first.status();
  const int port = (*first)->port();
  absl::StatusOr<std::unique_ptr<MetricsEndpoint>> second =
      MetricsEndpoint::Start("127.0.0.1", port);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(second.status().message().find(absl::StrCat("127.0.0.1:", port)),
            std::string::npos)
      << second.status();
  EXPECT_EQ(MetricsEndpoint::Start("127.0.0.1", 70000).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(StatsFamiliesTest, ClockLagIsTheDistanceToTheFastestWorker) {
  shardps::StatsResponse stats;
  stats.set_duplicate_pushes(2);
  shardps::TableStats* t = stats.add_tables();
  t->set_table("m");
  t->set_begin(100);
  t->set_end(164);
  t->set_version(50);
  t->set_restored_version(20);
  for (auto [worker, clock] : {std::pair{0, 9}, {1, 4}, {2, 9}}) {
    shardps::WorkerClock* w = t->add_worker_clocks();
    w->set_worker(worker);
    w->set_clock(clock);
  }
  const std::string page =
      prometheus::TextSerializer().Serialize(StatsFamilies(stats));
  EXPECT_EQ(SeriesValue(page, R"(shardps_server_table_keys{table="m"})"), 64);
  EXPECT_EQ(
      SeriesValue(page, R"(shardps_server_applied_updates_total{table="m"})"),
      30);
  EXPECT_EQ(
      SeriesValue(page, R"(shardps_server_worker_clock{table="m",worker="1"})"),
      4);
  EXPECT_EQ(
      SeriesValue(page,
                  R"(shardps_server_worker_clock_lag{table="m",worker="1"})"),
      5);
  EXPECT_EQ(
      SeriesValue(page,
                  R"(shardps_server_worker_clock_lag{table="m",worker="2"})"),
      0);
  EXPECT_EQ(SeriesValue(page, "shardps_server_duplicate_pushes_total"), 2);
}

// Two servers with metrics endpoints, and clients counting into their own
// registries: both sides' counts must agree call for call and byte for byte.
class ServerMetricsTest : public testing::Test {
 protected:
  static constexpr int kServers = 2;
  static constexpr uint64_t kParams = 1000;

  void SetUp() override {
    for (int i = 0; i < kServers; ++i) {
      ServerOptions o;
      o.host = "127.0.0.1";
      o.job = "test";
      o.metrics_port = 0;
      absl::StatusOr<std::unique_ptr<Server>> s = Server::Start(o);
      ASSERT_TRUE(s.ok()) << s.status();
      ASSERT_GT((*s)->metrics_port(), 0);
      addrs_.push_back((*s)->address());
      servers_.push_back(*std::move(s));
    }
  }

  std::unique_ptr<Client> Connect(uint32_t worker, ClientMetrics* metrics) {
    ClientOptions o;
    o.server_addrs = addrs_;
    o.job = "test";
    o.worker = worker;
    o.chunk_bytes = 512;  // several calls per shard
    o.metrics = metrics;
    absl::StatusOr<std::unique_ptr<Client>> c = Client::Connect(o);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *std::move(c) : nullptr;
  }

  std::string Page(int server) {
    absl::StatusOr<std::string> page =
        HttpGet(Url(servers_[server]->metrics_port()));
    EXPECT_TRUE(page.ok()) << page.status();
    return page.value_or("");
  }

  std::vector<std::string> addrs_;
  std::vector<std::unique_ptr<Server>> servers_;
};

TEST_F(ServerMetricsTest, BothSidesCountEveryCallByteAndClock) {
  prometheus::Registry registry0, registry1;
  ClientMetrics metrics0(registry0, kServers), metrics1(registry1, kServers);
  std::unique_ptr<Client> worker0 = Connect(0, &metrics0);
  std::unique_ptr<Client> worker1 = Connect(1, &metrics1);
  ASSERT_TRUE(worker0 && worker1);
  ASSERT_TRUE(worker0->CreateTable(testutil::ConstantTable(kParams, 1)).ok());
  ASSERT_TRUE(worker1->CreateTable(testutil::ConstantTable(kParams, 1)).ok());
  std::vector<float> grad(kParams, 0.01f), values(kParams);
  for (uint64_t clock = 0; clock < 5; ++clock) {
    ASSERT_TRUE(worker0->Push("w", 0, kParams, grad.data(), clock).ok());
    ASSERT_TRUE(worker0->Pull("w", 0, kParams, values.data(), clock).ok());
  }
  for (uint64_t clock = 0; clock < 2; ++clock) {
    ASSERT_TRUE(worker1->Push("w", 0, kParams, grad.data(), clock).ok());
  }
  // A Stats call for another job: refused, and counted with its code.
  auto stub = shardps::ParameterServer::NewStub(
      grpc::CreateChannel(addrs_[0], grpc::InsecureChannelCredentials()));
  shardps::StatsRequest request;
  request.set_job("other");
  shardps::StatsResponse response;
  grpc::ClientContext context;
  ASSERT_EQ(stub->Stats(&context, request, &response).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);

  const std::string client0 = testutil::RegistryText(registry0);
  const std::string client1 = testutil::RegistryText(registry1);
  double server_push_bytes = 0, server_pull_bytes = 0;
  for (int i = 0; i < kServers; ++i) {
    SCOPED_TRACE(i);
    const std::string page = Page(i);
    const std::string shard = absl::StrCat(i);
    auto client_calls = [&](const std::string& text, const char* method) {
      return SeriesValue(
          text, absl::StrCat(R"(shardps_client_rpcs_total{method=")", method,
                             R"(",shard=")", shard, R"("})"));
    };
    const double pushes =
        client_calls(client0, "Push") + client_calls(client1, "Push");
    const double pulls = client_calls(client0, "Pull");
    // 1000 keys in 512-byte chunks: at least 2 calls per shard and push.
    EXPECT_GE(pushes, 7 * 2);
    EXPECT_EQ(
        SeriesValue(page, R"(shardps_server_requests_total{method="Push"})"),
        pushes);
    EXPECT_EQ(
        SeriesValue(page, R"(shardps_server_requests_total{method="Pull"})"),
        pulls);
    EXPECT_EQ(
        SeriesValue(page,
                    R"(shardps_server_request_seconds_count{method="Push"})"),
        pushes);
    EXPECT_GT(SeriesValue(
                  page, R"(shardps_server_request_seconds_sum{method="Push"})"),
              0);
    // Every push was applied once.
    EXPECT_EQ(
        SeriesValue(page, R"(shardps_server_applied_updates_total{table="w"})"),
        pushes);
    EXPECT_EQ(SeriesValue(
                  page, R"(shardps_server_worker_clock{table="w",worker="0"})"),
              4);
    EXPECT_EQ(
        SeriesValue(page,
                    R"(shardps_server_worker_clock_lag{table="w",worker="1"})"),
        3);
    EXPECT_EQ(
        SeriesValue(page,
                    R"(shardps_server_worker_clock_lag{table="w",worker="0"})"),
        0);
    server_push_bytes += SeriesValue(
        page, R"(shardps_server_received_bytes_total{method="Push"})");
    server_pull_bytes +=
        SeriesValue(page, R"(shardps_server_sent_bytes_total{method="Pull"})");
    const double refused = SeriesValue(
        page,
        R"(shardps_server_errors_total{code="FAILED_PRECONDITION",method="Stats"})");
    if (i == 0) {
      EXPECT_EQ(refused, 1);
    } else {
      EXPECT_TRUE(std::isnan(refused)) << refused;
    }
  }
  // Byte for byte: what the clients sent is what the servers received.
  EXPECT_EQ(
      server_push_bytes,
      SeriesValue(client0,
                  R"(shardps_client_sent_bytes_total{method="Push"})") +
          SeriesValue(client1,
                      R"(shardps_client_sent_bytes_total{method="Push"})"));
  EXPECT_EQ(
      server_pull_bytes,
      SeriesValue(client0,
                  R"(shardps_client_received_bytes_total{method="Pull"})"));
  EXPECT_EQ(server_pull_bytes, static_cast<double>(worker0->pull_bytes()));
  EXPECT_EQ(SeriesValue(client0, "shardps_client_retries_total"), 0);
}

// Sparse tables' calls: counted per shard on both sides, byte for byte,
// traced as pull_rows_rpc / push_rows_rpc spans, and in the client's bytes.
TEST_F(ServerMetricsTest, RowCallsAreCountedTracedAndMatchTheServers) {
  prometheus::Registry registry;
  ClientMetrics metrics(registry, kServers);
  testutil::ScopedTempDir dir;
  const std::string trace_path = dir.path() + "/client.trace.json";
  std::unique_ptr<Client> client;
  {
    TraceOptions t;
    t.path = trace_path;
    t.process_name = "worker-0";
    absl::StatusOr<std::unique_ptr<Tracer>> tracer = Tracer::Open(t);
    ASSERT_TRUE(tracer.ok()) << tracer.status();
    ClientOptions o;
    o.server_addrs = addrs_;
    o.job = "test";
    o.chunk_bytes = 512;  // 32 rows of dim 4 a call
    o.metrics = &metrics;
    o.tracer = tracer->get();
    absl::StatusOr<std::unique_ptr<Client>> c = Client::Connect(o);
    ASSERT_TRUE(c.ok()) << c.status();
    client = *std::move(c);
    RowTableOptions table;
    table.name = "emb";
    table.dim = 4;
    table.max_rows_per_shard = 1000;
    table.optimizer.set_name("sgd");
    table.optimizer.set_learning_rate(0.1f);
    ASSERT_TRUE(client->CreateRowTable(table).ok());
    std::vector<uint64_t> ids;
    for (uint64_t i = 0; i < 300; ++i) ids.push_back(i * 31);
    std::vector<float> rows(ids.size() * 4);
    const std::vector<float> grads(ids.size() * 4, 0.5f);
    ASSERT_TRUE(client->PullRows("emb", ids, rows.data()).ok());
    ASSERT_TRUE(client->PushRows("emb", ids, grads.data()).ok());
    ASSERT_TRUE(client->PushRows("emb", ids, grads.data()).ok());
    client.reset();  // the tracer outlives the client's calls
  }
  const std::string text = testutil::RegistryText(registry);
  double pulls = 0, pushes = 0, server_sent = 0, server_received = 0;
  for (int i = 0; i < kServers; ++i) {
    const std::string page = Page(i);
    auto calls = [&](const char* method) {
      return SeriesValue(
          text, absl::StrCat(R"(shardps_client_rpcs_total{method=")", method,
                             R"(",shard=")", i, R"("})"));
    };
    // About 150 rows a shard, 32 a call: at least 4 calls each.
    EXPECT_GE(calls("PullRows"), 4) << i;
    EXPECT_EQ(calls("PushRows"), 2 * calls("PullRows")) << i;
    EXPECT_EQ(SeriesValue(
                  page, R"(shardps_server_requests_total{method="PullRows"})"),
              calls("PullRows"));
    EXPECT_EQ(SeriesValue(
                  page, R"(shardps_server_requests_total{method="PushRows"})"),
              calls("PushRows"));
    pulls += calls("PullRows");
    pushes += calls("PushRows");
    server_sent += SeriesValue(
        page, R"(shardps_server_sent_bytes_total{method="PullRows"})");
    server_received += SeriesValue(
        page, R"(shardps_server_received_bytes_total{method="PushRows"})");
  }
  EXPECT_EQ(
      server_sent,
      SeriesValue(text,
                  R"(shardps_client_received_bytes_total{method="PullRows"})"));
  EXPECT_EQ(server_received,
            SeriesValue(
                text, R"(shardps_client_sent_bytes_total{method="PushRows"})"));
  // Values alone: 300 rows of 4 floats pulled once, pushed twice.
  EXPECT_GT(server_sent, 300 * 4 * 4);
  EXPECT_GT(server_received, 2 * 300 * 4 * 4);
  const std::string trace = testutil::ReadFile(trace_path);
  auto count = [&](const std::string& name) {
    size_t n = 0;
    for (size_t at = trace.find(name); at != std::string::npos;
         at = trace.find(name, at + 1)) {
      ++n;
    }
    return static_cast<double>(n);
  };
  EXPECT_EQ(count("\"pull_rows_rpc\""), pulls);
  EXPECT_EQ(count("\"push_rows_rpc\""), pushes);
}

TEST_F(ServerMetricsTest, ClientMetricsMustCoverEveryServer) {
  prometheus::Registry registry;
  ClientMetrics one_shard(registry, 1);
  ClientOptions o;
  o.server_addrs = addrs_;
  o.metrics = &one_shard;
  EXPECT_EQ(Client::Connect(o).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ps
