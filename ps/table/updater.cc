#include "ps/table/updater.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"

// The loops below are written so that the compiler vectorises them (the
// library builds with -O3 and, for this file, -fno-math-errno, so that sqrt
// needs no errno check); each is one pass over the keys.
namespace ps {
namespace {

// The loops themselves, as free functions so that each is built for AVX2
// too (PS_VECTOR_KERNEL).
PS_VECTOR_KERNEL void SgdStep(float* w, UnalignedFloats g, float lr) {
  for (size_t i = 0; i < g.size(); ++i) w[i] -= lr * g[i];
}

PS_VECTOR_KERNEL void MomentumStep(float* w, float* v, UnalignedFloats g,
                                   float lr, float mu, bool nesterov) {
  const size_t n = g.size();
  if (nesterov) {
    for (size_t i = 0; i < n; ++i) {
      const float gi = g[i];
      v[i] = mu * v[i] + gi;
      w[i] -= lr * (gi + mu * v[i]);
    }
  } else {
    for (size_t i = 0; i < n; ++i) {
      v[i] = mu * v[i] + g[i];
      w[i] -= lr * v[i];
    }
  }
}

PS_VECTOR_KERNEL void AdagradStep(float* w, float* s, UnalignedFloats g,
                                  float lr, float eps) {
  for (size_t i = 0; i < g.size(); ++i) {
    const float gi = g[i];
    s[i] += gi * gi;
    w[i] -= lr * gi / (std::sqrt(s[i]) + eps);
  }
}

// Adam's update of keys [begin, end), which share `step` and its
// corrections c1 and c2.
struct AdamArgs {
  float lr, b1, b2, eps, step, c1, c2;
};
PS_VECTOR_KERNEL void AdamStep(float* w, float* m, float* v, float* t,
                               UnalignedFloats g, size_t begin, size_t end,
                               AdamArgs a) {
  for (size_t i = begin; i < end; ++i) {
    const float gi = g[i];
    m[i] = a.b1 * m[i] + (1 - a.b1) * gi;
    v[i] = a.b2 * v[i] + (1 - a.b2) * gi * gi;
    t[i] = a.step;
    w[i] -= a.lr * (m[i] * a.c1) / (std::sqrt(v[i] * a.c2) + a.eps);
  }
}

// Per-key state of `arrays` kinds, one array each.
class StatefulUpdater : public Updater {
 public:
  StatefulUpdater(int arrays, uint64_t num_keys, float fill = 0.0f)
      : arrays_(arrays, std::vector<float>(num_keys, fill)) {}

  std::vector<absl::Span<float>> state() override {
    std::vector<absl::Span<float>> out;
    for (std::vector<float>& a : arrays_) out.emplace_back(a);
    return out;
  }

 protected:
  float* array(int i, uint64_t offset) { return &arrays_[i][offset]; }

 private:
  std::vector<std::vector<float>> arrays_;
};

// v = mu * v + g; w -= lr * v, or w -= lr * (g + mu * v) with Nesterov.
class MomentumUpdater final : public StatefulUpdater {
 public:
  MomentumUpdater(float lr, float momentum, bool nesterov, uint64_t num_keys)
      : StatefulUpdater(1, num_keys),
        lr_(lr),
        momentum_(momentum),
        nesterov_(nesterov) {}

  void Apply(uint64_t offset, float* w, UnalignedFloats g,
             float lr_scale) override {
    MomentumStep(w, array(0, offset), g, lr_ * lr_scale, momentum_, nesterov_);
  }

 private:
  const float lr_, momentum_;
  const bool nesterov_;
};

// s += g^2; w -= lr * g / (sqrt(s) + eps)
class AdagradUpdater final : public StatefulUpdater {
 public:
  AdagradUpdater(float lr, float epsilon, float initial, uint64_t num_keys)
      : StatefulUpdater(1, num_keys, initial), lr_(lr), epsilon_(epsilon) {}

  void Apply(uint64_t offset, float* w, UnalignedFloats g,
             float lr_scale) override {
    AdagradStep(w, array(0, offset), g, lr_ * lr_scale, epsilon_);
  }

 private:
  const float lr_, epsilon_;
};

// Adam (Kingma & Ba), with the bias corrections of each key computed from
// the number of updates that key has had (its `t`, kept as a float: exact up
// to 2^24 updates, long after the corrections have reached 1).
class AdamUpdater final : public StatefulUpdater {
 public:
  AdamUpdater(float lr, float beta1, float beta2, float epsilon,
              uint64_t num_keys)
      : StatefulUpdater(3, num_keys),
        lr_(lr),
        beta1_(beta1),
        beta2_(beta2),
        epsilon_(epsilon) {}

  void Apply(uint64_t offset, float* w, UnalignedFloats g,
             float lr_scale) override {
    const float lr = lr_ * lr_scale;
    float* m = array(0, offset);
    float* v = array(1, offset);
    float* t = array(2, offset);
    const size_t n = g.size();
    if (n == 0) return;
    // Pushes cover whole ranges, so the keys of a run almost always share
    // their t: then the corrections are computed once, not once per key.
    const float t0 = t[0];
    int differ = 0;  // an OR-reduction, which vectorises
    for (size_t i = 0; i < n; ++i) differ |= t[i] != t0;
    if (differ == 0) {
      const float step = t0 + 1;
      const float c1 = Correction(beta1_, step), c2 = Correction(beta2_, step);
      Update(w, m, v, t, g, 0, n, lr, step, c1, c2);
    } else {
      for (size_t i = 0; i < n; ++i) {
        const float step = t[i] + 1;
        Update(w, m, v, t, g, i, i + 1, lr, step, Correction(beta1_, step),
               Correction(beta2_, step));
      }
    }
  }

 private:
  // 1 / (1 - beta^step)
  static float Correction(float beta, float step) {
    return static_cast<float>(
        1.0 / (1.0 - std::pow(static_cast<double>(beta), step)));
  }

  void Update(float* w, float* m, float* v, float* t, UnalignedFloats g,
              size_t begin, size_t end, float lr, float step, float c1,
              float c2) const {
    AdamStep(w, m, v, t, g, begin, end,
             {lr, beta1_, beta2_, epsilon_, step, c1, c2});
  }

  const float lr_, beta1_, beta2_, epsilon_;
};

}  // namespace

void SgdUpdater::Apply(uint64_t offset, float* weights, UnalignedFloats grad,
                       float lr_scale) {
  SgdStep(weights, grad, learning_rate_ * lr_scale);
}

int OptimizerStateArrays(const shardps::OptimizerConfig& config) {
  if (config.name() == "momentum" || config.name() == "adagrad") return 1;
  if (config.name() == "adam") return 3;
  return 0;
}

absl::StatusOr<std::unique_ptr<Updater>> MakeUpdater(
    const shardps::OptimizerConfig& c, uint64_t num_keys) {
  if (absl::Status s = ValidateOptimizer(c); !s.ok()) return s;
  const float lr = c.learning_rate();
  if (c.name() == "momentum") {
    return std::make_unique<MomentumUpdater>(lr, c.momentum(), c.nesterov(),
                                             num_keys);
  }
  if (c.name() == "adagrad") {
    return std::make_unique<AdagradUpdater>(lr, c.epsilon(),
                                            c.initial_accumulator(), num_keys);
  }
  if (c.name() == "adam") {
    return std::make_unique<AdamUpdater>(lr, c.beta1(), c.beta2(), c.epsilon(),
                                         num_keys);
  }
  return std::make_unique<SgdUpdater>(lr);
}

}  // namespace ps
