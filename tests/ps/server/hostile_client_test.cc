// Requests no well-behaved client sends, written from proto/shardps.proto
// alone (the generated stub, or raw bytes through a generic stub): each
// case here was a defect a hostile client found (issue 17, part 1). Every
// one must be refused with a short message naming the problem, change
// nothing, and leave the connection and the job healthy.
#include <grpcpp/create_channel.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/security/credentials.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "proto/shardps.grpc.pb.h"
#include "ps/server/server.h"
#include "ps/wire/security.h"
#include "util/files.h"
#include "util/servers.h"

namespace ps {
namespace {

constexpr char kJob[] = "hostile";
// A status message longer than this is a sign it echoes the request.
constexpr size_t kShortMessage = 400;

std::unique_ptr<shardps::ParameterServer::Stub> StubFor(
    const std::string& addr) {
  return shardps::ParameterServer::NewStub(
      grpc::CreateChannel(addr, grpc::InsecureChannelCredentials()));
}

shardps::CreateTableRequest SgdSpec(const std::string& table, uint64_t params) {
  shardps::CreateTableRequest spec;
  spec.set_job(kJob);
  spec.set_table(table);
  spec.set_num_params(params);
  spec.set_num_shards(1);
  spec.mutable_optimizer()->set_name("sgd");
  spec.mutable_optimizer()->set_learning_rate(1.0f);
  spec.mutable_init()->set_kind("constant");
  spec.mutable_init()->set_value(10.0f);
  return spec;
}

shardps::CreateTableRequest SyncSpec(const std::string& table, uint32_t workers,
                                     shardps::StragglerPolicy policy) {
  shardps::CreateTableRequest spec = SgdSpec(table, 16);
  shardps::ConsistencyConfig* c = spec.mutable_consistency();
  c->set_mode(shardps::CONSISTENCY_SYNC);
  c->set_num_workers(workers);
  c->set_straggler_timeout_seconds(1.0);
  c->set_straggler_policy(policy);
  return spec;
}

shardps::PushRequest PushOf(const std::string& table, uint32_t worker,
                            uint64_t clock, float g, uint64_t keys = 16) {
  shardps::PushRequest push;
  push.set_job(kJob);
  push.set_table(table);
  push.set_begin(0);
  push.set_end(keys);
  push.set_worker(worker);
  push.set_clock(clock);
  const std::vector<float> gradient(keys, g);
  push.set_gradient(std::string(reinterpret_cast<const char*>(gradient.data()),
                                gradient.size() * sizeof(float)));
  return push;
}

// PushOf's push as a PushPull: a PushRequest's bytes parse as a
// PushPullRequest (pull encoding float32), as the proto promises.
shardps::PushPullRequest PushPullOf(const std::string& table, uint32_t worker,
                                    uint64_t clock, float g) {
  shardps::PushPullRequest request;
  EXPECT_TRUE(request.ParseFromString(
      PushOf(table, worker, clock, g).SerializeAsString()));
  return request;
}

shardps::PullRequest PullOf(const std::string& table, uint32_t worker,
                            uint64_t clock, uint64_t keys = 16) {
  shardps::PullRequest pull;
  pull.set_job(kJob);
  pull.set_table(table);
  pull.set_begin(0);
  pull.set_end(keys);
  pull.set_worker(worker);
  pull.set_clock(clock);
  return pull;
}

std::vector<float> Values(const shardps::PullResponse& response) {
  std::vector<float> out(response.values().size() / sizeof(float));
  memcpy(out.data(), response.values().data(), response.values().size());
  return out;
}

class HostileClientTest : public testing::Test {
 protected:
  void Start(ServerOptions o = {}) {
    o.host = "127.0.0.1";
    o.port = 0;
    o.job = kJob;
    absl::StatusOr<std::unique_ptr<Server>> s = Server::Start(o);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = *std::move(s);
    stub_ = StubFor(server_->address());
  }

