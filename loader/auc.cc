#include "loader/auc.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "absl/strings/str_cat.h"

namespace loader {

absl::StatusOr<double> Auc(absl::Span<const float> scores,
                           absl::Span<const int32_t> labels) {
  if (scores.size() != labels.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(scores.size(), " scores but ", labels.size(), " labels"));
  }
  uint64_t positives = 0;
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] != 0 && labels[i] != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("label ", labels[i], " at ", i, " is not 0 or 1"));
    }
    if (std::isnan(scores[i])) {
      return absl::InvalidArgumentError(absl::StrCat("score ", i, " is NaN"));
    }
    positives += labels[i];
  }
  const uint64_t negatives = labels.size() - positives;
  if (positives == 0 || negatives == 0) {
    return absl::InvalidArgumentError(
        "the AUC needs both positives and negatives");
  }
  std::vector<uint32_t> order(scores.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](uint32_t a, uint32_t b) { return scores[a] < scores[b]; });
  // Mann-Whitney: the positives' ranks (1-based, ties given their mean).
  double positive_ranks = 0;
  for (size_t first = 0; first < order.size();) {
    size_t last = first;
    while (last + 1 < order.size() &&
           scores[order[last + 1]] == scores[order[first]]) {
      ++last;
    }
    const double mean_rank = (first + last) / 2.0 + 1;
    for (size_t k = first; k <= last; ++k) {
      if (labels[order[k]] == 1) positive_ranks += mean_rank;
    }
    first = last + 1;
  }
  const double p = static_cast<double>(positives);
  return (positive_ranks - p * (p + 1) / 2) / (p * negatives);
}

}  // namespace loader
