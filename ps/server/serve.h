// What shardps-server does once its flags are read: starts one server
// (ps/server/server.h), writes its port file, serves until a stop signal,
// then stops accepting calls, lets in-flight ones finish for
// `shutdown_grace`, writes a last checkpoint and returns.
//
// Thread-safety: call from the main thread, which must hold `stop` (built
// before any other thread started).
#ifndef SHARDPS_PS_SERVER_SERVE_H_
#define SHARDPS_PS_SERVER_SERVE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "ps/base/program.h"
#include "ps/server/server.h"

namespace ps {

struct ServeOptions {
  ServerOptions server;
  // When set, the port actually bound is written here once serving
  // (whole, then renamed into place: ps/base/port_file.h).
  std::string port_file;
  absl::Duration shutdown_grace = absl::Seconds(5);
  // Chrome trace of request handling; empty: none.
  std::string trace_path;
  std::string trace_name = "shardps-server";
};

// An error when the server cannot start or its last checkpoint fails.
absl::Status Serve(ServeOptions options, const StopSignals& stop);

}  // namespace ps

#endif  // SHARDPS_PS_SERVER_SERVE_H_
