// Percentiles of measured latencies, by the nearest-rank definition: the
// q-th percentile of n samples is the ceil(q * n)-th smallest (the first
// for q = 0), so it is always one of the samples, never interpolated.
//
// Thread-safety: a pure function.
#ifndef SHARDPS_PS_OBS_PERCENTILE_H_
#define SHARDPS_PS_OBS_PERCENTILE_H_

#include <vector>

namespace ps {

// `q` in [0, 1]; 0 for no samples.
double Percentile(std::vector<double> samples, double q);

}  // namespace ps

#endif  // SHARDPS_PS_OBS_PERCENTILE_H_
