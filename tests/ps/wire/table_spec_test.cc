// What a valid table spec is: every rule names the field it is about, and a
// spec with fields this build does not know is refused rather than read
// wrong.
#include "ps/wire/table_spec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>

#include "util/configs.h"

namespace ps {
namespace {

using testutil::Adagrad;
using testutil::Adam;
using testutil::Consistency;
using testutil::Momentum;
using testutil::Optimizer;

shardps::CreateTableRequest Spec() {
  shardps::CreateTableRequest spec;
  spec.set_job("j");
  spec.set_table("w");
  spec.set_num_params(100);
  spec.set_num_shards(2);
  spec.set_shard_index(1);
  *spec.mutable_optimizer() = Optimizer("sgd", 0.1f);
  return spec;
}

TEST(TableSpecTest, BadOptimizersNameTheField) {
  struct Case {
    shardps::OptimizerConfig config;
    std::string mentions;
  };
  shardps::OptimizerConfig sgd_with_momentum = Optimizer("sgd", 0.1f);
  sgd_with_momentum.set_momentum(0.9f);
  shardps::OptimizerConfig adam_with_nesterov = Adam(0.1f, 0.9f, 0.99f, 1e-8f);
  adam_with_nesterov.set_nesterov(true);
  const Case cases[] = {
      {Optimizer("lbfgs", 0.1f), "unknown optimizer 'lbfgs'"},
      {Optimizer("sgd", 0), "learning_rate"},
      {Optimizer("sgd", NAN), "learning_rate"},
      {sgd_with_momentum, "does not use momentum"},
      {adam_with_nesterov, "does not use nesterov"},
      {Momentum(0.1f, 1.0f, false), "momentum must be in (0, 1)"},
      {Momentum(0.1f, 0.0f, true), "momentum must be in (0, 1)"},
      {Adagrad(0.1f, 0.0f, 0.1f), "epsilon"},
      {Adagrad(0.1f, 1e-6f, -1.0f), "initial_accumulator"},
      {Adam(0.1f, 1.0f, 0.99f, 1e-8f), "beta1"},
      {Adam(0.1f, 0.9f, -0.1f, 1e-8f), "beta2"},
      {Adam(0.1f, 0.9f, 0.99f, INFINITY), "epsilon"},
  };
  for (const Case& c : cases) {
    absl::Status s = ValidateOptimizer(c.config);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << c.config.ShortDebugString();
    EXPECT_NE(s.message().find(c.mentions), std::string::npos) << s;
  }
  for (const shardps::OptimizerConfig& good :
       {Optimizer("sgd", 0.1f), Momentum(0.1f, 0.9f, true),
        Adagrad(0.1f, 1e-6f, 0.1f), Adam(0.1f, 0.9f, 0.99f, 1e-8f)}) {
    EXPECT_TRUE(ValidateOptimizer(good).ok()) << good.ShortDebugString();
  }
}

TEST(TableSpecTest, BadConsistencyNamesTheField) {
  struct Case {
    shardps::ConsistencyConfig config;
    std::string says;
  };
  shardps::ConsistencyConfig async_with_workers;
  async_with_workers.set_num_workers(2);
  shardps::ConsistencyConfig async_dropping;
  async_dropping.set_straggler_policy(shardps::STRAGGLER_DROP);
  const Case cases[] = {
      {Consistency(static_cast<shardps::ConsistencyMode>(7), 2),
       "unknown mode 7"},
      {Consistency(shardps::CONSISTENCY_SYNC, 2, 0, 60,
                   static_cast<shardps::StragglerPolicy>(5)),
       "unknown straggler_policy 5"},
      {Consistency(shardps::CONSISTENCY_SSP, 2, 0), "staleness >= 1"},
      {Consistency(shardps::CONSISTENCY_SYNC, 2, 3),
       "sync does not use staleness"},
      {Consistency(shardps::CONSISTENCY_SYNC, 0), "num_workers"},
      {Consistency(shardps::CONSISTENCY_SYNC, 2, 0, 0),
       "straggler_timeout_seconds"},
      {Consistency(shardps::CONSISTENCY_SYNC, 2, 0, NAN),
       "straggler_timeout_seconds"},
      {async_with_workers, "async uses none"},
      {async_dropping, "async uses none"},
  };
  for (const Case& c : cases) {
    absl::Status s = ValidateConsistency(c.config);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << c.config.ShortDebugString();
    EXPECT_NE(s.message().find(c.says), std::string::npos) << s;
  }
  EXPECT_TRUE(
      ValidateConsistency(Consistency(shardps::CONSISTENCY_SSP, 4, 3)).ok());
  EXPECT_TRUE(ValidateConsistency(shardps::ConsistencyConfig{}).ok());
}

TEST(TableSpecTest, BadInitsAndSegmentsAreRefused) {
  shardps::InitConfig init;
  init.set_kind("xavier");
  EXPECT_NE(ValidateInit(init).message().find("unknown init kind 'xavier'"),
            std::string::npos);
  init.set_kind("normal");
  init.set_scale(-1);
  EXPECT_TRUE(absl::IsInvalidArgument(ValidateInit(init)));
  shardps::CreateTableRequest spec = Spec();
  shardps::InitSegment* seg = spec.add_init_segments();
  seg->set_begin(90);
  seg->set_end(101);
  absl::Status s = ValidateTableSpec(spec);
  EXPECT_NE(s.message().find("init segment [90, 101)"), std::string::npos) << s;
}

TEST(TableSpecTest, NamesAndShardsAreChecked) {
  EXPECT_TRUE(ValidateTableSpec(Spec()).ok());
  for (const std::string& name :
       {std::string(), std::string(129, 'x'), std::string("a b"),
        std::string("caf\xc3\xa9")}) {
    shardps::CreateTableRequest spec = Spec();
    spec.set_table(name);
    absl::Status s = ValidateTableSpec(spec);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << name;
    EXPECT_NE(s.message().find("table name"), std::string::npos) << s;
  }
  shardps::CreateTableRequest spec = Spec();
  spec.set_num_shards(0xECECECECu);
  EXPECT_NE(ValidateTableSpec(spec).message().find("num_shards"),
            std::string::npos);
  spec = Spec();
  spec.set_shard_index(2);
  EXPECT_NE(ValidateTableSpec(spec).message().find("shard_index 2"),
            std::string::npos);
}

TEST(TableSpecTest, FieldsThisBuildDoesNotKnowAreRefused) {
  // What an older client sends: the mode as a string in field 1.
  shardps::CreateTableRequest spec = Spec();
  shardps::ConsistencyConfig* c = spec.mutable_consistency();
  c->GetReflection()->MutableUnknownFields(c)->AddLengthDelimited(1, "sync");
  absl::Status s = ValidateTableSpec(spec);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find("consistency has field number 1"),
            std::string::npos)
      << s;
  // A newer client's field anywhere in the spec.
  spec = Spec();
  spec.GetReflection()->MutableUnknownFields(&spec)->AddVarint(42, 1);
  s = ValidateTableSpec(spec);
  EXPECT_NE(s.message().find("CreateTableRequest has field number 42"),
            std::string::npos)
      << s;
  spec = Spec();
  shardps::InitSegment* seg = spec.add_init_segments();
  seg->set_end(10);
  seg->mutable_init()
      ->GetReflection()
      ->MutableUnknownFields(seg->mutable_init())
      ->AddFixed32(9, 0);
  EXPECT_TRUE(absl::IsInvalidArgument(ValidateTableSpec(spec)));
}

TEST(TableSpecTest, NamesRoundTripTheFlagSpellings) {
  EXPECT_EQ(ConsistencyModeName(shardps::CONSISTENCY_ASYNC), "async");
  EXPECT_EQ(ConsistencyModeName(shardps::CONSISTENCY_SYNC), "sync");
  EXPECT_EQ(ConsistencyModeName(shardps::CONSISTENCY_SSP), "ssp");
  for (auto policy : {shardps::STRAGGLER_FAIL, shardps::STRAGGLER_DROP}) {
    absl::StatusOr<shardps::StragglerPolicy> parsed =
        ParseStragglerPolicy(StragglerPolicyName(policy));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, policy);
  }
  EXPECT_NE(ParseStragglerPolicy("retry").status().message().find("'retry'"),
            std::string::npos);
}

