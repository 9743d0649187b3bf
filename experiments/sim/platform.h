// The simulated cluster: a star of hosts, each behind a link of its own
// (split duplex: each direction has the capacity, as tc shapes the
// emulated cluster's), and where each process's CPU work runs.
//
// Thread-safety: built and used inside one SimGrid engine (one thread).
#ifndef SHARDPS_EXPERIMENTS_SIM_PLATFORM_H_
#define SHARDPS_EXPERIMENTS_SIM_PLATFORM_H_

#include <simgrid/s4u.hpp>
#include <vector>

#include "experiments/sim/job.h"

namespace sim {

// Hosts' speed: one "flop" is a nanosecond of one core's work.
inline constexpr double kFlopsPerSecond = 1e9;

struct Platform {
  std::vector<simgrid::s4u::Host*> workers;  // where their traffic goes
  std::vector<simgrid::s4u::Host*> servers;
  // Servers each of `servers` stands for (JobSpec::every_shard).
  int servers_per_host = 1;
  double server_link_capacity = 0;  // bytes/s, each direction, of a host
  simgrid::s4u::Host* storage = nullptr;
  // Where each process's CPU work runs: the shared machine, or its host.
  std::vector<simgrid::s4u::Host*> worker_cpus;
  std::vector<simgrid::s4u::Host*> server_cpus;
  // Cores a worker's client work may use at once (1 on a shared machine).
  int worker_cores = 1;
};

// Creates the hosts and links of `job`'s workers and servers on `cluster`
// (parameter links at their nominal capacity: a transfer's bytes are
// scaled by its direction's efficiency instead; the storage link scaled by
// the storage efficiency), and seals the
// platform; the servers as one host unless every_shard or shared cores.
// Once per engine.
Platform BuildPlatform(const ClusterSpec& cluster, const JobSpec& job,
                       const Calibration& calibration);

}  // namespace sim

#endif  // SHARDPS_EXPERIMENTS_SIM_PLATFORM_H_
