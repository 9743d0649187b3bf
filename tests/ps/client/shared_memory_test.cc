// Same-host shared memory (AttachMemory, proto/shardps.proto): a client on
// the servers' host moves float32 values through shared memory with the
// same results as over TCP, falls back to TCP where a server refuses or
// values are compressed, detaches when it closes; and requests that name
// shared memory wrongly, written from the proto alone, are refused and
// change nothing.
#include <grpcpp/create_channel.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "ps/client/client.h"
#include "ps/server/server.h"
#include "ps/wire/shared_segment.h"
#include "util/servers.h"

namespace ps {
namespace {

using testutil::Calls;
using testutil::ConstantTable;

constexpr uint64_t kParams = 300000;  // 1.2 MB: several chunks per server

class SharedMemoryTest : public testing::Test {
 protected:
  void Start(int n, bool shared_memory = true) {
    servers_ = testutil::StartLocalServers(n, "shm", &addrs_, shared_memory);
    ASSERT_EQ(servers_.size(), static_cast<size_t>(n));
  }

  std::unique_ptr<Client> Connect(
      bool shared_memory,
      shardps::ValueEncoding push_encoding = shardps::FLOAT32,
      shardps::ValueEncoding pull_encoding = shardps::FLOAT32) {
    ClientOptions o;
    o.server_addrs = addrs_;
    o.job = "shm";
    o.chunk_bytes = 256 << 10;
    o.shared_memory = shared_memory;
    o.push_encoding = push_encoding;
    o.pull_encoding = pull_encoding;
    o.rpc_timeout = absl::Seconds(10);
    absl::StatusOr<std::unique_ptr<Client>> c = Client::Connect(o);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *std::move(c) : nullptr;
  }

  // Push, Pull and PushPull of the whole table `name`: the values it ends
  // with.
  std::vector<float> Exercise(Client& client, const std::string& name) {
    ps::TableOptions t = ConstantTable(kParams, 1.0f);
    t.name = name;
    EXPECT_TRUE(client.CreateTable(t).ok());
    std::vector<float> g(kParams), out(kParams);
    for (uint64_t i = 0; i < kParams; ++i) g[i] = 0.25f * (i % 7);
    EXPECT_TRUE(client.Push(name, 0, kParams, g.data()).ok());
    EXPECT_TRUE(client.Pull(name, 0, kParams, out.data()).ok());
    for (uint64_t i = 0; i < kParams; i += 997) {
      EXPECT_EQ(out[i], 1.0f - g[i]) << i;
    }
    // In place, as the Python package's step does it.
    EXPECT_TRUE(client.PushPull(name, 0, kParams, g.data(), g.data()).ok());
    return g;
  }

  // The servers' Stats, asked by a client of their own.
  std::vector<shardps::StatsResponse> Stats() {
    std::unique_ptr<Client> asker = Connect(false);
    absl::StatusOr<std::vector<shardps::StatsResponse>> stats = asker->Stats();
    EXPECT_TRUE(stats.ok()) << stats.status();
    return stats.ok() ? *stats : std::vector<shardps::StatsResponse>();
  }
  uint64_t ServerMemoryBytes() {
    uint64_t sum = 0;
    for (const shardps::StatsResponse& s : Stats()) sum += s.memory_bytes();
    return sum;
  }
  int ServerSegments() {
    int sum = 0;
    for (const shardps::StatsResponse& s : Stats()) sum += s.memory_segments();
    return sum;
  }

