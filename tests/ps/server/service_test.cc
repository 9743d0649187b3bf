// gRPC integration: three real servers on loopback ports in this process, a
// ps::Client, and the generated protobuf stub for requests a well-behaved
// client never sends.
#include <grpcpp/create_channel.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/security/credentials.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "proto/shardps.grpc.pb.h"
#include "ps/client/client.h"
#include "ps/server/server.h"
#include "ps/wire/value_codec.h"
#include "util/servers.h"

namespace ps {
namespace {

constexpr int kServers = 3;

class ServiceTest : public testing::Test {
 protected:
  void SetUp() override {
    servers_ = testutil::StartLocalServers(kServers, "test", &addrs_);
    ASSERT_EQ(servers_.size(), static_cast<size_t>(kServers));
  }

  std::unique_ptr<Client> Connect(size_t chunk_bytes = 1 << 20,
                                  std::string job = "test",
                                  absl::Duration timeout = absl::Seconds(30)) {
    ClientOptions o;
    o.server_addrs = addrs_;
    o.job = job;
    o.chunk_bytes = chunk_bytes;
    o.rpc_timeout = timeout;
    absl::StatusOr<std::unique_ptr<Client>> c = Client::Connect(o);
    EXPECT_TRUE(c.ok()) << c.status();
    // The servers of SetUp are ready; WaitReady would refuse another job.
    if (job == "test") {
      const absl::Status ready = (*c)->WaitReady(absl::Seconds(10));
      EXPECT_TRUE(ready.ok()) << ready;
    }
    return *std::move(c);
  }

  static TableOptions Table(std::string name, uint64_t p, float lr = 1.0f,
                            float init = 1.0f) {
    TableOptions t;
    t.name = std::move(name);
    t.num_params = p;
    t.optimizer.set_name("sgd");
    t.optimizer.set_learning_rate(lr);
    t.init.set_kind("constant");
    t.init.set_value(init);
    return t;
  }

  std::unique_ptr<shardps::ParameterServer::Stub> RawStub(int server) {
    return shardps::ParameterServer::NewStub(grpc::CreateChannel(
        addrs_[server], grpc::InsecureChannelCredentials()));
  }