  grpc::Status Create(const shardps::CreateTableRequest& spec) {
    grpc::ClientContext context;
    shardps::CreateTableResponse response;
    return stub_->CreateTable(&context, spec, &response);
  }
  grpc::Status Push(const shardps::PushRequest& push,
                    shardps::PushResponse* response = nullptr) {
    grpc::ClientContext context;
    shardps::PushResponse ignored;
    return stub_->Push(&context, push, response ? response : &ignored);
  }
  grpc::Status Pull(const shardps::PullRequest& pull,
                    shardps::PullResponse* response,
                    absl::Duration deadline = absl::Seconds(30)) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
    return stub_->Pull(&context, pull, response);
  }
  shardps::StatsResponse Stats() {
    grpc::ClientContext context;
    shardps::StatsRequest request;
    request.set_job(kJob);
    shardps::StatsResponse response;
    const grpc::Status status = stub_->Stats(&context, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response;
  }
  const shardps::TableStats* TableNamed(const shardps::StatsResponse& stats,
                                        const std::string& name) {
    for (const shardps::TableStats& t : stats.tables()) {
      if (t.table() == name) return &t;
    }
    return nullptr;
  }
  // Every value of keys [0, 16) of `table`, read at clock 0.
  std::vector<float> ValuesOf(const std::string& table) {
    shardps::PullResponse response;
    const grpc::Status status = Pull(PullOf(table, 0, 0), &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return Values(response);
  }

  std::unique_ptr<Server> server_;
  std::unique_ptr<shardps::ParameterServer::Stub> stub_;
};

TEST_F(HostileClientTest, LongNamesGetAShortInvalidArgument) {
  Start();
  ASSERT_TRUE(Create(SgdSpec("w", 16)).ok());
  const std::string long_name(8000, 'x');
  // The stub has gRPC's default settings: a status message over its 8 KB
  // metadata limit would arrive as RESOURCE_EXHAUSTED instead.
  shardps::CreateTableRequest spec = SgdSpec(long_name, 16);
  grpc::Status s = Create(spec);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_LT(s.error_message().size(), kShortMessage) << s.error_message();
  EXPECT_NE(s.error_message().find("8000"), std::string::npos)
      << s.error_message();
  spec = SgdSpec("w", 16);
  spec.set_job(long_name);
  s = Create(spec);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_LT(s.error_message().size(), kShortMessage) << s.error_message();

  shardps::PullResponse pulled;
  s = Pull(PullOf(long_name, 0, 0), &pulled);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_LT(s.error_message().size(), kShortMessage) << s.error_message();
  shardps::PushRequest push = PushOf("w", 0, 0, 1.0f);
  push.set_job(long_name);
  s = Push(push);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_LT(s.error_message().size(), kShortMessage) << s.error_message();
  push = PushOf(long_name, 0, 0, 1.0f);
  s = Push(push);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_LT(s.error_message().size(), kShortMessage) << s.error_message();
  {
    grpc::ClientContext context;
    shardps::StatsRequest request;
    request.set_job(long_name);
    shardps::StatsResponse response;
    s = stub_->Stats(&context, request, &response);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_LT(s.error_message().size(), kShortMessage) << s.error_message();
  }
  // A name of 128 characters is fine; nothing else was created or changed.
  const std::string longest(128, 'y');
  EXPECT_TRUE(Create(SgdSpec(longest, 16)).ok());
  const shardps::StatsResponse stats = Stats();
  EXPECT_EQ(stats.tables_size(), 2);
  EXPECT_EQ(ValuesOf("w"), std::vector<float>(16, 10.0f));
}

TEST_F(HostileClientTest, AConflictingSpecNamesTheFieldNotBothSpecs) {
  Start();
  // One init segment per tensor, as the trainer builds them.
  shardps::CreateTableRequest spec = SgdSpec("model", 100 * 64);
  for (int i = 0; i < 100; ++i) {
    shardps::InitSegment* seg = spec.add_init_segments();
    seg->set_begin(i * 64);
    seg->set_end((i + 1) * 64);
    seg->mutable_init()->set_kind("uniform");
    seg->mutable_init()->set_scale(0.01f * (i + 1));
    seg->mutable_init()->set_seed(1000 + i);
  }
  ASSERT_TRUE(Create(spec).ok());
  shardps::CreateTableRequest other = spec;
  other.mutable_init_segments(57)->mutable_init()->set_seed(7);
  grpc::Status s = Create(other);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_LT(s.error_message().size(), kShortMessage) << s.error_message();
  EXPECT_NE(s.error_message().find("init_segments[57].init.seed"),
            std::string::npos)
      << s.error_message();
  other = spec;
  other.mutable_optimizer()->set_learning_rate(0.5f);
  other.mutable_init_segments()->RemoveLast();
  s = Create(other);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_LT(s.error_message().size(), kShortMessage) << s.error_message();
  EXPECT_NE(s.error_message().find("optimizer.learning_rate"),
            std::string::npos)
      << s.error_message();
  EXPECT_NE(s.error_message().find("init_segments"), std::string::npos)
      << s.error_message();
  // The identical spec is still idempotent.
  EXPECT_TRUE(Create(spec).ok());
}

// Runs `method` with `request` bytes through a generic stub.
grpc::Status CallRaw(grpc::GenericStub& stub, const std::string& method,
                     const std::string& request) {
  grpc::ClientContext context;
  grpc::Slice slice(request);
  grpc::ByteBuffer in(&slice, 1), out;
  grpc::Status status;
  absl::Notification done;
  stub.UnaryCall(&context, "/shardps.ParameterServer/" + method,
                 grpc::StubOptions(), &in, &out, [&](grpc::Status s) {
                   status = std::move(s);
                   done.Notify();
                 });
  done.WaitForNotification();
  return status;
}

TEST(UnreadableRequestTest, EveryMethodAnswersInvalidArgumentAndLogsNothing) {
  testutil::ScopedTempDir dir("shardps-hostile");
  std::vector<std::string> addrs;
  std::vector<std::unique_ptr<ServerProcess>> servers =
      testutil::SpawnServers(1, dir.path(), kJob, &addrs);
  ASSERT_EQ(servers.size(), 1u);
  grpc::GenericStub stub(
      grpc::CreateChannel(addrs[0], grpc::InsecureChannelCredentials()));
  // Field 1 (job, a string in every request) holding invalid UTF-8.
  const std::string bad_utf8("\x0a\x03\xff\xfe\xfd", 5);
  // A truncated field, a wire type that does not exist, random bytes.
  const std::string garbage[] = {
      std::string("\x0a\x05te", 4), std::string("\x0f\x00", 2),
      std::string("\x93\xe7\x1d\x88\x02\xc4", 6), bad_utf8};
  for (const char* method :
       {"CreateTable", "Pull", "Push", "PushPull", "Stats", "Assign",
        "PullRows", "PushRows", "AttachMemory", "DetachMemory"}) {
    for (const std::string& bytes : garbage) {
      const grpc::Status s = CallRaw(stub, method, bytes);
      EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
          << method << ": " << s.error_message();
      EXPECT_NE(s.error_message().find("malformed"), std::string::npos)
          << method << ": " << s.error_message();
      EXPECT_NE(
          s.error_message().find(absl::StrCat("shardps.", method, "Request")),
          std::string::npos)
          << method << ": " << s.error_message();
    }
  }
  ASSERT_TRUE(servers[0]->Stop().ok());
  std::ifstream in(servers[0]->log_path());
  std::stringstream log;
  log << in.rdbuf();
  EXPECT_EQ(log.str().find("libprotobuf"), std::string::npos) << log.str();
}

TEST_F(HostileClientTest, AckedBelowAboveTheSequenceIsRefusedAndHarmsNothing) {
  Start();
  ASSERT_TRUE(Create(SgdSpec("w", 16)).ok());
  shardps::PushRequest push = PushOf("w", 0, 0, 1.0f);
  push.set_session(77);
  push.set_sequence(5);
  push.set_acked_below(10);
  grpc::Status s = Push(push);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("acked_below"), std::string::npos)
      << s.error_message();
  EXPECT_EQ(ValuesOf("w"), std::vector<float>(16, 10.0f));
  // The session is not poisoned: the next honest push is applied.
  push.set_sequence(7);
  push.set_acked_below(7);
  shardps::PushResponse reply;
  s = Push(push, &reply);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_FALSE(reply.duplicate());
  EXPECT_EQ(ValuesOf("w"), std::vector<float>(16, 9.0f));
  // acked_below == sequence is what a client sends with nothing in flight.
  push.set_sequence(8);
  push.set_acked_below(8);
  s = Push(push, &reply);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_FALSE(reply.duplicate());
  EXPECT_EQ(ValuesOf("w"), std::vector<float>(16, 8.0f));
}

TEST_F(HostileClientTest, APushPullFromTheProtoAloneAppliesOnceOrNotAtAll) {
  // Written with the generated stub only: the reply is protobuf's own
  // encoding of PushPullResponse.
  Start();
  ASSERT_TRUE(Create(SgdSpec("w", 16)).ok());
  shardps::PushPullRequest request = PushPullOf("w", 0, 0, 1.5f);
  request.set_session(5);
  request.set_sequence(1);
  request.set_acked_below(1);
  auto call = [&](shardps::PushPullResponse* response) {
    grpc::ClientContext context;
    return stub_->PushPull(&context, request, response);
  };
  // A pull encoding that pulls cannot answer is refused before the push is
  // applied.
  request.set_pull_encoding(shardps::ONEBIT);
  shardps::PushPullResponse response;
  grpc::Status s = call(&response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("not encoding 3"), std::string::npos)
      << s.error_message();
  EXPECT_EQ(ValuesOf("w"), std::vector<float>(16, 10.0f));
  // Keys outside the table: refused, nothing applied.
  request.set_pull_encoding(shardps::FLOAT32);
  request.set_end(17);
  s = call(&response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(ValuesOf("w"), std::vector<float>(16, 10.0f));
  request.set_end(16);
  ASSERT_TRUE(call(&response).ok());
  EXPECT_FALSE(response.duplicate());
  EXPECT_EQ(response.version(), 1u);
  std::vector<float> values(16);
  ASSERT_EQ(response.values().size(), 16 * sizeof(float));
  memcpy(values.data(), response.values().data(), response.values().size());
  EXPECT_EQ(values, std::vector<float>(16, 8.5f));
  // The same (session, sequence) again: acknowledged, answered, not applied.
  ASSERT_TRUE(call(&response).ok());
  EXPECT_TRUE(response.duplicate());
  EXPECT_EQ(response.version(), 1u);
  EXPECT_EQ(ValuesOf("w"), std::vector<float>(16, 8.5f));
}

// A worker of a one-worker sync table stepping every 0.2 s (pull clock c,
// push clock c) for `steps` steps; the first error, if any.
grpc::Status RunHealthyWorker(shardps::ParameterServer::Stub& stub,
                              const std::string& table, int steps) {
  for (int c = 0; c < steps; ++c) {
    {
      grpc::ClientContext context;
      context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
      shardps::PullResponse response;
      grpc::Status s = stub.Pull(&context, PullOf(table, 0, c), &response);
      if (!s.ok()) return s;
    }
    {
      grpc::ClientContext context;
      shardps::PushResponse response;
      grpc::Status s =
          stub.Push(&context, PushOf(table, 0, c, 1.0f), &response);
      if (!s.ok()) return s;
    }
    absl::SleepFor(absl::Milliseconds(200));  // the worker's compute
  }
  return grpc::Status::OK;
}

TEST_F(HostileClientTest, APullFarInTheFutureIsRefusedAndTheJobGoesOn) {
  Start();
  for (shardps::StragglerPolicy policy :
       {shardps::STRAGGLER_FAIL, shardps::STRAGGLER_DROP}) {
    const std::string table = absl::StrCat("sync", static_cast<int>(policy));
    SCOPED_TRACE(table);
    ASSERT_TRUE(Create(SyncSpec(table, 1, policy)).ok());
    // 15 steps of 0.2 s: three times the straggler timeout.
    grpc::Status worker_status;
    std::thread worker(
        [&] { worker_status = RunHealthyWorker(*stub_, table, 15); });
    for (uint64_t clock : {uint64_t{1} << 62, uint64_t{1000}}) {
      shardps::PullResponse response;
      const absl::Time start = absl::Now();
      const grpc::Status s =
          Pull(PullOf(table, 0, clock), &response, absl::Seconds(5));
      EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
          << s.error_message();
      EXPECT_NE(s.error_message().find(absl::StrCat("clock ", clock)),
                std::string::npos)
          << s.error_message();
      // Refused, not left to wait for its deadline.
      EXPECT_LT(absl::Now() - start, absl::Seconds(4));
    }
    worker.join();
    EXPECT_TRUE(worker_status.ok()) << worker_status.error_message();
    const shardps::TableStats* t = TableNamed(Stats(), table);
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->consistency_clock(), 15u);
    EXPECT_EQ(t->dropped_workers_size(), 0);
    EXPECT_EQ(t->waiting_pulls(), 0u);
  }
}

TEST_F(HostileClientTest, AWaitingPullEndsWithItsCallAndTriggersNoPolicy) {
  Start();
  ASSERT_TRUE(Create(SyncSpec("pair", 2, shardps::STRAGGLER_FAIL)).ok());
  // Worker 1 pushes clock 0, then waits at clock 1 for worker 0, which has
  // not pushed; its client gives up after 0.3 s.
  shardps::PullResponse response;
  ASSERT_TRUE(Pull(PullOf("pair", 1, 0), &response).ok());
  ASSERT_TRUE(Push(PushOf("pair", 1, 0, 2.0f)).ok());
  const grpc::Status s =
      Pull(PullOf("pair", 1, 1), &response, absl::Milliseconds(300));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED)
      << s.error_message();
  // The server lets go of the pull with the call.
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  const shardps::TableStats* t = nullptr;
  shardps::StatsResponse stats;
  do {
    stats = Stats();
    t = TableNamed(stats, "pair");
    ASSERT_NE(t, nullptr);
  } while (t->waiting_pulls() != 0 && absl::Now() < give_up);
  EXPECT_EQ(t->waiting_pulls(), 0u);
  // With no pull waiting, the straggler timeout (1 s) passes without the
  // policy failing the job: worker 0 arrives 2 s late and the clock goes on.
  absl::SleepFor(absl::Seconds(2));
  ASSERT_TRUE(Pull(PullOf("pair", 0, 0), &response).ok());
  ASSERT_TRUE(Push(PushOf("pair", 0, 0, 4.0f)).ok());
  const grpc::Status again = Pull(PullOf("pair", 1, 1), &response);
  ASSERT_TRUE(again.ok()) << again.error_message();
  EXPECT_EQ(Values(response), std::vector<float>(16, 7.0f));  // 10 - (2+4)/2
}

TEST_F(HostileClientTest, AWaitingPushPullEndsWithItsCallItsPushKept) {
  Start();
  ASSERT_TRUE(Create(SyncSpec("pair", 2, shardps::STRAGGLER_FAIL)).ok());
  // Worker 1's PushPull of clock 0 waits for worker 0's push; its client
  // gives up after 0.3 s. Its push stays gathered for the clock.
  const shardps::PushPullRequest request = PushPullOf("pair", 1, 0, 2.0f);
  shardps::PushPullResponse response;
  {
    grpc::ClientContext context;
    context.set_deadline(
        absl::ToChronoTime(absl::Now() + absl::Milliseconds(300)));
    const grpc::Status s = stub_->PushPull(&context, request, &response);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED)
        << s.error_message();
  }
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  const shardps::TableStats* t = nullptr;
  shardps::StatsResponse stats;
  do {
    stats = Stats();
    t = TableNamed(stats, "pair");
    ASSERT_NE(t, nullptr);
  } while (t->waiting_pulls() != 0 && absl::Now() < give_up);
  EXPECT_EQ(t->waiting_pulls(), 0u);
  // Worker 0 completes the clock; worker 1 reads clock 1 without pushing
  // again: 10 - (2 + 4) / 2.
  ASSERT_TRUE(Push(PushOf("pair", 0, 0, 4.0f)).ok());
  shardps::PullResponse pulled;
  ASSERT_TRUE(Pull(PullOf("pair", 1, 1), &pulled).ok());
  EXPECT_EQ(Values(pulled), std::vector<float>(16, 7.0f));
}

