// Start-up shared by every shardps binary: flag parsing with a --help that
// lists the program's own flags and their defaults, then process tuning.
#ifndef SHARDPS_PS_PROGRAM_H_
#define SHARDPS_PS_PROGRAM_H_

#include <vector>

#include "absl/strings/string_view.h"

namespace ps {

// Parses the command line (exits with a message on a bad flag) and returns
// the positional arguments.
std::vector<char*> InitProgram(int argc, char** argv, absl::string_view usage);

}  // namespace ps

#endif  // SHARDPS_PS_PROGRAM_H_
