// Start-up shared by every shardps binary: flag parsing with a --help that
// lists the program's own flags and their defaults, then process tuning.
#ifndef SHARDPS_PS_PROGRAM_H_
#define SHARDPS_PS_PROGRAM_H_

#include <vector>

#include "absl/strings/string_view.h"

namespace ps {

// Holds gRPC initialized for the life of main(). gRPC otherwise tears its
// runtime down on a background thread when the last gRPC object dies, which
// can race with process exit (a crash or a hang in exit()). Declare one
// first in main(), so it is destroyed last: its destructor waits for that
// teardown to finish.
class GrpcRuntime {
 public:
  GrpcRuntime();
  ~GrpcRuntime();
  GrpcRuntime(const GrpcRuntime&) = delete;
  GrpcRuntime& operator=(const GrpcRuntime&) = delete;
};

// Parses the command line (exits with a message on a bad flag) and returns
// the positional arguments.
std::vector<char*> InitProgram(int argc, char** argv, absl::string_view usage);

}  // namespace ps

#endif  // SHARDPS_PS_PROGRAM_H_
