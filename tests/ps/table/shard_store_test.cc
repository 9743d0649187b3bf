#include "ps/table/shard_store.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <thread>
#include <vector>

namespace ps {
namespace {

std::unique_ptr<ShardStore> MakeStore(KeyRange range, float lr, float init) {
  return std::make_unique<ShardStore>(range, std::make_unique<SgdUpdater>(lr),
                                      std::vector<float>(range.size(), init));
}

absl::StatusOr<uint64_t> PushVector(ShardStore& store, KeyRange keys,
                                    const std::vector<float>& grad) {
  absl::string_view bytes(reinterpret_cast<const char*>(grad.data()),
                          grad.size() * sizeof(float));
  std::vector<absl::string_view> pieces = {bytes};
  FloatPieces gradient(pieces);
  return store.Push(keys, gradient);
}

std::vector<float> PullAll(const ShardStore& store) {
  std::vector<float> out(store.range().size());
  EXPECT_TRUE(store.Pull(store.range(), out.data()).ok());
  return out;
}

TEST(ShardStoreTest, SgdStepIsExact) {
  auto store = MakeStore({100, 110}, 0.5f, 1.0f);
  std::vector<float> grad = {2, 4, 6, 8};
  ASSERT_EQ(*PushVector(*store, {103, 107}, grad), 1u);
  std::vector<float> expect = {1, 1, 1, 0, -1, -2, -3, 1, 1, 1};
  EXPECT_EQ(PullAll(*store), expect);
  std::vector<float> part(2);
  ASSERT_EQ(*store->Pull({104, 106}, part.data()), 1u);
  EXPECT_EQ(part, (std::vector<float>{-1, -2}));
}

TEST(ShardStoreTest, ConcurrentPushesSumExactly) {
  // Integer-valued gradients with lr = 1 keep every sum exact in float32, so
  // any lost or torn update shows up as a wrong value.
  const KeyRange range{0, 5 * ShardStore::kStripeFloats + 123};
  auto store = MakeStore(range, 1.0f, 0.0f);
  const int threads = 8, pushes = 40;
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      // Each thread pushes over an overlapping, stripe-crossing window.
      const KeyRange keys{static_cast<uint64_t>(t) * 1000,
                          range.end - static_cast<uint64_t>(t) * 500};
      std::vector<float> grad(keys.size(), static_cast<float>(t + 1));
      for (int i = 0; i < pushes; ++i) {
        ASSERT_TRUE(PushVector(*store, keys, grad).ok());
      }
    });
  }
  for (auto& w : workers) w.join();
  EXPECT_EQ(store->version(), static_cast<uint64_t>(threads * pushes));
  std::vector<float> got = PullAll(*store);
  for (uint64_t k = 0; k < range.size(); ++k) {
    float expect = 0;
    for (int t = 0; t < threads; ++t) {
      if (k >= static_cast<uint64_t>(t) * 1000 &&
          k < range.end - static_cast<uint64_t>(t) * 500) {
        expect -= static_cast<float>(pushes * (t + 1));
      }
    }
    ASSERT_EQ(got[k], expect) << "key " << k;
  }
}

TEST(ShardStoreTest, PullsNeverSeeATornStripe) {
  // Whole-range pushes of ones move every key of a stripe together, so a
  // stripe copied under its lock must hold one value throughout.
  const KeyRange range{0, 4 * ShardStore::kStripeFloats};
  auto store = MakeStore(range, 1.0f, 0.0f);
  std::atomic<bool> stop{false};
  std::thread pusher([&] {
    std::vector<float> ones(range.size(), 1.0f);
    while (!stop.load()) ASSERT_TRUE(PushVector(*store, range, ones).ok());
  });
  std::vector<float> out(range.size());
  for (int i = 0; i < 200; ++i) {
    ASSERT_TRUE(store->Pull(range, out.data()).ok());
    for (uint64_t s = 0; s < 4; ++s) {
      const float first = out[s * ShardStore::kStripeFloats];
      for (uint64_t k = 0; k < ShardStore::kStripeFloats; ++k) {
        ASSERT_EQ(out[s * ShardStore::kStripeFloats + k], first)
            << "stripe " << s << " torn at pull " << i;
      }
    }
  }
  stop = true;
  pusher.join();
}

TEST(ShardStoreTest, RejectedPushesChangeNothing) {
  auto store = MakeStore({64, 96}, 0.1f, 3.0f);
  const std::vector<float> before = PullAll(*store);
  std::vector<float> grad(8, 1.0f);
  grad[7] = std::numeric_limits<float>::quiet_NaN();
  struct Case {
    KeyRange keys;
    std::vector<float> grad;
    std::string message;
  } cases[] = {
      {{64, 72}, grad, "NaN or Inf"},
      {{64, 72}, std::vector<float>(7, 1.0f), "needs 32"},
      {{90, 98}, std::vector<float>(8, 1.0f), "outside this shard"},
      {{60, 68}, std::vector<float>(8, 1.0f), "outside this shard"},
      {{72, 64}, std::vector<float>(8, 1.0f), "inverted"},
      {{70, 70}, {}, "empty"},
  };
  grad[7] = std::numeric_limits<float>::infinity();
  for (const Case& c : cases) {
    absl::StatusOr<uint64_t> r = PushVector(*store, c.keys, c.grad);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(c.message), std::string::npos)
        << r.status();
  }
  EXPECT_FALSE(PushVector(*store, {64, 72}, grad).ok());
  EXPECT_EQ(store->version(), 0u);
  EXPECT_EQ(PullAll(*store), before);
  std::vector<float> out(8);
  EXPECT_EQ(store->Pull({90, 98}, out.data()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ps
