// HostSlot: where the launcher runs one process, and how to reach it.
//
// Thread-safety: a plain value.
#ifndef SHARDPS_WORKER_LAUNCH_HOST_SLOT_H_
#define SHARDPS_WORKER_LAUNCH_HOST_SLOT_H_

#include <string>
#include <vector>

namespace worker {

struct HostSlot {
  // The address other processes reach this one at.
  std::string address = "127.0.0.1";
  // Runs the process there, e.g. {"/usr/bin/ip", "netns", "exec", "h3"};
  // empty for this host.
  std::vector<std::string> command_prefix;
  // An emulated host (a network namespace of this machine): a server here
  // takes no shared memory, so that every byte crosses the emulated links
  // as it would between real hosts.
  bool emulated = false;
  // A remote shell (SSH): the command is passed to the prefix as one
  // shell-quoted string; a server listens on `port` (its port file would be
  // on the other host); stopping runs `kill -TERM PID` through
  // `stop_prefix`, the process having printed its PID first.
  bool remote = false;
  int port = 0;
  std::vector<std::string> stop_prefix;
};

}  // namespace worker

#endif  // SHARDPS_WORKER_LAUNCH_HOST_SLOT_H_
