// Model spec strings name a network on the command line:
//   mlp:784-256-256-10   input width, hidden widths..., number of classes
//
// Thread-safety: a pure function.
#ifndef SHARDPS_MODEL_MODEL_SPEC_H_
#define SHARDPS_MODEL_MODEL_SPEC_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace model {

struct MlpSpec {
  // widths.front() is the input, widths.back() the number of classes; at
  // least two entries, each in [1, 1 << 20].
  std::vector<int> widths;
};

// INVALID_ARGUMENT naming the spec and what is wrong with it.
absl::StatusOr<MlpSpec> ParseModelSpec(absl::string_view spec);

}  // namespace model

#endif  // SHARDPS_MODEL_MODEL_SPEC_H_
