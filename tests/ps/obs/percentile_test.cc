#include "ps/obs/percentile.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace ps {
namespace {

TEST(PercentileTest, NearestRankWorkedExamples) {
  std::vector<double> hundred;
  for (int i = 100; i >= 1; --i) hundred.push_back(i);  // unsorted
  EXPECT_EQ(Percentile(hundred, 0.50), 50);             // the 50th of 100
  EXPECT_EQ(Percentile(hundred, 0.99), 99);  // the 99th, not the largest
  EXPECT_EQ(Percentile(hundred, 0.995), 100);
  EXPECT_EQ(Percentile(hundred, 0.0), 1);
  EXPECT_EQ(Percentile(hundred, 1.0), 100);
  // Three samples: ceil(1.5) = 2nd, ceil(2.97) = 3rd.
  EXPECT_EQ(Percentile({30, 10, 20}, 0.50), 20);
  EXPECT_EQ(Percentile({30, 10, 20}, 0.99), 30);
  EXPECT_EQ(Percentile({7}, 0.5), 7);
  EXPECT_EQ(Percentile({}, 0.5), 0);
}

TEST(PercentileTest, OneSlowCallInAHundredIsTheP99OnlyWhenItIsTwo) {
  // 98 fast calls and 2 slow ones: the p99 (99th of 100) is slow, the p50
  // fast; with one slow call the p99 is still fast.
  std::vector<double> calls(98, 1.0);
  calls.push_back(50.0);
  calls.push_back(60.0);
  std::shuffle(calls.begin(), calls.end(), std::mt19937(3));
  EXPECT_EQ(Percentile(calls, 0.99), 50.0);
  EXPECT_EQ(Percentile(calls, 0.50), 1.0);
  calls.erase(std::find(calls.begin(), calls.end(), 50.0));
  calls.push_back(1.0);
  EXPECT_EQ(Percentile(calls, 0.99), 1.0);
}

}  // namespace
}  // namespace ps
