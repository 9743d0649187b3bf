// Rank and world size of this worker: from flags, or else from the
// launcher's environment (DESIGN.md, "Conventions"):
//   SLURM_PROCID / SLURM_NTASKS, OMPI_COMM_WORLD_RANK / OMPI_COMM_WORLD_SIZE,
//   PMI_RANK / PMI_SIZE, JOB_COMPLETION_INDEX (Kubernetes Indexed Job; the
//   world size then comes from the flag).
//
// Thread-safety: a function of its arguments and the environment it is
// given.
#ifndef SHARDPS_WORKER_TRAIN_CLUSTER_ENV_H_
#define SHARDPS_WORKER_TRAIN_CLUSTER_ENV_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"

namespace worker {

struct RankWorld {
  int rank = 0;
  int world = 1;
  std::string source;  // where they came from, for the log
};

// `flag_rank` / `flag_world` are -1 when not given. `getenv` looks up a
// variable (nullptr when unset), so tests can pass a fake environment.
// INVALID_ARGUMENT names the variable or flag that is malformed or
// inconsistent.
absl::StatusOr<RankWorld> ResolveRankWorld(
    int flag_rank, int flag_world,
    const std::function<const char*(const char*)>& getenv);

}  // namespace worker

#endif  // SHARDPS_WORKER_TRAIN_CLUSTER_ENV_H_
