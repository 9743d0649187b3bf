#include "worker/train/training_config.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>

namespace worker {
namespace {

TEST(TrainingConfigTest, OptimizerFlagsSetOnlyTheFieldsTheOptimizerUses) {
  OptimizerFlags flags;
  flags.name = "nesterov";
  absl::StatusOr<shardps::OptimizerConfig> c = MakeOptimizerConfig(flags);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->name(), "momentum");
  EXPECT_TRUE(c->nesterov());
  EXPECT_FLOAT_EQ(c->momentum(), 0.9f);
  EXPECT_FLOAT_EQ(c->learning_rate(), 0.01f);  // the default for momentum
  EXPECT_EQ(c->beta1(), 0);
  EXPECT_EQ(c->epsilon(), 0);

  flags.name = "adam";
  flags.lr = 0.002;
  c = MakeOptimizerConfig(flags);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FLOAT_EQ(c->learning_rate(), 0.002f);
  EXPECT_FLOAT_EQ(c->beta2(), 0.999f);
  EXPECT_EQ(c->momentum(), 0);
  EXPECT_FALSE(c->nesterov());

  flags = OptimizerFlags();
  c = MakeOptimizerConfig(flags);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->ShortDebugString(), "name: \"sgd\" learning_rate: 0.1");
}

TEST(TrainingConfigTest, BadOptimizerFlagsNameTheFlag) {
  OptimizerFlags flags;
  flags.name = "rmsprop";
  absl::Status s = MakeOptimizerConfig(flags).status();
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_NE(s.message().find("--optimizer=rmsprop"), std::string::npos) << s;
  flags.name = "adam";
  flags.beta2 = 1.5;
  s = MakeOptimizerConfig(flags).status();
  EXPECT_NE(s.message().find("beta2 must be in [0, 1)"), std::string::npos)
      << s;
  flags.name = "sgd";
  flags.lr = -1;
  s = MakeOptimizerConfig(flags).status();
  EXPECT_NE(s.message().find("learning_rate"), std::string::npos) << s;
}

TEST(TrainingConfigTest, ConsistencyFlagsBecomeTheEnumsAndBack) {
  absl::StatusOr<shardps::ConsistencyConfig> c =
      MakeConsistencyConfig("async", 4, 60, "fail");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->ShortDebugString(), "");  // async sets nothing
  EXPECT_EQ(ConsistencyFlag(*c), "async");
  c = MakeConsistencyConfig("sync", 4, 30, "drop");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->mode(), shardps::CONSISTENCY_SYNC);
  EXPECT_EQ(c->num_workers(), 4u);
  EXPECT_EQ(c->straggler_timeout_seconds(), 30);
  EXPECT_EQ(c->straggler_policy(), shardps::STRAGGLER_DROP);
  EXPECT_EQ(ConsistencyFlag(*c), "sync");
  c = MakeConsistencyConfig("ssp:3", 2, 60, "fail");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->mode(), shardps::CONSISTENCY_SSP);
  EXPECT_EQ(c->staleness(), 3u);
  EXPECT_EQ(ConsistencyFlag(*c), "ssp:3");
}

TEST(TrainingConfigTest, BadConsistencyFlagsNameTheFlag) {
  const std::pair<std::string, std::string> cases[] = {
      {"bsp", "--consistency=bsp"},
      {"ssp:0", "--consistency=ssp:0"},
      {"ssp:x", "--consistency=ssp:x"},
  };
  for (const auto& [flag, says] : cases) {
    absl::Status s = MakeConsistencyConfig(flag, 2, 60, "fail").status();
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << flag;
    EXPECT_NE(s.message().find(says), std::string::npos) << s;
  }
  absl::Status s = MakeConsistencyConfig("sync", 2, 60, "retry").status();
  EXPECT_NE(s.message().find("--straggler_policy=retry"), std::string::npos)
      << s;
  s = MakeConsistencyConfig("sync", 2, -1, "fail").status();
  EXPECT_NE(s.message().find("--straggler_timeout_s"), std::string::npos) << s;
}

}  // namespace
}  // namespace worker
