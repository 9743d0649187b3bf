// SparseRows: rows created on first touch from (seed, id) alone; pushes
// applied exactly with repeated ids summed; per-row optimizer state kept
// apart (across blocks too); every refusal changes nothing; concurrent
// pushes lose nothing.
#include "ps/table/sparse_rows.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "ps/table/initializer.h"

namespace ps {
namespace {

shardps::InitConfig Normal(uint64_t seed) {
  shardps::InitConfig init;
  init.set_kind("normal");
  init.set_scale(0.1f);
  init.set_seed(seed);
  return init;
}

shardps::InitConfig Constant(float value) {
  shardps::InitConfig init;
  init.set_kind("constant");
  init.set_value(value);
  return init;
}

shardps::OptimizerConfig Sgd(float lr) {
  shardps::OptimizerConfig o;
  o.set_name("sgd");
  o.set_learning_rate(lr);
  return o;
}

std::unique_ptr<SparseRows> Rows(uint32_t dim, uint64_t max_rows,
                                 shardps::InitConfig init,
                                 shardps::OptimizerConfig optimizer) {
  absl::StatusOr<std::unique_ptr<SparseRows>> rows =
      SparseRows::Create({dim, max_rows, init, optimizer});
  EXPECT_TRUE(rows.ok()) << rows.status();
  return rows.ok() ? *std::move(rows) : nullptr;
}

TEST(SparseRowsTest, ARowStartsFromTheSeedAndItsIdAlone) {
  std::unique_ptr<SparseRows> a = Rows(8, 100, Normal(3), Sgd(1));
  std::unique_ptr<SparseRows> b = Rows(8, 100, Normal(3), Sgd(1));
  const std::vector<uint64_t> ids = {5, 1ull << 50, 77};
  const std::vector<uint64_t> reversed = {77, 1ull << 50, 5};
  std::vector<float> from_a(24), from_b(24), expected(8);
  ASSERT_TRUE(a->Pull(ids, /*create=*/true, from_a.data()).ok());
  ASSERT_TRUE(b->Pull(reversed, /*create=*/true, from_b.data()).ok());
  for (int i = 0; i < 3; ++i) {
    FillInitialRow(Normal(3), ids[i], 8, expected.data());
    for (int j = 0; j < 8; ++j) {
      EXPECT_EQ(from_a[i * 8 + j], expected[j]);
      EXPECT_EQ(from_b[(2 - i) * 8 + j], expected[j]);
    }
  }
  // Rows differ from each other, and with the seed.
  EXPECT_NE(from_a[0], from_a[8]);
  std::vector<float> other_seed(8);
  FillInitialRow(Normal(4), 5, 8, other_seed.data());
  EXPECT_NE(other_seed[0], from_a[0]);
  EXPECT_EQ(a->num_rows(), 3u);
}

TEST(SparseRowsTest, APullThatDoesNotCreateNamesTheMissingIdAndCreatesNothing) {
  std::unique_ptr<SparseRows> rows = Rows(4, 100, Constant(2), Sgd(1));
  std::vector<float> out(8, -1.0f);
  ASSERT_TRUE(rows->Pull({{10}}, /*create=*/true, out.data()).ok());
  std::fill(out.begin(), out.end(), -1.0f);
  const absl::Status s = rows->Pull({{10, 11}}, /*create=*/false, out.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "row 11 does not exist")) << s;
  EXPECT_EQ(rows->num_rows(), 1u);
  // Row 11 is still missing after a pull that may create, but has no room.
  std::unique_ptr<SparseRows> full = Rows(4, 1, Constant(2), Sgd(1));
  ASSERT_TRUE(full->Pull({{10}}, /*create=*/true, out.data()).ok());
  EXPECT_EQ(full->Pull({{10, 11}}, /*create=*/true, out.data()).code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(full->Pull({{11}}, /*create=*/false, out.data()).code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(full->num_rows(), 1u);
}

TEST(SparseRowsTest, RepeatedIdsAreSummedAndAppliedOnce) {
  std::unique_ptr<SparseRows> rows = Rows(2, 100, Constant(1), Sgd(0.5f));
  const std::vector<uint64_t> ids = {7, 9, 7};
  const std::vector<float> grads = {1, 2, 0.5f, 0.25f, 3, 4};
  ASSERT_TRUE(rows->Push(ids, UnalignedFloats(grads.data(), 6), 1.0f).ok());
  std::vector<float> out(4);
  ASSERT_TRUE(rows->Pull({{7, 9}}, /*create=*/false, out.data()).ok());
  EXPECT_EQ(out, (std::vector<float>{1 - 0.5f * 4, 1 - 0.5f * 6,
                                     1 - 0.5f * 0.5f, 1 - 0.5f * 0.25f}));
  // The worker's learning-rate scale applies.
  ASSERT_TRUE(rows->Push({{9}}, UnalignedFloats(grads.data(), 2), 0.5f).ok());
  ASSERT_TRUE(rows->Pull({{9}}, /*create=*/false, out.data()).ok());
  EXPECT_EQ(out[0], 0.75f - 0.25f * 1);
  EXPECT_EQ(out[1], 0.875f - 0.25f * 2);
}

// Repeats among rows already held are found another way than among new
// ones; each push must find its own, not a previous push's.
TEST(SparseRowsTest, RepeatedHeldRowsAreSummedInEveryPush) {
  std::unique_ptr<SparseRows> rows = Rows(1, 100, Constant(0), Sgd(1));
  std::vector<float> out(3);
  ASSERT_TRUE(rows->Pull({{1, 2, 3}}, /*create=*/true, out.data()).ok());
  const std::vector<float> ones(3, 1.0f);
  for (int push = 0; push < 3; ++push) {
    // Row 2 twice only in the second push; rows 1 and 3 each time.
    const std::vector<uint64_t> ids = push == 1 ? std::vector<uint64_t>{1, 2, 2}
                                                : std::vector<uint64_t>{1, 3};
    ASSERT_TRUE(
        rows->Push(ids, UnalignedFloats(ones.data(), ids.size()), 1.0f).ok());
  }
  ASSERT_TRUE(rows->Pull({{1, 2, 3}}, /*create=*/false, out.data()).ok());
  EXPECT_EQ(out, (std::vector<float>{-3, -2, -2}));
  // A repeat whose sum overflows is refused, and changes nothing.
  const std::vector<float> huge = {3e38f, 3e38f};
  EXPECT_EQ(rows->Push({{1, 1}}, UnalignedFloats(huge.data(), 2), 1.0f).code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(rows->Pull({{1}}, /*create=*/false, out.data()).ok());
  EXPECT_EQ(out[0], -3);
}

TEST(SparseRowsTest, EachRowKeepsItsOwnOptimizerStateAcrossBlocks) {
  shardps::OptimizerConfig adagrad;
  adagrad.set_name("adagrad");
  adagrad.set_learning_rate(0.1f);
  adagrad.set_epsilon(1e-6f);
  adagrad.set_initial_accumulator(0.1f);
  constexpr uint32_t kDim = 3;
  std::unique_ptr<SparseRows> rows = Rows(kDim, 10000, Normal(1), adagrad);
  // Rows 0 .. kBlockRows fill one block; the last is in the second.
  std::vector<uint64_t> all(SparseRows::kBlockRows + 1);
  for (uint64_t i = 0; i < all.size(); ++i) all[i] = 1000 + i;
  std::vector<float> ignored(all.size() * kDim);
  ASSERT_TRUE(rows->Pull(all, /*create=*/true, ignored.data()).ok());
  // The same pushes through a dense updater of one row each, kept apart.
  for (uint64_t id : {all.front(), all.back()}) {
    std::vector<float> want(kDim);
    FillInitialRow(Normal(1), id, kDim, want.data());
    std::unique_ptr<Updater> dense = *MakeUpdater(adagrad, kDim);
    for (int step = 1; step <= 3; ++step) {
      const std::vector<float> g = {0.5f * step, -1.0f, 2.0f / step};
      // Another row's push in between must not touch this row's state.
      ASSERT_TRUE(rows->Push({{id ^ 1}}, UnalignedFloats(g.data(), 3), 1).ok());
      ASSERT_TRUE(rows->Push({{id}}, UnalignedFloats(g.data(), 3), 1).ok());
      dense->Apply(0, want.data(), UnalignedFloats(g.data(), 3), 1);
    }
    std::vector<float> got(kDim);
    ASSERT_TRUE(rows->Pull({{id}}, /*create=*/false, got.data()).ok());
    EXPECT_EQ(got, want) << "row " << id;
  }
}

TEST(SparseRowsTest, RefusedPushesChangeNothing) {
  std::unique_ptr<SparseRows> rows = Rows(2, 3, Constant(1), Sgd(1));
  const std::vector<float> ok = {1, 1, 1, 1};
  ASSERT_TRUE(rows->Push({{1, 2}}, UnalignedFloats(ok.data(), 4), 1).ok());
  const std::vector<float> nan = {1, 1, 1, std::nanf("")};
  const std::vector<float> huge = {3e38f, 0, 3e38f, 0};
  const std::vector<float> six = {1, 1, 1, 1, 1, 1};
  struct Case {
    const char* what;
    absl::Status status;
    absl::StatusCode code;
    const char* message;
  } cases[] = {
      {"wrong size", rows->Push({{1, 2}}, UnalignedFloats(ok.data(), 3), 1),
       absl::StatusCode::kInvalidArgument, "need 4 gradient floats, got 3"},
      {"NaN", rows->Push({{1, 2}}, UnalignedFloats(nan.data(), 4), 1),
       absl::StatusCode::kInvalidArgument, "NaN or an infinity"},
      {"overflowing sum",
       rows->Push({{1, 1}}, UnalignedFloats(huge.data(), 4), 1),
       absl::StatusCode::kInvalidArgument, "overflow to infinity"},
      {"row limit", rows->Push({{1, 5, 6}}, UnalignedFloats(six.data(), 6), 1),
       absl::StatusCode::kResourceExhausted,
       "would create 2 rows, but the table holds 2 of at most 3"},
      {"row limit on pull", rows->Pull({{5, 6}}, true, nullptr),
       absl::StatusCode::kResourceExhausted, "at most 3"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(c.status.code(), c.code) << c.what << ": " << c.status;
    EXPECT_TRUE(absl::StrContains(c.status.message(), c.message))
        << c.what << ": " << c.status;
  }
  EXPECT_EQ(rows->num_rows(), 2u);
  std::vector<float> out(4);
  ASSERT_TRUE(rows->Pull({{1, 2}}, /*create=*/false, out.data()).ok());
  EXPECT_EQ(out, std::vector<float>(4, 0.0f));  // 1 - 1, untouched since
}

TEST(SparseRowsTest, ConcurrentPushesLoseNothing) {
  std::unique_ptr<SparseRows> rows = Rows(4, 100, Constant(0), Sgd(1));
  constexpr int kThreads = 4, kPushes = 500;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // Rows 0-9 shared by every thread, row 100 + t its own.
      std::vector<uint64_t> ids = {static_cast<uint64_t>(100 + t)};
      for (uint64_t i = 0; i < 10; ++i) ids.push_back(i);
      const std::vector<float> ones(ids.size() * 4, 1.0f);
      for (int p = 0; p < kPushes; ++p) {
        ASSERT_TRUE(
            rows->Push(ids, UnalignedFloats(ones.data(), ones.size()), 1).ok());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  std::vector<float> shared(4), own(4);
  ASSERT_TRUE(rows->Pull({{3}}, false, shared.data()).ok());
  ASSERT_TRUE(rows->Pull({{102}}, false, own.data()).ok());
  EXPECT_EQ(shared, std::vector<float>(4, -kThreads * kPushes));
  EXPECT_EQ(own, std::vector<float>(4, -kPushes));
  EXPECT_EQ(rows->num_rows(), 10u + kThreads);
}

TEST(SparseRowsTest, BadOptionsAreRefused) {
  EXPECT_EQ(SparseRows::Create({0, 10, Constant(0), Sgd(1)}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SparseRows::Create({4, 0, Constant(0), Sgd(1)}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SparseRows::Create({4, 10, Constant(0), Sgd(-1)}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ps
