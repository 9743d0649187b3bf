// The area under the ROC curve of scores against binary labels (1: a
// positive): the chance that a random positive scores above a random
// negative, ties counted half. How criteo-synthetic states the best score
// its hidden model reaches, and how a worker scores a click model on the
// same data.
//
// Thread-safety: a free function without shared state.
#ifndef SHARDPS_LOADER_AUC_H_
#define SHARDPS_LOADER_AUC_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace loader {

// INVALID_ARGUMENT when the sizes differ, a label is not 0 or 1, a score is
// NaN, or one of the two classes is missing (the AUC is then undefined).
absl::StatusOr<double> Auc(absl::Span<const float> scores,
                           absl::Span<const int32_t> labels);

}  // namespace loader

#endif  // SHARDPS_LOADER_AUC_H_
