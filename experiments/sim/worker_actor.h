// One simulated worker: the real training loop's phases (ps/README.md,
// worker/train/trainer.cc) as SimGrid activities. Start-up is round trips
// (a wait), then CPU work on the worker's cores; the sequential loader
// then reads the whole data set through the storage link before the
// first step, block by block, checking each on one core before it asks
// for the next; the parallel one reads its partition batch by
// batch into a ring while training. Each step waits for a batch, pulls
// from every shard at once (server CPU, the shard's bytes from the server's
// link to the worker's, client CPU), computes (a delay: the accelerator is
// the worker's own) and pushes (client CPU, bytes, server CPU). Under sync
// a pull of step k waits until every worker pushed step k - 1. Under
// overlap=layer a step is its compute, each layer's exchange (a push and
// its answer per call) started as its gradient is written and awaited
// where forward reaches the layer.
//
// Thread-safety: runs inside one SimGrid engine (one thread).
#ifndef SHARDPS_EXPERIMENTS_SIM_WORKER_ACTOR_H_
#define SHARDPS_EXPERIMENTS_SIM_WORKER_ACTOR_H_

#include <simgrid/s4u.hpp>
#include <vector>

#include "experiments/sim/job.h"
#include "experiments/sim/platform.h"

namespace sim {

// What the workers share: the sync barrier, the pushes on their way to
// each server host, and what they record.
class JobState {
 public:
  JobState(int workers, int server_hosts);
  JobState(const JobState&) = delete;
  JobState& operator=(const JobState&) = delete;

  void Pushed(int step);
  // Returns once every worker pushed `step`.
  void AwaitPushes(int step);

  // Seconds until the push bytes now queued for server host `s` have
  // reached it: of each push on its way, what is left of it, at most
  // `queued` bytes, at `capacity` bytes/s.
  double InboundSeconds(int s, double queued, double capacity) const;
  void AddInbound(int s, simgrid::s4u::CommPtr push);
  void RemoveInbound(int s, const simgrid::s4u::CommPtr& push);

  // Pulls (pushes) now crossing server host `s`'s link; a transfer
  // adds itself from its start to its end.
  int Crossing(int s, bool pull) const;
  void Cross(int s, bool pull, int delta);

  // Per worker, seconds from its process's start to its first batch.
  std::vector<double> inits;
  std::vector<std::vector<double>> step_ends;  // per worker
  // Over every worker's steps: seconds pulling and pushing (from a call's
  // start, its waits included, to its last shard's end).
  double pull_seconds = 0;
  double push_seconds = 0;

 private:
  const int workers_;
  simgrid::s4u::MutexPtr mu_;
  simgrid::s4u::ConditionVariablePtr cv_;
  std::vector<int> pushed_;  // workers done with each step
  std::vector<std::vector<simgrid::s4u::CommPtr>> inbound_;  // per host
  std::vector<int> crossing_[2];                             // [pull][host]
};

// Starts worker `w`'s actor (and its loader's) on `platform`.
void StartWorker(int w, const JobSpec& job, const Calibration& calibration,
                 const Platform& platform, JobState* state);

}  // namespace sim

#endif  // SHARDPS_EXPERIMENTS_SIM_WORKER_ACTOR_H_