  std::vector<std::string> addrs_;
  std::vector<std::unique_ptr<Server>> servers_;
};

TEST_F(SharedMemoryTest, SameResultsAsTcpWithTheValuesOffTheWire) {
  Start(2);
  std::unique_ptr<Client> shm = Connect(true);
  std::unique_ptr<Client> tcp = Connect(false);
  ASSERT_TRUE(shm && tcp);
  const std::vector<float> a = Exercise(*shm, "a");
  const std::vector<float> b = Exercise(*tcp, "b");
  EXPECT_EQ(a, b);
  for (uint64_t i = 0; i < kParams; i += 997) {
    EXPECT_EQ(a[i], 1.0f - 2 * 0.25f * (i % 7)) << i;
  }
  // Push, Pull, and PushPull both ways: 4 x 4 bytes per key, all through
  // shared memory; the messages carry headers only.
  EXPECT_EQ(shm->memory_bytes(), 16 * kParams);
  EXPECT_LT(shm->push_bytes() + shm->pull_bytes(), kParams / 10);
  EXPECT_EQ(tcp->memory_bytes(), 0u);
  EXPECT_GT(tcp->push_bytes(), 8 * kParams);
  EXPECT_EQ(ServerMemoryBytes(), 16 * kParams);
  EXPECT_EQ(ServerSegments(), 2);
  shm.reset();
  EXPECT_EQ(ServerSegments(), 0);
}

TEST_F(SharedMemoryTest, ServersThatRefuseGetTcpAndNoRequestCountsAsBad) {
  Start(2, /*shared_memory=*/false);
  std::unique_ptr<Client> client = Connect(true);
  ASSERT_TRUE(client);
  const std::vector<float> a = Exercise(*client, "a");
  for (uint64_t i = 0; i < kParams; i += 997) {
    EXPECT_EQ(a[i], 1.0f - 2 * 0.25f * (i % 7)) << i;
  }
  EXPECT_EQ(client->memory_bytes(), 0u);
  absl::StatusOr<std::vector<shardps::StatsResponse>> stats = client->Stats();
  ASSERT_TRUE(stats.ok());
  for (const shardps::StatsResponse& s : *stats) {
    // Asked once per server, not once per call.
    EXPECT_EQ(Calls(s, "AttachMemory"), 1u);
    EXPECT_EQ(s.rejected_requests(), 0u);
    EXPECT_EQ(s.memory_segments(), 0u);
  }
}

TEST_F(SharedMemoryTest, CompressedValuesTravelInMessages) {
  Start(1);
  std::unique_ptr<Client> client =
      Connect(true, shardps::FP16, shardps::FLOAT32);
  ASSERT_TRUE(client);
  ASSERT_TRUE(client->CreateTable(ConstantTable(kParams, 1.0f)).ok());
  std::vector<float> g(kParams, 0.5f), out(kParams);
  ASSERT_TRUE(client->Push("w", 0, kParams, g.data()).ok());
  EXPECT_EQ(client->memory_bytes(), 0u);
  ASSERT_TRUE(client->Pull("w", 0, kParams, out.data()).ok());
  EXPECT_EQ(client->memory_bytes(), 4 * kParams);
  EXPECT_EQ(out[12345], 0.5f);
  // A PushPull whose push is compressed sends both ways in messages.
  ASSERT_TRUE(client->PushPull("w", 0, kParams, g.data(), out.data()).ok());
  EXPECT_EQ(client->memory_bytes(), 4 * kParams);
  EXPECT_EQ(out[12345], 0.0f);
}

TEST_F(SharedMemoryTest, ARestartedServerIsAttachedAgainWithoutARetry) {
  Start(1);
  std::unique_ptr<Client> client = Connect(true);  // no retries
  ASSERT_TRUE(client);
  ASSERT_TRUE(client->CreateTable(ConstantTable(kParams, 1.0f)).ok());
  std::vector<float> g(kParams, 0.5f), out(kParams);
  ASSERT_TRUE(client->Push("w", 0, kParams, g.data()).ok());
  const uint64_t before = client->memory_bytes();
  EXPECT_EQ(before, 4 * kParams);
  // Another process at the same address: it knows neither the table nor
  // the client's segment.
  const int port = servers_[0]->port();
  ASSERT_TRUE(servers_[0]->Shutdown(absl::Seconds(1)).ok());
  servers_[0].reset();
  ServerOptions o;
  o.host = "127.0.0.1";
  o.port = port;
  o.job = "shm";
  absl::StatusOr<std::unique_ptr<Server>> again = Server::Start(o);
  ASSERT_TRUE(again.ok()) << again.status();
  servers_[0] = *std::move(again);
  std::unique_ptr<Client> tcp = Connect(false);
  ASSERT_TRUE(tcp->CreateTable(ConstantTable(kParams, 1.0f)).ok());
  // The client's first call names the old segment, is refused
  // FAILED_PRECONDITION, and goes again through a new one.
  ASSERT_TRUE(client->PushPull("w", 0, kParams, g.data(), out.data()).ok());
  EXPECT_EQ(out[0], 0.5f);
  EXPECT_EQ(out[kParams - 1], 0.5f);
  // How many chunks went through the old segment first (and how many over
  // TCP once it was forgotten) depends on when the refusals came back; the
  // refused ones went again through the new segment.
  EXPECT_GT(client->memory_bytes(), before);
  EXPECT_EQ(ServerSegments(), 1);
  ASSERT_TRUE(tcp->Pull("w", 0, kParams, out.data()).ok());
  EXPECT_EQ(out[kParams / 2], 0.5f);  // applied once
}

// A call that failed may still be answered into its slot later (a
// deadline ends it here, not at the server), and the client cannot tell
// that from a refusal, so every failed call retires its slot; once half of
// a segment's slots are, the client gives the segment up, lets it go when
// no call holds its slots, and attaches a fresh one. Without that, as many
// failures as slots would send every later call over TCP. The failures
// here: pulls of an SSP table's clock 2 by a worker that pushed none, which
// the server refuses.
TEST_F(SharedMemoryTest, FailedCallsWearASegmentOutAndAFreshOneTakesOver) {
  Start(1);
  ClientOptions o;
  o.server_addrs = addrs_;
  o.job = "shm";
  o.chunk_bytes = 256 << 10;
  o.max_inflight_per_server = 2;  // 4 slots
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(o);
  ASSERT_TRUE(client.ok()) << client.status();
  constexpr uint64_t kKeys = 1000;  // one chunk
  TableOptions t = ConstantTable(kKeys, 1.0f);
  t.consistency.set_mode(shardps::CONSISTENCY_SSP);
  t.consistency.set_staleness(1);
  t.consistency.set_num_workers(2);
  t.consistency.set_straggler_timeout_seconds(60);
  const absl::Status created = (*client)->CreateTable(t);
  ASSERT_TRUE(created.ok()) << created;
  std::vector<float> out(kKeys, 0.0f);
  ASSERT_TRUE((*client)->Pull("w", 0, kKeys, out.data(), /*clock=*/0).ok());
  const uint64_t first = (*client)->memory_bytes();
  EXPECT_EQ(first, 4 * kKeys);  // through the first segment
  // Twice as many failures as a segment has slots: two segments wear out.
  for (int i = 0; i < 8; ++i) {
    const absl::Status s =
        (*client)->Pull("w", 0, kKeys, out.data(), /*clock=*/2);
    ASSERT_TRUE(absl::IsInvalidArgument(s)) << i << ": " << s;
  }
  EXPECT_EQ((*client)->memory_bytes(), first);
  out.assign(kKeys, 0.0f);
  ASSERT_TRUE((*client)->Pull("w", 0, kKeys, out.data(), /*clock=*/0).ok());
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[kKeys - 1], 1.0f);
  // Through a third segment; the two worn ones were detached.
  EXPECT_EQ((*client)->memory_bytes(), first + 4 * kKeys);
  EXPECT_EQ(ServerSegments(), 1);
}

// Requests written from the proto alone, against one server.
class RawMemoryTest : public SharedMemoryTest {
 protected:
  void SetUp() override {
    Start(1);
    client_ = Connect(false);
    ASSERT_TRUE(client_);
    ASSERT_TRUE(client_->CreateTable(ConstantTable(1024, 1.0f)).ok());
    stub_ = shardps::ParameterServer::NewStub(
        grpc::CreateChannel(addrs_[0], grpc::InsecureChannelCredentials()));
    absl::StatusOr<std::unique_ptr<SharedSegment>> segment =
        SharedSegment::Create(SharedSegment::kHeaderBytes + 4096);
    ASSERT_TRUE(segment.ok()) << segment.status();
    segment_ = *std::move(segment);
    shardps::AttachMemoryRequest attach = Describe("shm");
    shardps::AttachMemoryResponse attached;
    grpc::ClientContext context;
    ASSERT_TRUE(stub_->AttachMemory(&context, attach, &attached).ok());
    id_ = attached.segment();
  }

