// Turns the worker's training flags into the table configuration that the
// servers apply: the optimizer (--optimizer and its hyper-parameters) and
// the consistency mode (--consistency, --straggler_timeout_s,
// --straggler_policy); and the client's wire encodings (--compression).
// Errors name the flag.
//
// Thread-safety: pure functions.
#ifndef SHARDPS_WORKER_TRAIN_TRAINING_CONFIG_H_
#define SHARDPS_WORKER_TRAIN_TRAINING_CONFIG_H_

#include <string>

#include "absl/status/statusor.h"
#include "proto/shardps.pb.h"
#include "ps/wire/value_codec.h"

namespace worker {

struct OptimizerFlags {
  // sgd, momentum, nesterov (momentum with Nesterov's look-ahead), adagrad,
  // adam.
  std::string name = "sgd";
  double lr = 0;  // 0: DefaultLearningRate(name)
  double momentum = 0.9;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double epsilon = 1e-8;
  double initial_accumulator = 0.1;
};

// The learning rate an optimizer gets when --lr is 0: values that train the
// Fashion-MNIST MLP well with batch 128 (0 for an unknown name).
double DefaultLearningRate(const std::string& optimizer);

// The OptimizerConfig for `flags`, with only the fields that the optimizer
// uses; INVALID_ARGUMENT names the flag that is out of range.
absl::StatusOr<shardps::OptimizerConfig> MakeOptimizerConfig(
    const OptimizerFlags& flags);

// The ConsistencyConfig for --consistency=async|sync|ssp:K with `world`
// workers; INVALID_ARGUMENT names the flag.
absl::StatusOr<shardps::ConsistencyConfig> MakeConsistencyConfig(
    const std::string& consistency, int world, double straggler_timeout_s,
    const std::string& straggler_policy);

// The --consistency spelling of `config`: async, sync or ssp:K (what run
// summaries record).
std::string ConsistencyFlag(const shardps::ConsistencyConfig& config);

// ps::EncodingsFor(--compression); INVALID_ARGUMENT names the flag.
absl::StatusOr<ps::WireEncodings> MakeWireEncodings(
    const std::string& compression);

}  // namespace worker

#endif  // SHARDPS_WORKER_TRAIN_TRAINING_CONFIG_H_
