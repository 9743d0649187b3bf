#include "worker/train/layer_exchange.h"

#include <utility>

namespace worker {

LayerExchange::LayerExchange(ps::Client& client, std::string table,
                             const model::Network& net, float* params,
                             const float* grad, ps::Tracer* tracer)
    : client_(client),
      table_(std::move(table)),
      params_(params),
      grad_(grad),
      tracer_(tracer),
      slot_of_layer_(net.num_layers(), -1) {
  {
    absl::MutexLock lock(&mu_);
    for (int l = 0; l < net.num_layers(); ++l) {
      const model::Layer& layer = net.layer(l);
      if (!layer.has_params()) continue;
      slot_of_layer_[l] = static_cast<int>(slots_.size());
      Slot slot;
      slot.begin = layer.params_begin();
      slot.end = layer.params_end();
      slot.layer = l;
      slots_.push_back(slot);
    }
  }
  for (size_t s = 0; s < slot_of_layer_.size(); ++s) {
    if (slot_of_layer_[s] >= 0) {
      threads_.emplace_back(&LayerExchange::Run, this,
                            static_cast<size_t>(slot_of_layer_[s]));
    }
  }
}

LayerExchange::~LayerExchange() {
  Drain().IgnoreError();  // the caller has its outcome from status()
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& t : threads_) t.join();
}

bool LayerExchange::Idle(size_t slot) const {
  return !slots_[slot].queued && !slots_[slot].running;
}

void LayerExchange::BeginStep(uint64_t clock, float lr_scale) {
  clock_ = clock;
  lr_scale_ = lr_scale;
}

void LayerExchange::BeforeForward(int layer) {
  const size_t slot = slot_of_layer_[layer];
  const absl::Time start = absl::Now();
  absl::MutexLock lock(&mu_);
  if (Idle(slot)) return;
  auto done = [this, slot]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return Idle(slot) || !error_.ok();
  };
  mu_.Await(absl::Condition(&done));
  const absl::Time end = absl::Now();
  waited_ += end - start;
  if (tracer_ != nullptr) {
    tracer_->Record("wait_params", "worker", start, end, "layer", layer);
  }
}

void LayerExchange::AfterBackward(int layer) {
  const size_t slot = slot_of_layer_[layer];
  absl::MutexLock lock(&mu_);
  if (!error_.ok()) return;  // nothing more is sent after a failure
  Slot& s = slots_[slot];
  s.queued = true;
  s.clock = clock_;
  s.lr_scale = lr_scale_;
}

void LayerExchange::Run(size_t slot) {
  absl::MutexLock lock(&mu_);
  while (true) {
    auto ready = [this, slot]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return slots_[slot].queued || stopping_;
    };
    mu_.Await(absl::Condition(&ready));
    if (!slots_[slot].queued) return;  // stopping, nothing left
    if (!error_.ok()) {  // another layer failed: this one is not sent
      slots_[slot].queued = false;
      continue;
    }
    Slot s = slots_[slot];
    slots_[slot].queued = false;
    slots_[slot].running = true;
    mu_.Unlock();
    const absl::Time start = absl::Now();
    absl::Status status =
        client_.PushPull(table_, s.begin, s.end, grad_ + s.begin,
                         params_ + s.begin, s.clock, s.lr_scale);
    if (tracer_ != nullptr) {
      tracer_->Record("exchange", "worker", start, absl::Now(), "layer",
                      s.layer);
    }
    mu_.Lock();
    slots_[slot].running = false;
    if (!status.ok() && error_.ok()) error_ = std::move(status);
  }
}

absl::Status LayerExchange::Drain() {
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (size_t s = 0; s < slots_.size(); ++s) {
      if (!Idle(s)) return false;
    }
    return true;
  };
  mu_.Await(absl::Condition(&idle));
  return error_;
}

absl::Status LayerExchange::status() {
  absl::MutexLock lock(&mu_);
  return error_;
}

absl::Duration LayerExchange::TakeWaited() {
  return std::exchange(waited_, absl::ZeroDuration());
}

}  // namespace worker