  shardps::AttachMemoryRequest Describe(const std::string& job) {
    shardps::AttachMemoryRequest r;
    r.set_job(job);
    r.set_name(segment_->name());
    r.set_bytes(segment_->size());
    r.set_nonce(std::string(segment_->nonce()));
    return r;
  }

  float* Floats() {
    return reinterpret_cast<float*>(segment_->data() +
                                    SharedSegment::kHeaderBytes);
  }

  shardps::PushPullRequest PushPull(uint64_t begin, uint64_t end) {
    shardps::PushPullRequest r;
    r.set_job("shm");
    r.set_table("w");
    r.set_begin(begin);
    r.set_end(end);
    r.mutable_memory()->set_segment(id_);
    r.mutable_memory()->set_offset(SharedSegment::kHeaderBytes);
    return r;
  }

  grpc::Status Send(const shardps::PushPullRequest& r) {
    grpc::ClientContext context;
    shardps::PushPullResponse reply;
    return stub_->PushPull(&context, r, &reply);
  }

  // The table's values, read over TCP.
  std::vector<float> Values() {
    std::vector<float> v(1024);
    EXPECT_TRUE(client_->Pull("w", 0, 1024, v.data()).ok());
    return v;
  }

  std::unique_ptr<Client> client_;
  std::unique_ptr<shardps::ParameterServer::Stub> stub_;
  std::unique_ptr<SharedSegment> segment_;
  uint64_t id_ = 0;
};

TEST_F(RawMemoryTest, APushPullReadsAndWritesItsSlice) {
  for (int i = 0; i < 100; ++i) Floats()[i] = 0.5f;
  grpc::ClientContext context;
  shardps::PushPullResponse reply;
  ASSERT_TRUE(stub_->PushPull(&context, PushPull(0, 100), &reply).ok());
  EXPECT_TRUE(reply.values().empty());
  EXPECT_EQ(Floats()[0], 0.5f);
  EXPECT_EQ(Floats()[99], 0.5f);
  EXPECT_EQ(Values()[99], 0.5f);
  EXPECT_EQ(Values()[100], 1.0f);
}

TEST_F(RawMemoryTest, BadSlicesAreRefusedAndChangeNothing) {
  const std::vector<float> before = Values();
  for (int i = 0; i < 100; ++i) Floats()[i] = 0.5f;
  // The server checks the values as it copies them out of the slice: in
  // its vector loop's body and in its tail.
  for (int where : {0, 50, 96, 99}) {
    for (float bad : {std::nanf(""), -INFINITY}) {
      Floats()[where] = bad;
      const grpc::Status refused = Send(PushPull(0, 100));
      EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
          << where;
      EXPECT_NE(refused.error_message().find("NaN or Inf"), std::string::npos)
          << refused.error_message();
      Floats()[where] = 0.5f;
    }
  }

  shardps::PushPullRequest r = PushPull(0, 100);
  r.set_gradient(std::string(400, '\0'));
  EXPECT_EQ(Send(r).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  r = PushPull(0, 100);
  r.set_encoding(shardps::FP16);
  EXPECT_EQ(Send(r).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  r = PushPull(0, 100);
  r.set_pull_encoding(shardps::BF16);
  EXPECT_EQ(Send(r).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  r = PushPull(0, 1024 + 16);  // past the table
  EXPECT_EQ(Send(r).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  r = PushPull(0, 1024);  // 4096 bytes: the slice is past the segment
  r.mutable_memory()->set_offset(128);
  const grpc::Status outside = Send(r);
  EXPECT_EQ(outside.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(outside.error_message().find("does not fit"), std::string::npos)
      << outside.error_message();
  r = PushPull(0, 100);
  r.mutable_memory()->set_offset(SharedSegment::kHeaderBytes + 4);
  EXPECT_EQ(Send(r).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  r = PushPull(0, 100);
  r.mutable_memory()->set_segment(id_ ^ 1);
  EXPECT_EQ(Send(r).error_code(), grpc::StatusCode::FAILED_PRECONDITION);

  shardps::PullRequest pull;
  pull.set_job("shm");
  pull.set_table("w");
  pull.set_begin(0);
  pull.set_end(100);
  pull.set_encoding(shardps::FP16);
  *pull.mutable_memory() = r.memory();
  pull.mutable_memory()->set_segment(id_);
  grpc::ClientContext context;
  shardps::PullResponse pulled;
  EXPECT_EQ(stub_->Pull(&context, pull, &pulled).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);

  EXPECT_EQ(Values(), before);
}

TEST_F(RawMemoryTest, AttachRefusesOtherJobsAndOtherNames) {
  grpc::ClientContext c1, c2, c3;
  shardps::AttachMemoryResponse reply;
  EXPECT_EQ(stub_->AttachMemory(&c1, Describe("other"), &reply).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  shardps::AttachMemoryRequest bad = Describe("shm");
  bad.set_name("/dev/shm/../../etc/passwd");
  EXPECT_EQ(stub_->AttachMemory(&c2, bad, &reply).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  // Opened once already: its name is gone, as on another host.
  EXPECT_EQ(stub_->AttachMemory(&c3, Describe("shm"), &reply).error_code(),
            grpc::StatusCode::NOT_FOUND);
  shardps::DetachMemoryRequest detach;
  detach.set_job("shm");
  detach.set_segment(id_);
  shardps::DetachMemoryResponse detached;
  grpc::ClientContext c4, c5;
  EXPECT_TRUE(stub_->DetachMemory(&c4, detach, &detached).ok());
  EXPECT_EQ(stub_->DetachMemory(&c5, detach, &detached).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

}  // namespace
}  // namespace ps
