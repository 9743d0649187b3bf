#include "ps/table/updater.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "util/configs.h"

namespace ps {
namespace {

using testutil::Adagrad;
using testutil::Adam;
using testutil::Momentum;
using testutil::Optimizer;

// Applies the one-key gradients in turn to a weight starting at 1.
std::vector<float> OneKeyTrajectory(const shardps::OptimizerConfig& c,
                                    const std::vector<float>& grads) {
  absl::StatusOr<std::unique_ptr<Updater>> u = MakeUpdater(c, 1);
  EXPECT_TRUE(u.ok()) << u.status();
  float w = 1;
  std::vector<float> out;
  for (float g : grads) {
    (*u)->Apply(0, &w, UnalignedFloats(&g, 1), 1.0f);
    out.push_back(w);
  }
  return out;
}

void ExpectNear(const std::vector<float>& got, const std::vector<double>& want,
                double tolerance = 2e-6) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], tolerance) << "step " << i + 1;
  }
}

// Worked by hand from the update rules in proto/shardps.proto, weight 1,
// gradients 1, 2, 3 (Adam: 1, -2, 3).
TEST(UpdaterTest, SgdByHand) {
  ExpectNear(OneKeyTrajectory(Optimizer("sgd", 0.1f), {1, 2, 3}),
             {0.9, 0.7, 0.4});
}

TEST(UpdaterTest, MomentumByHand) {
  // v = 1, 2.9, 5.61; w -= 0.1 v.
  ExpectNear(OneKeyTrajectory(Momentum(0.1f, 0.9f, false), {1, 2, 3}),
             {0.9, 0.61, 0.049});
}

TEST(UpdaterTest, NesterovByHand) {
  // v = 1, 2.9, 5.61; w -= 0.1 (g + 0.9 v) = 0.19, 0.461, 0.8049.
  ExpectNear(OneKeyTrajectory(Momentum(0.1f, 0.9f, true), {1, 2, 3}),
             {0.81, 0.349, -0.4559});
}

TEST(UpdaterTest, AdagradByHand) {
  // s = 1.5, 5.5, 14.5; w -= 0.1 g / sqrt(s).
  ExpectNear(OneKeyTrajectory(Adagrad(0.1f, 1e-7f, 0.5f), {1, 2, 3}),
             {0.91835035, 0.83307007, 0.75428621});
}

TEST(UpdaterTest, AdamByHand) {
  // t=1: m^ = 1, v^ = 1, a step of exactly lr whatever the gradient's size;
  // t=2: m = -0.11, v = 0.004999, m^ = -0.578947, v^ = 2.500750;
  // t=3: m = 0.201, v = 0.013994, m^ = 0.741697, v^ = 4.669335.
  ExpectNear(OneKeyTrajectory(Adam(0.1f, 0.9f, 0.999f, 1e-8f), {1, -2, 3}),
             {0.9, 0.93661035, 0.90228625});
}

TEST(UpdaterTest, TheLearningRateScaleScalesTheStepByHand) {
  // SGD: w = 1 - 0.1 * 0.5 * 2. Adam's first step is exactly lr * scale.
  std::unique_ptr<Updater> sgd = *MakeUpdater(Optimizer("sgd", 0.1f), 1);
  float w = 1, g = 2;
  sgd->Apply(0, &w, UnalignedFloats(&g, 1), 0.5f);
  EXPECT_FLOAT_EQ(w, 0.9f);
  std::unique_ptr<Updater> adam =
      *MakeUpdater(Adam(0.1f, 0.9f, 0.999f, 1e-8f), 1);
  w = 1;
  g = -7;
  adam->Apply(0, &w, UnalignedFloats(&g, 1), 0.25f);
  EXPECT_NEAR(w, 1.025f, 1e-6);
}

