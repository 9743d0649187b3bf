#include "loader/auc.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace loader {
namespace {

TEST(AucTest, KnownRankings) {
  EXPECT_DOUBLE_EQ(*Auc({0.1f, 0.2f, 0.8f, 0.9f}, {0, 0, 1, 1}), 1.0);
  EXPECT_DOUBLE_EQ(*Auc({0.9f, 0.8f, 0.2f, 0.1f}, {0, 0, 1, 1}), 0.0);
  // Of the 2 x 2 pairs, only the positive 0.5 over the negative 0.4 wins.
  EXPECT_DOUBLE_EQ(*Auc({0.4f, 0.6f, 0.5f, 0.3f}, {0, 0, 1, 1}), 0.25);
  // Ties count half: every score equal is 0.5 whatever the labels.
  EXPECT_DOUBLE_EQ(*Auc({0.5f, 0.5f, 0.5f}, {1, 0, 0}), 0.5);
  // One tied pair of four: (1 + 1 + 0.5 + 1) / 4.
  EXPECT_DOUBLE_EQ(*Auc({0.1f, 0.7f, 0.7f, 0.9f}, {0, 0, 1, 1}), 0.875);
}

// The AUC is the chance a random positive outscores a random negative:
// counted pair by pair, it must agree.
TEST(AucTest, MatchesCountingEveryPair) {
  std::mt19937 gen(7);
  std::uniform_int_distribution<int> score(0, 20);  // many ties
  std::bernoulli_distribution label(0.3);
  std::vector<float> scores(500);
  std::vector<int32_t> labels(500);
  for (size_t i = 0; i < scores.size(); ++i) {
    scores[i] = static_cast<float>(score(gen));
    labels[i] = label(gen);
  }
  double wins = 0, pairs = 0;
  for (size_t p = 0; p < scores.size(); ++p) {
    if (labels[p] != 1) continue;
    for (size_t n = 0; n < scores.size(); ++n) {
      if (labels[n] != 0) continue;
      pairs += 1;
      wins += scores[p] > scores[n] ? 1 : scores[p] == scores[n] ? 0.5 : 0;
    }
  }
  EXPECT_NEAR(*Auc(scores, labels), wins / pairs, 1e-12);
}

TEST(AucTest, UndefinedOrMalformedInputIsRefused) {
  EXPECT_EQ(Auc({0.1f, 0.2f}, {1, 1}).status().code(),
            absl::StatusCode::kInvalidArgument);  // no negatives
  EXPECT_EQ(Auc({0.1f}, {1, 0}).status().code(),
            absl::StatusCode::kInvalidArgument);  // sizes differ
  EXPECT_EQ(Auc({0.1f, 0.2f}, {2, 0}).status().code(),
            absl::StatusCode::kInvalidArgument);  // not a 0/1 label
  EXPECT_EQ(Auc({std::nanf(""), 0.2f}, {1, 0}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace loader
