// LayerExchange overlaps a worker's communication with its computation
// (--overlap=layer; wait-free backpropagation as in Poseidon): as backward
// produces each layer's gradient, a thread of that layer sends it with
// Client::PushPull, whose reply writes the layer's fresh parameters in
// place; the next step's forward waits for a layer's reply only when it
// reaches that layer. Each layer has its own thread, so the first layer's
// exchange (sent last, needed first) never queues behind a larger one in
// this process.
//
// A failed exchange is kept: later gradients are not sent, the next wait
// returns at once, and status() says what failed, so the caller stops
// before a step runs on parameters that did not arrive. Each layer's push
// is its own call: a NaN in one layer's gradient is refused whole, but the
// layers sent before it in the same step were applied.
//
// Thread-safety: BeginStep, the LayerObserver calls, Drain, TakeWaited and
// status are for the training thread; a layer's thread touches only its
// layer's ranges of the buffers, and only between AfterBackward and the
// next wait for that layer.
#ifndef SHARDPS_WORKER_TRAIN_LAYER_EXCHANGE_H_
#define SHARDPS_WORKER_TRAIN_LAYER_EXCHANGE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "model/network.h"
#include "ps/client/client.h"
#include "ps/obs/trace.h"

namespace worker {

class LayerExchange final : public model::LayerObserver {
 public:
  // Exchanges `net`'s layers of `table` between params and grad (the whole
  // flat vectors, which must outlive this) through `client`. Spans
  // ("exchange" per layer, "wait_params" per wait) go to `tracer` (null:
  // none).
  LayerExchange(ps::Client& client, std::string table,
                const model::Network& net, float* params, const float* grad,
                ps::Tracer* tracer);
  LayerExchange(const LayerExchange&) = delete;
  LayerExchange& operator=(const LayerExchange&) = delete;
  // Waits for the exchanges in flight, then stops the threads.
  ~LayerExchange() override;

  // The step about to run: the clock and learning-rate scale its pushes
  // carry.
  void BeginStep(uint64_t clock, float lr_scale);
  void BeforeForward(int layer) override;
  void AfterBackward(int layer) override;

  // Waits for every exchange in flight; status().
  absl::Status Drain();
  // The first exchange that failed, if any.
  absl::Status status();
  // How long BeforeForward waited since the last call.
  absl::Duration TakeWaited();

 private:
  struct Slot {
    uint64_t begin = 0, end = 0;  // the layer's keys
    int layer = 0;
    bool queued = false;   // a gradient waits for the thread
    bool running = false;  // the thread is exchanging it
    uint64_t clock = 0;
    float lr_scale = 1.0f;
  };
  void Run(size_t slot);
  bool Idle(size_t slot) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  ps::Client& client_;
  const std::string table_;
  float* const params_;
  const float* const grad_;
  ps::Tracer* const tracer_;
  std::vector<int> slot_of_layer_;  // -1 for a layer without parameters
  absl::Mutex mu_;
  std::vector<Slot> slots_ ABSL_GUARDED_BY(mu_);
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t clock_ = 0;
  float lr_scale_ = 1.0f;
  absl::Duration waited_;
  std::vector<std::thread> threads_;
};

}  // namespace worker

#endif  // SHARDPS_WORKER_TRAIN_LAYER_EXCHANGE_H_