// Whatever pieces a push arrives in and however many updates each key has
// had, a key moves by its own gradients alone: every key of a table
// updated piecewise over 20 steps, some touching only part of the keys,
// ends where a one-key updater fed just that key's gradients ends.
void CheckKeysMoveIndependently(const shardps::OptimizerConfig& c) {
  SCOPED_TRACE(c.ShortDebugString());
  const size_t n = 1000;
  std::vector<float> w(n);
  for (size_t k = 0; k < n; ++k) w[k] = std::sin(0.37 * k);
  std::vector<float> alone = w;
  std::vector<std::unique_ptr<Updater>> one_key;
  for (size_t k = 0; k < n; ++k) one_key.push_back(*MakeUpdater(c, 1));
  absl::StatusOr<std::unique_ptr<Updater>> u = MakeUpdater(c, n);
  ASSERT_TRUE(u.ok()) << u.status();
  for (int step = 0; step < 20; ++step) {
    // Every third step updates keys [100, 700) only.
    const size_t begin = step % 3 == 2 ? 100 : 0;
    const size_t end = step % 3 == 2 ? 700 : n;
    std::vector<float> g(end - begin);
    for (size_t j = 0; j < g.size(); ++j) {
      g[j] = std::cos(0.11 * (begin + j) + step) * (1 + step % 4);
    }
    const float lr_scale = 1.0f / (1 + 0.1f * step);
    // In pieces of 1, 63, 250 and the rest, as chunks of a push arrive.
    size_t at = begin;
    for (size_t piece : {size_t{1}, size_t{63}, size_t{250}, end}) {
      const size_t to = std::min(end, at + piece);
      (*u)->Apply(at, &w[at], UnalignedFloats(&g[at - begin], to - at),
                  lr_scale);
      at = to;
    }
    for (size_t k = begin; k < end; ++k) {
      one_key[k]->Apply(0, &alone[k], UnalignedFloats(&g[k - begin], 1),
                        lr_scale);
    }
  }
  for (size_t k = 0; k < n; ++k) {
    ASSERT_NEAR(w[k], alone[k], 1e-6 * (1 + std::fabs(alone[k])))
        << "key " << k;
  }
}

TEST(UpdaterTest, EveryRuleMovesEachKeyByItsOwnGradientsAlone) {
  CheckKeysMoveIndependently(Optimizer("sgd", 0.05f));
  CheckKeysMoveIndependently(Momentum(0.01f, 0.9f, false));
  CheckKeysMoveIndependently(Momentum(0.01f, 0.9f, true));
  CheckKeysMoveIndependently(Adagrad(0.05f, 1e-6f, 0.1f));
  CheckKeysMoveIndependently(Adam(0.01f, 0.9f, 0.999f, 1e-8f));
}

TEST(UpdaterTest, StateArraysCarryTheOptimizerAcrossUpdaters) {
  // A checkpoint copies state() out and into a fresh updater; training
  // must then continue exactly as if nothing had happened.
  for (const shardps::OptimizerConfig& c :
       {Momentum(0.1f, 0.9f, true), Adagrad(0.1f, 1e-6f, 0.0f),
        Adam(0.01f, 0.9f, 0.99f, 1e-8f)}) {
    SCOPED_TRACE(c.ShortDebugString());
    const size_t n = 64;
    auto a = *MakeUpdater(c, n);
    auto b = *MakeUpdater(c, n);
    EXPECT_EQ(a->state().size(), static_cast<size_t>(OptimizerStateArrays(c)));
    std::vector<float> wa(n, 1.0f), g(n);
    for (size_t k = 0; k < n; ++k) g[k] = 0.01f * k - 0.3f;
    for (int i = 0; i < 3; ++i) a->Apply(0, wa.data(), {g.data(), n}, 1.0f);
    std::vector<absl::Span<float>> from = a->state(), to = b->state();
    ASSERT_EQ(from.size(), to.size());
    for (size_t s = 0; s < from.size(); ++s) {
      std::copy(from[s].begin(), from[s].end(), to[s].begin());
    }
    std::vector<float> wb = wa;
    a->Apply(0, wa.data(), {g.data(), n}, 0.5f);
    b->Apply(0, wb.data(), {g.data(), n}, 0.5f);
    EXPECT_EQ(wa, wb);
  }
}

TEST(UpdaterTest, ABadConfigurationBuildsNoUpdater) {
  shardps::OptimizerConfig adam = Adam(0.1f, 1.0f, 0.99f, 1e-8f);
  absl::StatusOr<std::unique_ptr<Updater>> u = MakeUpdater(adam, 4);
  EXPECT_TRUE(absl::IsInvalidArgument(u.status())) << u.status();
  EXPECT_NE(u.status().message().find("beta1"), std::string::npos);
}

}  // namespace
}  // namespace ps
