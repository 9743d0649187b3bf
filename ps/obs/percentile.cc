#include "ps/obs/percentile.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace ps {

double Percentile(std::vector<double> samples, double q) {
  if (samples.empty()) return 0;
  const size_t n = samples.size();
  // The small tolerance keeps q * n that should be whole (0.99 * 100) from
  // rounding up to the next rank.
  const double rank = std::ceil(q * static_cast<double>(n) - 1e-9);
  const size_t index =
      rank < 1 ? 0 : std::min(n - 1, static_cast<size_t>(rank) - 1);
  std::nth_element(samples.begin(), samples.begin() + index, samples.end());
  return samples[index];
}

}  // namespace ps
