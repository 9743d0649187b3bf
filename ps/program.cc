#include "ps/program.h"

#include <grpc/grpc.h>

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "ps/process_tuning.h"

namespace ps {

GrpcRuntime::GrpcRuntime() { grpc_init(); }
GrpcRuntime::~GrpcRuntime() { grpc_shutdown_blocking(); }

std::vector<char*> InitProgram(int argc, char** argv, absl::string_view usage) {
  absl::SetProgramUsageMessage(usage);
  absl::FlagsUsageConfig config;
  // Abseil's --help lists flags of files named after the program; ours are
  // the *_main.cc files, whatever the binary is called.
  config.contains_helpshort_flags = [](absl::string_view path) {
    return absl::EndsWith(path, "_main.cc");
  };
  config.contains_help_flags = config.contains_helpshort_flags;
  absl::SetFlagsUsageConfig(config);
  std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  TuneProcessForBulkTransfers();
  return positional;
}

}  // namespace ps