TEST_F(HostileClientTest, WorkerIdsOutsideTheBarrierOrPastTheLimitAreRefused) {
  ServerOptions o;
  o.limits.max_workers = 8;
  Start(o);
  ASSERT_TRUE(Create(SyncSpec("sync", 2, shardps::STRAGGLER_FAIL)).ok());
  grpc::Status s = Push(PushOf("sync", 2, 0, 1.0f));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
      << s.error_message();
  shardps::PullResponse response;
  s = Pull(PullOf("sync", 20000, 0), &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
      << s.error_message();

  ASSERT_TRUE(Create(SgdSpec("async", 16)).ok());
  for (uint32_t w = 0; w < 8; ++w) {
    shardps::PushRequest push = PushOf("async", w * 1000, 0, 1.0f);
    push.set_session(w % 2 == 0 ? 0 : 100 + w);  // with and without a ledger
    push.set_sequence(1);
    ASSERT_TRUE(Push(push).ok()) << w;
  }
  for (uint64_t session : {uint64_t{0}, uint64_t{555}}) {
    shardps::PushRequest push = PushOf("async", 9999, 0, 1.0f);
    push.set_session(session);
    push.set_sequence(1);
    s = Push(push);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
        << s.error_message();
    EXPECT_NE(s.error_message().find("--max_workers"), std::string::npos)
        << s.error_message();
  }
  // Known workers go on pushing; the refused ones changed nothing.
  ASSERT_TRUE(Push(PushOf("async", 3000, 1, 1.0f)).ok());
  EXPECT_EQ(ValuesOf("async"), std::vector<float>(16, 1.0f));
  const shardps::TableStats* t = TableNamed(Stats(), "async");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->worker_clocks_size(), 8);
  EXPECT_EQ(t->version(), 9u);
}

