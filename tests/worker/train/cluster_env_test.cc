#include "worker/train/cluster_env.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace worker {
namespace {

auto Env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

TEST(ClusterEnvTest, FlagsWinOverTheEnvironment) {
  auto rw = ResolveRankWorld(2, 4, Env({{"SLURM_PROCID", "1"}}));
  ASSERT_TRUE(rw.ok());
  EXPECT_EQ(rw->rank, 2);
  EXPECT_EQ(rw->world, 4);
}

TEST(ClusterEnvTest, EachLauncherIsRecognised) {
  EXPECT_EQ(ResolveRankWorld(
                -1, -1, Env({{"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "8"}}))
                ->rank,
            3);
  auto ompi = ResolveRankWorld(
      -1, -1,
      Env({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}}));
  EXPECT_EQ(ompi->rank, 1);
  EXPECT_EQ(ompi->world, 2);
  auto pmi =
      ResolveRankWorld(-1, -1, Env({{"PMI_RANK", "0"}, {"PMI_SIZE", "5"}}));
  EXPECT_EQ(pmi->world, 5);
  auto k8s = ResolveRankWorld(-1, 6, Env({{"JOB_COMPLETION_INDEX", "4"}}));
  EXPECT_EQ(k8s->rank, 4);
  EXPECT_EQ(k8s->world, 6);
  EXPECT_NE(k8s->source.find("JOB_COMPLETION_INDEX"), std::string::npos);
  auto none = ResolveRankWorld(-1, -1, Env({}));
  EXPECT_EQ(none->rank, 0);
  EXPECT_EQ(none->world, 1);
}

TEST(ClusterEnvTest, BadValuesAreNamed) {
  auto bad = ResolveRankWorld(-1, -1, Env({{"SLURM_PROCID", "x"}}));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("SLURM_PROCID='x'"), std::string::npos);
  auto beyond = ResolveRankWorld(-1, 4, Env({{"JOB_COMPLETION_INDEX", "4"}}));
  ASSERT_FALSE(beyond.ok());
  EXPECT_NE(beyond.status().message().find("JOB_COMPLETION_INDEX"),
            std::string::npos)
      << beyond.status();
}

}  // namespace
}  // namespace worker
