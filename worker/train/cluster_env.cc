#include "worker/train/cluster_env.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace worker {

absl::StatusOr<RankWorld> ResolveRankWorld(
    int flag_rank, int flag_world,
    const std::function<const char*(const char*)>& getenv) {
  RankWorld out;
  int rank = flag_rank, world = flag_world;
  std::string rank_source = "--rank", world_source = "--world";
  auto from_env = [&](const char* name, int* value,
                      std::string* source) -> absl::Status {
    if (*value >= 0) return absl::OkStatus();
    const char* text = getenv(name);
    if (text == nullptr) return absl::OkStatus();
    if (!absl::SimpleAtoi(text, value) || *value < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, "='", text, "' is not a non-negative integer"));
    }
    *source = name;
    return absl::OkStatus();
  };
  const char* pairs[][2] = {{"SLURM_PROCID", "SLURM_NTASKS"},
                            {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                            {"PMI_RANK", "PMI_SIZE"},
                            {"JOB_COMPLETION_INDEX", nullptr}};
  for (const auto& pair : pairs) {
    if (absl::Status s = from_env(pair[0], &rank, &rank_source); !s.ok()) {
      return s;
    }
    if (pair[1] != nullptr) {
      if (absl::Status s = from_env(pair[1], &world, &world_source); !s.ok()) {
        return s;
      }
    }
  }
  if (rank < 0) {
    rank = 0;
    rank_source = "default";
  }
  if (world < 0) {
    world = 1;
    world_source = "default";
  }
  if (world < 1 || rank >= world) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, " (from ", rank_source, ") is not below ",
                     "world ", world, " (from ", world_source, ")"));
  }
  out.rank = rank;
  out.world = world;
  out.source =
      absl::StrCat("rank from ", rank_source, ", world from ", world_source);
  return out;
}

}  // namespace worker
