#include "worker/train/training_config.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "ps/wire/table_spec.h"

namespace worker {

double DefaultLearningRate(const std::string& optimizer) {
  if (optimizer == "sgd") return 0.1;
  if (optimizer == "momentum" || optimizer == "nesterov") return 0.01;
  if (optimizer == "adagrad") return 0.05;
  if (optimizer == "adam") return 0.001;
  return 0;
}

absl::StatusOr<shardps::OptimizerConfig> MakeOptimizerConfig(
    const OptimizerFlags& flags) {
  shardps::OptimizerConfig c;
  const bool nesterov = flags.name == "nesterov";
  c.set_name(nesterov ? "momentum" : flags.name);
  c.set_learning_rate(static_cast<float>(
      flags.lr != 0 ? flags.lr : DefaultLearningRate(flags.name)));
  if (c.name() == "momentum") {
    c.set_momentum(static_cast<float>(flags.momentum));
    c.set_nesterov(nesterov);
  } else if (c.name() == "adagrad") {
    c.set_epsilon(static_cast<float>(flags.epsilon));
    c.set_initial_accumulator(static_cast<float>(flags.initial_accumulator));
  } else if (c.name() == "adam") {
    c.set_beta1(static_cast<float>(flags.beta1));
    c.set_beta2(static_cast<float>(flags.beta2));
    c.set_epsilon(static_cast<float>(flags.epsilon));
  }
  if (absl::Status s = ps::ValidateOptimizer(c); !s.ok()) {
    // The server's message names the config field, which is the flag's name.
    return absl::InvalidArgumentError(
        absl::StrCat("--optimizer=", flags.name, ": ", s.message(),
                     " (flags --lr, --momentum, --beta1, --beta2, --epsilon, "
                     "--initial_accumulator)"));
  }
  return c;
}

absl::StatusOr<shardps::ConsistencyConfig> MakeConsistencyConfig(
    const std::string& consistency, int world, double straggler_timeout_s,
    const std::string& straggler_policy) {
  shardps::ConsistencyConfig c;
  if (consistency == "async") return c;
  if (consistency == "sync") {
    c.set_mode(shardps::CONSISTENCY_SYNC);
  } else if (absl::StartsWith(consistency, "ssp:")) {
    uint32_t k = 0;
    if (!absl::SimpleAtoi(consistency.substr(4), &k) || k < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("--consistency=", consistency,
                       ": the staleness K of ssp:K must be an integer >= 1"));
    }
    c.set_mode(shardps::CONSISTENCY_SSP);
    c.set_staleness(k);
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--consistency=", consistency,
                     ": expected async, sync or ssp:K (K >= 1)"));
  }
  c.set_num_workers(world);
  c.set_straggler_timeout_seconds(straggler_timeout_s);
  absl::StatusOr<shardps::StragglerPolicy> policy =
      ps::ParseStragglerPolicy(straggler_policy);
  if (!policy.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--straggler_policy=", straggler_policy, ": expected fail or drop"));
  }
  c.set_straggler_policy(*policy);
  if (absl::Status s = ps::ValidateConsistency(c); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--consistency=", consistency, ": ", s.message(),
        " (flags --straggler_timeout_s, --straggler_policy, --world)"));
  }
  return c;
}

std::string ConsistencyFlag(const shardps::ConsistencyConfig& config) {
  if (config.mode() == shardps::CONSISTENCY_SSP) {
    return absl::StrCat("ssp:", config.staleness());
  }
  return std::string(ps::ConsistencyModeName(config.mode()));
}

absl::StatusOr<ps::WireEncodings> MakeWireEncodings(
    const std::string& compression) {
  absl::StatusOr<ps::WireEncodings> e = ps::EncodingsFor(compression);
  if (!e.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--compression=", compression, ": ", e.status().message()));
  }
  return e;
}

}  // namespace worker
