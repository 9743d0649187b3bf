// Sparse tables end to end through ps::Client and three in-process servers:
// rows start from (seed, id) on whichever server owns them, repeated ids
// are answered and summed, each id lives on the shard RowPartition names,
// pushes are applied exactly once with 30% of replies lost, and bad input
// (from this client or from one written from the proto alone) is refused
// by name and changes nothing.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "proto/shardps.grpc.pb.h"
#include "ps/client/client.h"
#include "ps/server/server.h"
#include "ps/table/initializer.h"
#include "ps/wire/row_partition.h"
#include "util/files.h"

namespace ps {
namespace {

constexpr uint32_t kDim = 4;

class RowOpsTest : public testing::Test {
 protected:
  // With `checkpoints`, server i keeps checkpoints in checkpoints/i.
  void StartServers(double drop_reply_fraction = 0,
                    const std::string& checkpoints = "") {
    for (int i = 0; i < 3; ++i) {
      absl::StatusOr<std::unique_ptr<Server>> s =
          Server::Start(Options(i, drop_reply_fraction, checkpoints, 0));
      ASSERT_TRUE(s.ok()) << s.status();
      addrs_.push_back((*s)->address());
      servers_.push_back(*std::move(s));
    }
  }

  static ServerOptions Options(int i, double drop_reply_fraction,
                               const std::string& checkpoints, int port) {
    ServerOptions o;
    o.host = "127.0.0.1";
    o.port = port;
    o.job = "rows";
    o.drop_reply_fraction = drop_reply_fraction;
    if (!checkpoints.empty()) {
      o.checkpoint.dir = absl::StrCat(checkpoints, "/", i);
      o.checkpoint.every = absl::ZeroDuration();
    }
    return o;
  }

  std::unique_ptr<Client> Connect(
      absl::Duration retry_give_up = {},
      shardps::ValueEncoding pull = shardps::FLOAT32,
      shardps::ValueEncoding push = shardps::FLOAT32) {
    ClientOptions o;
    o.pull_encoding = pull;
    o.push_encoding = push;
    o.server_addrs = addrs_;
    o.job = "rows";
    o.retry_give_up = retry_give_up;
    o.chunk_bytes = 64 * kDim * sizeof(float);  // 64 rows a call
    absl::StatusOr<std::unique_ptr<Client>> c = Client::Connect(o);
    EXPECT_TRUE(c.ok()) << c.status();
    return *std::move(c);
  }

  static RowTableOptions Table(shardps::InitConfig init) {
    RowTableOptions t;
    t.name = "emb";
    t.dim = kDim;
    t.max_rows_per_shard = 10000;
    t.optimizer.set_name("sgd");
    t.optimizer.set_learning_rate(1.0f);
    t.init = std::move(init);
    return t;
  }

  static shardps::InitConfig Normal() {
    shardps::InitConfig init;
    init.set_kind("normal");
    init.set_scale(0.1f);
    init.set_seed(11);
    return init;
  }

  static shardps::InitConfig Zero() {
    shardps::InitConfig init;
    init.set_kind("constant");
    init.set_value(0.0f);
    return init;
  }

  // Each server's row count, from Stats.
  std::vector<uint64_t> Rows(Client& client) {
    std::vector<uint64_t> rows;
    absl::StatusOr<std::vector<shardps::StatsResponse>> stats = client.Stats();
    EXPECT_TRUE(stats.ok()) << stats.status();
    for (const shardps::StatsResponse& s : *stats) {
      uint64_t n = 0;
      for (const shardps::TableStats& t : s.tables()) {
        if (t.table() == "emb") n = t.rows();
      }
      rows.push_back(n);
    }
    return rows;
  }

