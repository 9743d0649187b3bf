#include "experiments/sim/platform.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace sim {
namespace {

namespace s4u = simgrid::s4u;

s4u::Host* AddHost(s4u::NetZone* zone, const std::string& name, int cores,
                   double link, double latency) {
  s4u::Host* host = zone->create_host(name, kFlopsPerSecond);
  host->set_core_count(cores > 0 ? cores : 1)->seal();
  s4u::Link* up_down = zone->create_split_duplex_link(name + "-link", link)
                           ->set_latency(latency)
                           ->seal();
  zone->add_route(host->get_netpoint(), nullptr, nullptr, nullptr,
                  {{up_down, s4u::LinkInRoute::Direction::UP}}, true);
  return host;
}

}  // namespace

Platform BuildPlatform(const ClusterSpec& cluster, const JobSpec& job,
                       const Calibration& calibration) {
  s4u::NetZone* zone = s4u::create_star_zone("cluster");
  // A route crosses two links (source's, destination's): half the one-way
  // latency each.
  const double latency = cluster.latency / 2;
  Platform p;
  s4u::Host* machine = nullptr;
  if (cluster.shared_cores > 0) {
    machine = zone->create_host("machine", kFlopsPerSecond);
    machine->set_core_count(cluster.shared_cores)->seal();
  }
  p.worker_cores = machine ? 1 : cluster.worker_cores;
  const bool one_host = !job.every_shard && machine == nullptr;
  p.servers_per_host = one_host ? job.servers : 1;
  const int hosts = one_host ? 1 : job.servers;
  p.server_link_capacity = cluster.server_link * p.servers_per_host;
  for (int s = 0; s < hosts; ++s) {
    p.servers.push_back(AddHost(zone, absl::StrCat("server-", s),
                                cluster.server_cores * p.servers_per_host,
                                p.server_link_capacity, latency));
    p.server_cpus.push_back(machine ? machine : p.servers.back());
  }
  for (int w = 0; w < job.workers; ++w) {
    p.workers.push_back(AddHost(zone, absl::StrCat("worker-", w),
                                p.worker_cores, cluster.worker_link, latency));
    p.worker_cpus.push_back(machine ? machine : p.workers.back());
  }
  p.storage =
      AddHost(zone, "storage", 1,
              cluster.storage_link * calibration.storage_efficiency, latency);
  zone->seal();
  return p;
}

}  // namespace sim
