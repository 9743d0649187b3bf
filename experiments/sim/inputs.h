// What shardps-sim reads: tc link rates ("100mbit", "10gbit": the emulated
// cluster's and the launcher's notation) and the calibration file
// experiments/scale.py writes: one "key value" per line, '#' comments.
//
// Thread-safety: plain functions of their arguments.
#ifndef SHARDPS_EXPERIMENTS_SIM_INPUTS_H_
#define SHARDPS_EXPERIMENTS_SIM_INPUTS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "experiments/sim/job.h"

namespace sim {

// Bytes per second of a tc rate; INVALID_ARGUMENT naming it otherwise.
absl::StatusOr<double> ParseRate(absl::string_view rate);

// The layers of --layers: "PARAMS:FORWARD_AT:GRADIENT_AT,..." in forward
// order, a layer's float32 parameters and the fractions of a step's compute
// at which forward reads them and backward writes their gradient (what
// experiments/perfmodel.py's sim_layers makes of shardps-worker
// --bench=model's profile). INVALID_ARGUMENT naming the layer otherwise;
// the ranges are CheckSpecs'.
absl::StatusOr<std::vector<LayerTiming>> ParseLayers(absl::string_view text);

// The calibration in `text` (read from `name`, for messages): every key of
// Calibration exactly once; an unknown, repeated or missing key, or a value
// that is not a number, is INVALID_ARGUMENT naming the line.
absl::StatusOr<Calibration> ParseCalibration(absl::string_view text,
                                             absl::string_view name);
absl::StatusOr<Calibration> ReadCalibration(const std::string& path);

}  // namespace sim

#endif  // SHARDPS_EXPERIMENTS_SIM_INPUTS_H_