  std::vector<std::unique_ptr<Server>> servers_;
  std::vector<std::string> addrs_;
};

TEST_F(RowOpsTest, RowsStartFromTheSeedOnTheShardThatOwnsThem) {
  StartServers();
  std::unique_ptr<Client> client = Connect();
  ASSERT_TRUE(client->CreateRowTable(Table(Normal())).ok());
  std::vector<uint64_t> ids;
  for (uint64_t i = 0; i < 300; ++i) ids.push_back(i * 7919 + (i % 3) * 5);
  ids.push_back(ids[10]);  // a repeat
  std::vector<float> out(ids.size() * kDim);
  ASSERT_TRUE(client->PullRows("emb", ids, out.data()).ok());
  std::vector<float> want(kDim);
  for (size_t i = 0; i < ids.size(); ++i) {
    FillInitialRow(Normal(), ids[i], kDim, want.data());
    for (uint32_t j = 0; j < kDim; ++j) {
      ASSERT_EQ(out[i * kDim + j], want[j]) << "id " << ids[i];
    }
  }
  // Each row was created once, on the shard XXH3 names.
  const RowPartition partition(RowSharding::kHash, 3);
  std::vector<uint64_t> expected(3);
  for (size_t i = 0; i + 1 < ids.size(); ++i) {
    ++expected[partition.ShardOf(ids[i])];
  }
  EXPECT_EQ(Rows(*client), expected);
  EXPECT_GT(expected[0], 50u);  // spread, not piled on one shard
  EXPECT_GT(expected[2], 50u);
}

TEST_F(RowOpsTest, RepeatedIdsAreSummedAndAnotherClientSeesTheRows) {
  StartServers();
  std::unique_ptr<Client> client = Connect();
  ASSERT_TRUE(client->CreateRowTable(Table(Zero())).ok());
  const std::vector<uint64_t> ids = {5, 900, 5, 1ull << 60, 5};
  std::vector<float> grads(ids.size() * kDim);
  for (size_t i = 0; i < grads.size(); ++i) grads[i] = 0.25f * (i % 8);
  ASSERT_TRUE(client->PushRows("emb", ids, grads.data()).ok());
  std::unique_ptr<Client> other = Connect();
  ASSERT_TRUE(other->OpenRowTable("emb").ok());
  std::vector<float> out(3 * kDim);
  const std::vector<uint64_t> read = {5, 900, 1ull << 60};
  ASSERT_TRUE(other->PullRows("emb", read, out.data(), false).ok());
  for (uint32_t j = 0; j < kDim; ++j) {
    EXPECT_EQ(out[j], -(grads[j] + grads[2 * kDim + j] + grads[4 * kDim + j]));
    EXPECT_EQ(out[kDim + j], -grads[kDim + j]);
    EXPECT_EQ(out[2 * kDim + j], -grads[3 * kDim + j]);
  }
}

TEST_F(RowOpsTest, ManyRepeatsOverManyCallsAreEachSummedOnce) {
  StartServers();
  std::unique_ptr<Client> client = Connect();
  ASSERT_TRUE(client->CreateRowTable(Table(Zero())).ok());
  // 2000 draws of 300 ids: about 1700 repeats, spread over the three
  // servers' calls of 64 rows.
  std::mt19937 random(5);
  std::vector<uint64_t> ids(2000);
  for (uint64_t& id : ids) id = (random() % 300) * 104729;
  std::vector<float> grads(ids.size() * kDim);
  for (float& g : grads) g = static_cast<float>(random() % 1000) / 64.0f - 7;
  ASSERT_TRUE(client->PushRows("emb", ids, grads.data()).ok());
  // Summed in the callers' order, as the client sums them.
  std::map<uint64_t, std::vector<float>> sums;
  for (size_t i = 0; i < ids.size(); ++i) {
    auto [it, fresh] = sums.try_emplace(ids[i], kDim, 0.0f);
    for (uint32_t j = 0; j < kDim; ++j) {
      it->second[j] =
          fresh ? grads[i * kDim + j] : it->second[j] + grads[i * kDim + j];
    }
  }
  std::vector<float> out(ids.size() * kDim);
  ASSERT_TRUE(client->PullRows("emb", ids, out.data(), false).ok());
  for (size_t i = 0; i < ids.size(); ++i) {
    for (uint32_t j = 0; j < kDim; ++j) {
      ASSERT_EQ(out[i * kDim + j], -sums[ids[i]][j]) << "id " << ids[i];
    }
  }
  const std::vector<uint64_t> rows = Rows(*client);
  EXPECT_EQ(rows[0] + rows[1] + rows[2], sums.size());
}

TEST_F(RowOpsTest, LargeGradientsWhoseSumsStayFiniteAreApplied) {
  StartServers();
  std::unique_ptr<Client> client = Connect();
  ASSERT_TRUE(client->CreateRowTable(Table(Zero())).ok());
  // Large enough that the client sums every repeat before sending any.
  const std::vector<uint64_t> ids = {3, 5, 3};
  const std::vector<float> grads(3 * kDim, 1e38f);
  ASSERT_TRUE(client->PushRows("emb", ids, grads.data()).ok());
  std::vector<float> out(2 * kDim);
  const std::vector<uint64_t> read = {3, 5};
  ASSERT_TRUE(client->PullRows("emb", read, out.data(), false).ok());
  for (uint32_t j = 0; j < kDim; ++j) {
    EXPECT_EQ(out[j], -2e38f);
    EXPECT_EQ(out[kDim + j], -1e38f);
  }
  // A push large enough that its gradients are checked beside its
  // bucketing, while its lanes build their calls (which then do not go):
  // the same path, taken after the check.
  std::vector<uint64_t> many(20001);
  for (uint64_t i = 0; i < 20000; ++i) many[i] = 100 + i;
  many.back() = 100;
  const std::vector<float> large(many.size() * kDim, 1e35f);
  const absl::Status pushed = client->PushRows("emb", many, large.data());
  ASSERT_TRUE(pushed.ok()) << pushed;
  std::vector<float> rows(2 * kDim);
  const std::vector<uint64_t> two = {100, 20099};
  ASSERT_TRUE(client->PullRows("emb", two, rows.data(), false).ok());
  for (uint32_t j = 0; j < kDim; ++j) {
    EXPECT_EQ(rows[j], -2e35f);
    EXPECT_EQ(rows[kDim + j], -1e35f);
  }
}

TEST_F(RowOpsTest, PushesAreAppliedOnceWhileRepliesAreLost) {
  StartServers(/*drop_reply_fraction=*/0.3);
  std::unique_ptr<Client> client = Connect(absl::Seconds(30));
  ASSERT_TRUE(client->CreateRowTable(Table(Zero())).ok());
  std::vector<uint64_t> ids;
  for (uint64_t i = 0; i < 500; ++i) ids.push_back(i);  // 8 calls a shard
  const std::vector<float> ones(ids.size() * kDim, 1.0f);
  constexpr int kPushes = 20;
  for (int p = 0; p < kPushes; ++p) {
    ASSERT_TRUE(client->PushRows("emb", ids, ones.data()).ok());
  }
  std::vector<float> out(ids.size() * kDim);
  ASSERT_TRUE(client->PullRows("emb", ids, out.data(), false).ok());
  EXPECT_EQ(out, std::vector<float>(out.size(), -kPushes));
}

TEST_F(RowOpsTest, BadInputIsRefusedByNameAndChangesNothing) {
  StartServers();
  std::unique_ptr<Client> client = Connect();
  ASSERT_TRUE(client->CreateRowTable(Table(Zero())).ok());
  const std::vector<uint64_t> ids = {1, 2};
  std::vector<float> grads(2 * kDim, 1.0f);
  grads[5] = std::nanf("");
  absl::Status s = client->PushRows("emb", ids, grads.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  // Repeats whose sum overflows, beside rows that alone would be fine.
  const std::vector<uint64_t> twice = {7, 8, 7};
  std::vector<float> huge(3 * kDim, std::numeric_limits<float>::max());
  s = client->PushRows("emb", twice, huge.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "overflow")) << s;
  // The same in a push large enough that its gradients are checked while
  // its lanes build their calls: none of them goes.
  std::vector<uint64_t> many(20000);
  for (uint64_t i = 0; i < many.size(); ++i) many[i] = 1000 + i;
  std::vector<float> large(many.size() * kDim, 1.0f);
  large.back() = std::numeric_limits<float>::infinity();
  s = client->PushRows("emb", many, large.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "nothing was sent")) << s;
  many.back() = many.front();
  large.assign(large.size(), std::numeric_limits<float>::max());
  s = client->PushRows("emb", many, large.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "overflow")) << s;
  // More ids than a call numbers (refused before any is read).
  const absl::Span<const uint64_t> too_many(ids.data(), size_t{1} << 32);
  s = client->PushRows("emb", too_many, grads.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "at most 2^32 - 1")) << s;
  std::vector<float> out(2 * kDim);
  s = client->PullRows("emb", too_many, out.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  s = client->PullRows("emb", ids, out.data(), /*create=*/false);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "does not exist")) << s;
  EXPECT_EQ(Rows(*client), (std::vector<uint64_t>{0, 0, 0}));
  s = client->PullRows("nope", ids, out.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  // A dense table of the same name is refused, naming the sparse one.
  TableOptions dense;
  dense.name = "emb";
  dense.num_params = 8;
  dense.optimizer.set_name("sgd");
  dense.optimizer.set_learning_rate(1.0f);
  s = client->CreateTable(dense);
  EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "exists as a sparse table")) << s;

  // From the proto alone: an id shard 0 does not own, a gradient of the
  // wrong size, 1-bit values.
  std::unique_ptr<shardps::ParameterServer::Stub> stub =
      shardps::ParameterServer::NewStub(
          grpc::CreateChannel(addrs_[0], grpc::InsecureChannelCredentials()));
  const RowPartition partition(RowSharding::kHash, 3);
  uint64_t foreign = 0;
  while (partition.ShardOf(foreign) == 0) ++foreign;
  struct Case {
    uint64_t id;
    size_t bytes;
    shardps::ValueEncoding encoding;
    const char* message;
  } cases[] = {
      {foreign, kDim * 4, shardps::FLOAT32, "not to this server's shard 0"},
      {0, kDim * 4 - 4, shardps::FLOAT32, "need 16 gradient bytes"},
      {0, kDim * 4, shardps::ONEBIT, "rows travel as FLOAT32, FP16 or BF16"},
  };
  while (partition.ShardOf(cases[1].id) != 0) ++cases[1].id;
  cases[2].id = cases[1].id;
  for (const Case& c : cases) {
    shardps::PushRowsRequest r;
    r.set_job("rows");
    r.set_table("emb");
    r.add_ids(c.id);
    r.set_gradients(std::string(c.bytes, '\0'));
    r.set_encoding(c.encoding);
    shardps::PushRowsResponse reply;
    grpc::ClientContext context;
    const grpc::Status status = stub->PushRows(&context, r, &reply);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << c.message;
    EXPECT_TRUE(absl::StrContains(status.error_message(), c.message))
        << status.error_message();
  }
  // A dense pull of it is told which kind it is.
  shardps::PullRequest pull;
  pull.set_job("rows");
  pull.set_table("emb");
  pull.set_end(4);
  shardps::PullResponse pulled;
  grpc::ClientContext context;
  const grpc::Status dense_pull = stub->Pull(&context, pull, &pulled);
  EXPECT_EQ(dense_pull.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(absl::StrContains(dense_pull.error_message(),
                                "is sparse: use PullRows and PushRows"))
      << dense_pull.error_message();
  EXPECT_EQ(Rows(*client), (std::vector<uint64_t>{0, 0, 0}));
}