TEST_F(HostileClientTest, AHugeAuthorizationHeaderIsUnauthenticated) {
  ServerOptions o;
  o.auth_token = "the-job-token";
  Start(o);
  auto channel = grpc::CreateChannel(server_->address(),
                                     grpc::InsecureChannelCredentials());
  auto stub = shardps::ParameterServer::NewStub(channel);
  // Up to the server's metadata limit the token check answers, and the
  // connection stays up: the next call on the same channel works.
  auto stats = [&](const std::string& authorization) {
    grpc::ClientContext context;
    context.AddMetadata(kAuthMetadataKey, authorization);
    shardps::StatsRequest request;
    request.set_job(kJob);
    shardps::StatsResponse response;
    return stub->Stats(&context, request, &response);
  };
  for (size_t size : {size_t{20} << 10, size_t{1} << 20}) {
    const grpc::Status s = stats("Bearer " + std::string(size, 'a'));
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED)
        << size << ": " << s.error_message();
    EXPECT_LT(s.error_message().size(), kShortMessage);
    const grpc::Status next = stats(BearerValue("the-job-token"));
    EXPECT_TRUE(next.ok()) << size << ": " << next.error_message();
  }
  // Beyond it gRPC refuses the headers itself, and may close the
  // connection: the channel's next call after that connects anew.
  const grpc::Status over =
      stats("Bearer " + std::string(size_t{3} << 20, 'a'));
  EXPECT_EQ(over.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << over.error_message();
  grpc::Status after = stats(BearerValue("the-job-token"));
  if (after.error_code() == grpc::StatusCode::UNAVAILABLE) {
    after = stats(BearerValue("the-job-token"));
  }
  EXPECT_TRUE(after.ok()) << after.error_message();
}

}  // namespace
}  // namespace ps
