// Test helpers: the table configs (proto/shardps.proto) tests build most.
#ifndef SHARDPS_TESTS_UTIL_CONFIGS_H_
#define SHARDPS_TESTS_UTIL_CONFIGS_H_

#include <string>

#include "proto/shardps.pb.h"

namespace testutil {

inline shardps::OptimizerConfig Optimizer(const std::string& name, float lr) {
  shardps::OptimizerConfig c;
  c.set_name(name);
  c.set_learning_rate(lr);
  return c;
}

inline shardps::OptimizerConfig Momentum(float lr, float mu, bool nesterov) {
  shardps::OptimizerConfig c = Optimizer("momentum", lr);
  c.set_momentum(mu);
  c.set_nesterov(nesterov);
  return c;
}

inline shardps::OptimizerConfig Adagrad(float lr, float eps, float initial) {
  shardps::OptimizerConfig c = Optimizer("adagrad", lr);
  c.set_epsilon(eps);
  c.set_initial_accumulator(initial);
  return c;
}

inline shardps::OptimizerConfig Adam(float lr, float b1, float b2, float eps) {
  shardps::OptimizerConfig c = Optimizer("adam", lr);
  c.set_beta1(b1);
  c.set_beta2(b2);
  c.set_epsilon(eps);
  return c;
}

inline shardps::ConsistencyConfig Consistency(
    shardps::ConsistencyMode mode, uint32_t workers, uint32_t staleness = 0,
    double timeout_s = 600,
    shardps::StragglerPolicy policy = shardps::STRAGGLER_FAIL) {
  shardps::ConsistencyConfig c;
  c.set_mode(mode);
  c.set_num_workers(workers);
  c.set_staleness(staleness);
  c.set_straggler_timeout_seconds(timeout_s);
  c.set_straggler_policy(policy);
  return c;
}

}  // namespace testutil

#endif  // SHARDPS_TESTS_UTIL_CONFIGS_H_