// A server stopped and started again from its checkpoint holds the rows
// it had: the client reads the same values and trains on from them.
TEST_F(RowOpsTest, AServerRestartedFromItsCheckpointKeepsItsRows) {
  testutil::ScopedTempDir dir;
  StartServers(0, dir.path());
  std::unique_ptr<Client> client = Connect();
  RowTableOptions table = Table(Normal());
  table.optimizer.set_name("adam");
  table.optimizer.set_learning_rate(0.01f);
  table.optimizer.set_beta1(0.9f);
  table.optimizer.set_beta2(0.999f);
  table.optimizer.set_epsilon(1e-8f);
  ASSERT_TRUE(client->CreateRowTable(table).ok());
  std::vector<uint64_t> ids;
  for (uint64_t i = 0; i < 500; ++i) ids.push_back(i * 104729);
  const std::vector<float> grads(ids.size() * kDim, 0.5f);
  ASSERT_TRUE(client->PushRows("emb", ids, grads.data()).ok());
  std::vector<float> before(ids.size() * kDim);
  ASSERT_TRUE(client->PullRows("emb", ids, before.data(), false).ok());
  const int port = servers_[1]->port();
  ASSERT_TRUE(servers_[1]->Shutdown(absl::Seconds(1)).ok());
  servers_[1].reset();
  absl::StatusOr<std::unique_ptr<Server>> again =
      Server::Start(Options(1, 0, dir.path(), port));
  ASSERT_TRUE(again.ok()) << again.status();
  servers_[1] = *std::move(again);
  std::vector<float> after(ids.size() * kDim);
  ASSERT_TRUE(client->PullRows("emb", ids, after.data(), false).ok());
  EXPECT_EQ(after, before);
  // Adam's moments came back too: every row has had the same gradients,
  // so a push of the opposite sign moves each the same way on every shard
  // (a fresh Adam on the restarted one would move its rows a full lr).
  const std::vector<float> back(ids.size() * kDim, -0.5f);
  ASSERT_TRUE(client->PushRows("emb", ids, back.data()).ok());
  ASSERT_TRUE(client->PullRows("emb", ids, after.data(), false).ok());
  const RowPartition partition(RowSharding::kHash, 3, 0);
  int on_restarted = 0;
  const float step = after[0] - before[0];
  EXPECT_LT(std::abs(step), 0.005f);  // not a fresh Adam's 0.01
  for (size_t i = 0; i < ids.size(); ++i) {
    on_restarted += partition.ShardOf(ids[i]) == 1;
    EXPECT_NEAR(after[i * kDim] - before[i * kDim], step, 1e-6)
        << "row " << ids[i] << " on shard " << partition.ShardOf(ids[i]);
  }
  EXPECT_GT(on_restarted, 100);
}