  std::vector<std::string> addrs_;
  std::vector<std::unique_ptr<Server>> servers_;
};

TEST_F(ServiceTest, AnOlderClientsStringModeIsRefusedNotMisread) {
  // Before the consistency mode was an enum, a client sent "sync" as a
  // string in field 1. Read as today's message that is an unknown field
  // and the table would silently be async; the server refuses it instead.
  shardps::CreateTableRequest request;
  request.set_job("test");
  request.set_table("old");
  request.set_num_params(64);
  request.set_num_shards(1);
  request.mutable_optimizer()->set_name("sgd");
  request.mutable_optimizer()->set_learning_rate(0.1f);
  shardps::ConsistencyConfig* c = request.mutable_consistency();
  c->GetReflection()->MutableUnknownFields(c)->AddLengthDelimited(1, "sync");
  grpc::ClientContext context;
  shardps::CreateTableResponse response;
  const grpc::Status status =
      RawStub(0)->CreateTable(&context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("consistency has field number 1"),
            std::string::npos)
      << status.error_message();
  absl::StatusOr<std::vector<shardps::StatsResponse>> stats =
      Connect()->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ((*stats)[0].tables_size(), 0);  // nothing was created
}

TEST_F(ServiceTest, PullAndPushAcrossShardBoundaries) {
  // 64-byte chunks: every shard's piece becomes many calls in flight.
  for (size_t chunk : {size_t{64}, size_t{1} << 20}) {
    SCOPED_TRACE(chunk);
    std::unique_ptr<Client> client = Connect(chunk);
    const std::string name = absl::StrCat("t", chunk);
    const uint64_t p = 1000;
    ASSERT_TRUE(client->CreateTable(Table(name, p)).ok());
    // [300, 700) spans all three shards' boundaries (336 and 672).
    std::vector<float> grad(400);
    for (int i = 0; i < 400; ++i) grad[i] = static_cast<float>(i % 7);
    ASSERT_TRUE(client->Push(name, 300, 700, grad.data(), 1).ok());
    ASSERT_TRUE(client->Push(name, 300, 700, grad.data(), 2).ok());
    std::vector<float> all(p);
    ASSERT_TRUE(client->Pull(name, 0, p, all.data()).ok());
    for (uint64_t k = 0; k < p; ++k) {
      const float expect =
          (k >= 300 && k < 700) ? 1.0f - 2 * grad[k - 300] : 1.0f;
      ASSERT_EQ(all[k], expect) << "key " << k;
    }
    // A sub-range inside one shard, and one crossing a boundary.
    std::vector<float> part(10);
    ASSERT_TRUE(client->Pull(name, 330, 340, part.data()).ok());
    for (int i = 0; i < 10; ++i) EXPECT_EQ(part[i], all[330 + i]);
  }
}

TEST_F(ServiceTest, SixtyFourMebibyteTableRoundTrips) {
  // 8 MiB chunks exceed gRPC's default 4 MiB message cap on purpose.
  for (size_t chunk : {size_t{1} << 20, size_t{8} << 20}) {
    SCOPED_TRACE(chunk);
    std::unique_ptr<Client> client = Connect(chunk);
    const uint64_t p = (64 << 20) / sizeof(float);
    const std::string name = absl::StrCat("big", chunk);
    ASSERT_TRUE(client->CreateTable(Table(name, p, 1.0f, 0.0f)).ok());
    std::vector<float> grad(p);
    for (uint64_t k = 0; k < p; ++k) grad[k] = static_cast<float>(k % 1000);
    ASSERT_TRUE(client->Push(name, 0, p, grad.data()).ok());
    std::vector<float> out(p, 12345.0f);
    ASSERT_TRUE(client->Pull(name, 0, p, out.data()).ok());
    for (uint64_t k = 0; k < p; ++k) {
      ASSERT_EQ(out[k], -static_cast<float>(k % 1000)) << "key " << k;
    }
  }
}

TEST_F(ServiceTest, BadRequestsGetTheirCodeAndChangeNothing) {
  std::unique_ptr<Client> client = Connect();
  const uint64_t p = 1000;
  ASSERT_TRUE(client->CreateTable(Table("w", p, 1.0f, 2.0f)).ok());
  // Server 0 owns [0, 336).
  std::unique_ptr<shardps::ParameterServer::Stub> stub = RawStub(0);
  auto push = [&](const std::string& job, const std::string& table,
                  uint64_t begin, uint64_t end, std::vector<float> grad) {
    shardps::PushRequest r;
    r.set_job(job);
    r.set_table(table);
    r.set_begin(begin);
    r.set_end(end);
    r.set_gradient(std::string(reinterpret_cast<const char*>(grad.data()),
                               grad.size() * sizeof(float)));
    shardps::PushResponse reply;
    grpc::ClientContext context;
    return stub->Push(&context, r, &reply);
  };
  auto encoded_push = [&](int encoding, uint64_t begin, uint64_t end,
                          std::string bytes) {
    shardps::PushRequest r;
    r.set_job("test");
    r.set_table("w");
    r.set_begin(begin);
    r.set_end(end);
    r.set_encoding(static_cast<shardps::ValueEncoding>(encoding));
    r.set_gradient(std::move(bytes));
    shardps::PushResponse reply;
    grpc::ClientContext context;
    return stub->Push(&context, r, &reply);
  };
  auto pull = [&](const std::string& job, const std::string& table,
                  uint64_t begin, uint64_t end,
                  shardps::ValueEncoding encoding = shardps::FLOAT32) {
    shardps::PullRequest r;
    r.set_job(job);
    r.set_table(table);
    r.set_begin(begin);
    r.set_end(end);
    r.set_encoding(encoding);
    shardps::PullResponse reply;
    grpc::ClientContext context;
    return stub->Pull(&context, r, &reply);
  };
  std::vector<float> nan(8, 1.0f);
  nan[5] = std::nanf("");
  struct Case {
    const char* what;
    grpc::Status status;
    grpc::StatusCode code;
    const char* message;
  } cases[] = {
      {"push past the shard",
       push("test", "w", 330, 340, std::vector<float>(10)),
       grpc::StatusCode::INVALID_ARGUMENT, "outside this shard"},
      {"push inverted", push("test", "w", 20, 10, std::vector<float>(10)),
       grpc::StatusCode::INVALID_ARGUMENT, "inverted"},
      {"push short", push("test", "w", 0, 8, std::vector<float>(7)),
       grpc::StatusCode::INVALID_ARGUMENT, "needs 32"},
      {"push NaN", push("test", "w", 0, 8, nan),
       grpc::StatusCode::INVALID_ARGUMENT, "NaN"},
      {"push unknown table", push("test", "nope", 0, 8, std::vector<float>(8)),
       grpc::StatusCode::NOT_FOUND, "unknown table 'nope'"},
      {"push wrong job", push("other", "w", 0, 8, std::vector<float>(8)),
       grpc::StatusCode::FAILED_PRECONDITION, "job 'other'"},
      {"fp16 push of float32 length",
       encoded_push(shardps::FP16, 0, 8, std::string(32, '\0')),
       grpc::StatusCode::INVALID_ARGUMENT, "in fp16 needs 16"},
      {"fp16 push with an infinity",
       encoded_push(shardps::FP16, 0, 1, std::string("\x00\x7c", 2)),
       grpc::StatusCode::INVALID_ARGUMENT, "NaN or Inf"},
      {"onebit push with a NaN scale",
       encoded_push(shardps::ONEBIT, 0, 8,
                    std::string("\x00\x00\xc0\x7f\x00\x00\x00\x00\xff", 9)),
       grpc::StatusCode::INVALID_ARGUMENT, "NaN or Inf"},
      {"push of an unknown encoding",
       encoded_push(7, 0, 8, std::string(32, '\0')),
       grpc::StatusCode::INVALID_ARGUMENT, "unknown gradient encoding 7"},
      {"onebit pull", pull("test", "w", 0, 8, shardps::ONEBIT),
       grpc::StatusCode::INVALID_ARGUMENT, "pulls take float32, fp16 or bf16"},
      {"pull past the shard", pull("test", "w", 0, 337),
       grpc::StatusCode::INVALID_ARGUMENT, "outside this shard"},
      {"pull huge", pull("test", "w", 0, uint64_t{1} << 60),
       grpc::StatusCode::INVALID_ARGUMENT, "outside this shard"},
      {"pull unknown table", pull("test", "nope", 0, 8),
       grpc::StatusCode::NOT_FOUND, "nope"},
      {"pull wrong job", pull("other", "w", 0, 8),
       grpc::StatusCode::FAILED_PRECONDITION, "other"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(c.status.error_code(), c.code) << c.what;
    EXPECT_NE(c.status.error_message().find(c.message), std::string::npos)
        << c.what << ": " << c.status.error_message();
  }
  // A conflicting CreateTable.
  absl::Status conflict = client->CreateTable(Table("w", p, 0.5f, 2.0f));
  EXPECT_EQ(conflict.code(), absl::StatusCode::kAlreadyExists) << conflict;
  EXPECT_NE(conflict.message().find(addrs_[0]), std::string::npos) << conflict;
  // A client of another job: refused when it waits for the servers, and
  // if it does not, by each call.
  std::unique_ptr<Client> other = Connect(1 << 20, "other");
  const absl::Status refused = other->WaitReady(absl::Seconds(10));
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
  EXPECT_NE(refused.message().find("job 'other'"), std::string::npos)
      << refused;
  absl::Status wrong_job = other->CreateTable(Table("x", p));
  EXPECT_EQ(wrong_job.code(), absl::StatusCode::kFailedPrecondition);
  // A NaN anywhere in a multi-shard push: refused before any shard applies.
  std::vector<float> grad(p, 1.0f);
  grad[900] = std::numeric_limits<float>::infinity();
  absl::Status inf = client->Push("w", 0, p, grad.data());
  EXPECT_EQ(inf.code(), absl::StatusCode::kInvalidArgument) << inf;
  // Ranges outside the table, and tables the client never created.
  std::vector<float> out(p + 1);
  EXPECT_EQ(client->Pull("w", 0, p + 1, out.data()).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(client->Pull("w", 10, 5, out.data()).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(client->Pull("nope", 0, 1, out.data()).code(),
            absl::StatusCode::kNotFound);

  // After all of that, nothing changed.
  ASSERT_TRUE(client->Pull("w", 0, p, out.data()).ok());
  for (uint64_t k = 0; k < p; ++k) ASSERT_EQ(out[k], 2.0f) << "key " << k;
  absl::StatusOr<std::vector<shardps::StatsResponse>> stats = client->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  for (const auto& s : *stats) {
    ASSERT_EQ(s.tables_size(), 1);
    EXPECT_EQ(s.tables(0).version(), 0u);
    EXPECT_EQ(s.bytes_pushed(), 0u);
  }
  EXPECT_GE((*stats)[0].rejected_requests(), 15u);
}

TEST_F(ServiceTest, CompressedPullsAndPushesRoundTrip) {
  // Values a multiple of 1/8 below 256 are exact in fp16 and bf16, so with
  // lr 1 every result is exact too.
  const uint64_t p = 1000;
  for (shardps::ValueEncoding encoding : {shardps::FP16, shardps::BF16}) {
    SCOPED_TRACE(EncodingName(encoding));
    ClientOptions o;
    o.server_addrs = addrs_;
    o.job = "test";
    o.chunk_bytes = 1024;  // 256 keys a call
    o.pull_encoding = encoding;
    o.push_encoding = encoding;
    std::unique_ptr<Client> client = *Client::Connect(o);
    const std::string name = std::string("w") + EncodingName(encoding).data();
    const absl::Status created =
        client->CreateTable(Table(name, p, 1.0f, 0.5f));
    ASSERT_TRUE(created.ok()) << created;
    absl::StatusOr<std::vector<shardps::StatsResponse>> before =
        client->Stats();
    ASSERT_TRUE(before.ok());
    std::vector<float> grad(p);
    for (uint64_t k = 0; k < p; ++k) {
      grad[k] = (static_cast<int>(k % 61) - 30) / 8.0f;
    }
    ASSERT_TRUE(client->Push(name, 0, p, grad.data()).ok());
    std::vector<float> out(p);
    ASSERT_TRUE(client->Pull(name, 0, p, out.data()).ok());
    for (uint64_t k = 0; k < p; ++k) ASSERT_EQ(out[k], 0.5f - grad[k]) << k;
    // Two bytes a value on the wire, both ways, plus the calls' headers.
    EXPECT_LT(client->push_bytes(), 2 * p * 12 / 10);
    EXPECT_LT(client->pull_bytes(), 2 * p * 12 / 10);
    absl::StatusOr<std::vector<shardps::StatsResponse>> stats = client->Stats();
    ASSERT_TRUE(stats.ok());
    uint64_t pushed = 0, pulled = 0;
    for (int i = 0; i < kServers; ++i) {
      pushed += (*stats)[i].bytes_pushed() - (*before)[i].bytes_pushed();
      pulled += (*stats)[i].bytes_pulled() - (*before)[i].bytes_pulled();
    }
    EXPECT_EQ(pushed, 2 * p);
    EXPECT_EQ(pulled, 2 * p);
  }
}

TEST_F(ServiceTest, APushScalesTheLearningRate) {
  std::unique_ptr<Client> client = Connect();
  const uint64_t p = 1000;
  ASSERT_TRUE(client->CreateTable(Table("w", p, 0.5f, 0.0f)).ok());
  std::vector<float> grad(p, 1.0f), out(p);
  ASSERT_TRUE(client->Push("w", 0, p, grad.data(), 0, 0.25f).ok());
  ASSERT_TRUE(client->Pull("w", 0, p, out.data()).ok());
  for (uint64_t k = 0; k < p; ++k) ASSERT_EQ(out[k], -0.125f) << k;
  ASSERT_TRUE(client->Push("w", 0, p, grad.data(), 0, 0.0f).ok());
  ASSERT_TRUE(client->Pull("w", 0, p, out.data()).ok());
  EXPECT_EQ(out[0], -0.125f) << "a zero scale changes nothing";
  EXPECT_TRUE(
      absl::IsInvalidArgument(client->Push("w", 0, p, grad.data(), 0, -1.0f)));
}

TEST_F(ServiceTest, OneBitPushesFeedTheirErrorBack) {
  // Each push is quantized to two values per block of 256; the error is
  // kept and added to the next push, so over many pushes the servers'
  // values follow the exact sum of the gradients.
  const uint64_t p = 3000;
  ClientOptions o;
  o.server_addrs = addrs_;
  o.job = "test";
  o.chunk_bytes = 1024;  // chunks of 256 keys
  o.push_encoding = shardps::ONEBIT;
  std::unique_ptr<Client> client = *Client::Connect(o);
  ASSERT_TRUE(client->CreateTable(Table("w", p, 1.0f, 0.0f)).ok());
  std::vector<float> grad(p), zeros(p), decoded(p);
  std::vector<double> sum(p, 0.0), open_loop(p, 0.0);
  std::vector<char> bytes(EncodedBytes(shardps::ONEBIT, 256));
  const int pushes = 100;
  for (int t = 0; t < pushes; ++t) {
    for (uint64_t k = 0; k < p; ++k) {
      grad[k] = std::sin(0.01 * k * (t + 1)) * 0.1f + (k % 3 == 0 ? 0.02f : 0);
      sum[k] += grad[k];
    }
    ASSERT_TRUE(client->Push("w", 0, p, grad.data()).ok());
    // The same quantization without error feedback, for comparison.
    for (uint64_t b = 0; b < p; b += 256) {
      const uint64_t n = std::min<uint64_t>(256, p - b);
      std::fill(zeros.begin(), zeros.end(), 0.0f);
      EncodeOneBit(&grad[b], zeros.data(), n, bytes.data());
      DecodeOneBit(bytes.data(), n, &decoded[b]);
    }
    for (uint64_t k = 0; k < p; ++k) open_loop[k] += decoded[k];
  }
  std::vector<float> out(p);
  ASSERT_TRUE(client->Pull("w", 0, p, out.data()).ok());
  double error = 0, open_loop_error = 0;
  for (uint64_t k = 0; k < p; ++k) {
    error += std::fabs(-out[k] - sum[k]);
    open_loop_error += std::fabs(open_loop[k] - sum[k]);
  }
  // Off by what is still in the residual (0.04 per key here), far less than
  // the same pushes quantized without feedback drift away (0.57).
  EXPECT_LT(error, open_loop_error / 4)
      << "mean error " << error / p << ", without feedback "
      << open_loop_error / p;
  // About 1.25 bits a value: 40 bytes per 256 keys and a small header.
  EXPECT_LT(client->push_bytes(), pushes * (p * 40 / 256 + 12 * 64));
}

TEST_F(ServiceTest, GarbageBytesAreRefusedAsMalformed) {
  std::unique_ptr<Client> client = Connect();
  ASSERT_TRUE(client->CreateTable(Table("w", 100, 1.0f, 5.0f)).ok());
  grpc::GenericStub stub(
      grpc::CreateChannel(addrs_[0], grpc::InsecureChannelCredentials()));
  // A truncated field, an unsupported wire type, a bulk field that runs
  // past the end of the message.
  for (const std::string& garbage :
       {std::string("\x0a\x05te", 4), std::string("\x0f\x00", 2),
        std::string("\x0a\x01w\x3a\x80\x01"
                    "abc",
                    9)}) {
    for (const char* method :
         {"/shardps.ParameterServer/Push", "/shardps.ParameterServer/Pull"}) {
      grpc::ClientContext context;
      grpc::Slice slice(garbage);
      grpc::ByteBuffer request(&slice, 1), response;
      grpc::Status status;
      absl::Notification done;
      stub.UnaryCall(&context, method, grpc::StubOptions(), &request, &response,
                     [&](grpc::Status s) {
                       status = std::move(s);
                       done.Notify();
                     });
      done.WaitForNotification();
      EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
          << method << " " << status.error_message();
      EXPECT_NE(status.error_message().find("malformed"), std::string::npos)
          << status.error_message();
    }
  }
  std::vector<float> out(100);
  ASSERT_TRUE(client->Pull("w", 0, 100, out.data()).ok());
  for (float v : out) ASSERT_EQ(v, 5.0f);
}

TEST_F(ServiceTest, StatsReportOwnershipTrafficAndClocks) {
  std::unique_ptr<Client> client = Connect();
  ASSERT_TRUE(client->CreateTable(Table("w", 1000)).ok());
  std::vector<float> grad(1000, 0.5f);
  ASSERT_TRUE(client->Push("w", 0, 1000, grad.data(), /*clock=*/7).ok());
  ASSERT_TRUE(client->Pull("w", 0, 1000, grad.data()).ok());
  absl::StatusOr<std::vector<shardps::StatsResponse>> stats = client->Stats();
  ASSERT_TRUE(stats.ok());
  uint64_t covered = 0, pushed = 0, pulled = 0;
  for (int s = 0; s < kServers; ++s) {
    const shardps::TableStats& t = (*stats)[s].tables(0);
    EXPECT_EQ(t.shard_index(), static_cast<uint32_t>(s));
    EXPECT_EQ(t.begin(), covered);
    covered = t.end();
    EXPECT_EQ(t.version(), 1u);
    ASSERT_EQ(t.worker_clocks_size(), 1);
    EXPECT_EQ(t.worker_clocks(0).clock(), 7u);
    pushed += (*stats)[s].bytes_pushed();
    pulled += (*stats)[s].bytes_pulled();
  }
  EXPECT_EQ(covered, 1000u);
  // Through shared memory here (one host): the bytes are counted there.
  uint64_t memory = 0;
  for (const shardps::StatsResponse& s : *stats) memory += s.memory_bytes();
  EXPECT_EQ(pushed, 0u);
  EXPECT_EQ(pulled, 0u);
  EXPECT_EQ(memory, 8000u);
}

TEST_F(ServiceTest, StoppedServerGivesAnErrorNamingItWithinTheDeadline) {
  std::unique_ptr<Client> client =
      Connect(1 << 20, "test", /*timeout=*/absl::Seconds(3));
  ASSERT_TRUE(client->CreateTable(Table("w", 1000)).ok());
  std::vector<float> out(1000);
  ASSERT_TRUE(client->Pull("w", 0, 1000, out.data()).ok());

  ASSERT_TRUE(servers_[1]->Shutdown(absl::ZeroDuration()).ok());
  const absl::Time start = absl::Now();
  absl::Status pull = client->Pull("w", 0, 1000, out.data());
  absl::Status push = client->Push("w", 0, 1000, out.data());
  const absl::Duration took = absl::Now() - start;
  for (const absl::Status& s : {pull, push}) {
    EXPECT_FALSE(s.ok());
    EXPECT_TRUE(absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s)) << s;
    EXPECT_NE(s.message().find(addrs_[1]), std::string::npos) << s;
    EXPECT_NE(s.message().find("shard 1"), std::string::npos) << s;
  }
  // Two calls, each bounded by the 3 s deadline (plus scheduling slack).
  EXPECT_LT(took, absl::Seconds(8));
  // Keys on the live shards still work.
  EXPECT_TRUE(client->Pull("w", 0, 300, out.data()).ok());
}

TEST_F(ServiceTest, UnreachableServerFailsReadinessByName) {
  // Bind a server, note its port, stop it: nothing listens there now.
  std::string dead = addrs_[2];
  ASSERT_TRUE(servers_[2]->Shutdown(absl::ZeroDuration()).ok());
  servers_[2].reset();
  ClientOptions o;
  o.server_addrs = {addrs_[0], dead};
  o.job = "test";
  o.rpc_timeout = absl::Seconds(2);
  std::unique_ptr<Client> client = *Client::Connect(o);
  const absl::Time start = absl::Now();
  absl::Status ready = client->WaitReady(absl::Seconds(2));
  EXPECT_LT(absl::Now() - start, absl::Seconds(6));
  EXPECT_FALSE(ready.ok());
  EXPECT_NE(ready.message().find(dead), std::string::npos) << ready;
  absl::Status create = client->CreateTable(Table("w", 100));
  EXPECT_FALSE(create.ok());
  EXPECT_NE(create.message().find(dead), std::string::npos) << create;
}

TEST_F(ServiceTest, OpenTableWaitsForTheCreatorAndChecksTheShape) {
  std::unique_ptr<Client> creator = Connect();
  std::unique_ptr<Client> other = Connect();
  // Nobody created it: a clear deadline error naming a server.
  absl::Status early = other->OpenTable(Table("w", 1000), absl::Seconds(0.3));
  EXPECT_EQ(early.code(), absl::StatusCode::kDeadlineExceeded) << early;
  EXPECT_NE(early.message().find("is rank 0 running"), std::string::npos);
  std::vector<float> out(1000);
  EXPECT_EQ(other->Pull("w", 0, 1000, out.data()).code(),
            absl::StatusCode::kNotFound);
  // Created while the other waits: once server 0 has answered two of the
  // waiting client's polls (its Stats calls, less this test's own), the
  // other client has looked, found nothing and is waiting.
  std::unique_ptr<shardps::ParameterServer::Stub> stub = RawStub(0);
  auto stats_calls = [&]() -> uint64_t {
    grpc::ClientContext context;
    shardps::StatsRequest request;
    request.set_job("test");
    shardps::StatsResponse response;
    EXPECT_TRUE(stub->Stats(&context, request, &response).ok());
    for (const shardps::MethodStats& m : response.methods()) {
      if (m.method() == "Stats") return m.requests();
    }
    ADD_FAILURE() << "no Stats entry in " << response.ShortDebugString();
    return 0;
  };
  const uint64_t before = stats_calls();
  absl::Status opened;
  std::thread open(
      [&] { opened = other->OpenTable(Table("w", 1000), absl::Seconds(30)); });
  for (uint64_t mine = 1; stats_calls() - before - mine < 2; ++mine) {
    absl::SleepFor(absl::Milliseconds(5));  // polling interval
  }
  ASSERT_TRUE(creator->CreateTable(Table("w", 1000, 1.0f, 4.0f)).ok());
  open.join();
  ASSERT_TRUE(opened.ok()) << opened;
  ASSERT_TRUE(other->Pull("w", 0, 1000, out.data()).ok());
  EXPECT_EQ(out[999], 4.0f);
  // A worker expecting another model size is refused.
  absl::Status wrong = Connect()->OpenTable(Table("w", 999), absl::Seconds(1));
  EXPECT_EQ(wrong.code(), absl::StatusCode::kFailedPrecondition) << wrong;
}

TEST_F(ServiceTest, ClientRejectsBadOptions) {
  ClientOptions o;
  EXPECT_EQ(Client::Connect(o).status().code(),
            absl::StatusCode::kInvalidArgument);
  o.server_addrs = addrs_;
  o.chunk_bytes = 1000;  // not a multiple of 64
  EXPECT_EQ(Client::Connect(o).status().code(),
            absl::StatusCode::kInvalidArgument);
  o.chunk_bytes = 1 << 20;
  o.channels_per_server = 0;
  EXPECT_EQ(Client::Connect(o).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// The server's limits reach its service (they once stopped at ServerOptions).
TEST(ServerLimitsTest, TableLimitsAreEnforcedOverTheWire) {
  ServerOptions o;
  o.host = "127.0.0.1";
  o.job = "test";
  o.limits.max_tables = 1;
  o.limits.max_bytes = 4000;
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(o);
  ASSERT_TRUE(server.ok()) << server.status();
  ClientOptions co;
  co.server_addrs = {(*server)->address()};
  co.job = "test";
  std::unique_ptr<Client> client = *Client::Connect(co);
  TableOptions big = testutil::ConstantTable(1001, 0);
  absl::Status s = client->CreateTable(big);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_NE(s.message().find("--max_memory_mb"), std::string::npos) << s;
  ASSERT_TRUE(client->CreateTable(testutil::ConstantTable(1000, 0)).ok());
  TableOptions second = testutil::ConstantTable(10, 0);
  second.name = "v";
  s = client->CreateTable(second);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_NE(s.message().find("--max_tables"), std::string::npos) << s;
}

}  // namespace
}  // namespace ps