TEST(TableSpecTest, SparseTablesHaveAllTheirFieldsAndOnlyThem) {
  shardps::CreateTableRequest sparse = Spec();
  sparse.set_num_params(0);
  sparse.set_dim(16);
  sparse.set_max_rows(1000);
  EXPECT_TRUE(IsSparse(sparse));
  EXPECT_TRUE(ValidateTableSpec(sparse).ok());
  struct Case {
    const char* what;
    std::function<void(shardps::CreateTableRequest*)> edit;
    const char* message;
  } cases[] = {
      {"dense with max_rows",
       [](shardps::CreateTableRequest* s) {
         s->set_dim(0);
         s->set_num_params(100);
       },
       "are for sparse tables"},
      {"keys too", [](shardps::CreateTableRequest* s) { s->set_num_params(5); },
       "has rows, not num_params keys"},
      {"no row limit",
       [](shardps::CreateTableRequest* s) { s->set_max_rows(0); },
       "max_rows 0 is not in [1, "},
      {"too wide", [](shardps::CreateTableRequest* s) { s->set_dim(1 << 17); },
       "dim 131072 is not in [1, 65536]"},
      {"sync",
       [](shardps::CreateTableRequest* s) {
         *s->mutable_consistency() = Consistency(shardps::CONSISTENCY_SYNC, 2);
       },
       "async consistency only"},
      {"unknown sharding",
       [](shardps::CreateTableRequest* s) {
         s->set_row_sharding(static_cast<shardps::RowSharding>(7));
       },
       "neither ROW_HASH nor ROW_RANGE"},
  };
  for (const Case& c : cases) {
    shardps::CreateTableRequest spec = sparse;
    c.edit(&spec);
    const absl::Status s = ValidateTableSpec(spec);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.what;
    EXPECT_NE(s.message().find(c.message), std::string::npos)
        << c.what << ": " << s;
  }
}

}  // namespace
}  // namespace ps