// Compression covers rows: fp16 and bf16 each way carry values they can
// hold exactly, in half the bytes; 1-bit pushes fall back to float32.
TEST_F(RowOpsTest, RowsTravelCompressed) {
  StartServers();
  std::unique_ptr<Client> plain = Connect();
  ASSERT_TRUE(plain->CreateRowTable(Table(Zero())).ok());
  std::vector<uint64_t> ids;
  for (uint64_t i = 0; i < 400; ++i) ids.push_back(i * 977);
  const size_t n = ids.size() * kDim;
  std::vector<float> out(n);
  const std::vector<float> half(n, 0.5f);
  struct Case {
    shardps::ValueEncoding pull, push;
  };
  float want = 0;
  for (const Case& c :
       {Case{shardps::FP16, shardps::BF16}, Case{shardps::BF16, shardps::FP16},
        Case{shardps::FP16, shardps::ONEBIT}}) {
    std::unique_ptr<Client> client = Connect({}, c.pull, c.push);
    ASSERT_TRUE(client->OpenRowTable("emb").ok());
    ASSERT_TRUE(client->PushRows("emb", ids, half.data()).ok());
    want -= 0.5f;  // sgd at learning rate 1
    const uint64_t before = client->pull_bytes();
    ASSERT_TRUE(client->PullRows("emb", ids, out.data(), false).ok());
    EXPECT_EQ(out, std::vector<float>(n, want)) << c.pull << " " << c.push;
    // Half of float32's bytes, plus ids and headers.
    const uint64_t pulled = client->pull_bytes() - before;
    EXPECT_GE(pulled, n * 2);
    EXPECT_LT(pulled, n * 3);
  }
  // The plain client reads what the compressed ones wrote.
  ASSERT_TRUE(plain->PullRows("emb", ids, out.data(), false).ok());
  EXPECT_EQ(out, std::vector<float>(n, -1.5f));
}

TEST_F(RowOpsTest, RangeShardingPutsContiguousIdsTogether) {
  StartServers();
  std::unique_ptr<Client> client = Connect();
  RowTableOptions t = Table(Zero());
  t.sharding = shardps::ROW_RANGE;
  t.id_space = 300;
  ASSERT_TRUE(client->CreateRowTable(t).ok());
  std::vector<uint64_t> ids;
  for (uint64_t i = 0; i < 150; ++i) ids.push_back(i);  // shards 0 and 1
  std::vector<float> out(ids.size() * kDim);
  ASSERT_TRUE(client->PullRows("emb", ids, out.data()).ok());
  EXPECT_EQ(Rows(*client), (std::vector<uint64_t>{100, 50, 0}));
}

}  // namespace
}  // namespace ps
