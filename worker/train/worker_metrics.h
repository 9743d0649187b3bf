// WorkerMetrics is what a training worker reports to Prometheus
// (ps/obs/metrics_endpoint.h; its client's calls are
// ps/client/client_metrics.h):
//
//   shardps_worker_steps_total, shardps_worker_samples_total
//   shardps_worker_epoch                  the epoch being trained
//   shardps_worker_loss                   the last step's training loss
//   shardps_worker_step_seconds{phase}    a histogram per phase of a step:
//                                         wait_for_data, pull, compute, push
//   shardps_loader_queue_depth            batches read ahead of the trainer
//                                         when it took its last one
//   shardps_loader_stall_seconds_total    time the trainer waited for data
//   shardps_loader_read_seconds           a histogram of the loader's reads
//                                         (a part of a batch, or a shard)
//
// Thread-safety: all methods may be called concurrently.
#ifndef SHARDPS_WORKER_TRAIN_WORKER_METRICS_H_
#define SHARDPS_WORKER_TRAIN_WORKER_METRICS_H_

#include <cstddef>

#include "absl/time/time.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace worker {

struct StepTimes {
  absl::Duration wait_for_data;
  absl::Duration pull;
  absl::Duration compute;
  absl::Duration push;
};

class WorkerMetrics {
 public:
  // Registers the families in `registry`, which must outlive this.
  explicit WorkerMetrics(prometheus::Registry& registry);
  WorkerMetrics(const WorkerMetrics&) = delete;
  WorkerMetrics& operator=(const WorkerMetrics&) = delete;

  void RecordStep(int epoch, int samples, float loss, const StepTimes& times,
                  size_t queue_depth);
  void RecordRead(absl::Duration read);

 private:
  prometheus::Counter& steps_;
  prometheus::Counter& samples_;
  prometheus::Gauge& epoch_;
  prometheus::Gauge& loss_;
  prometheus::Family<prometheus::Histogram>& phases_;
  prometheus::Histogram& wait_for_data_;
  prometheus::Histogram& pull_;
  prometheus::Histogram& compute_;
  prometheus::Histogram& push_;
  prometheus::Gauge& queue_depth_;
  prometheus::Counter& stall_seconds_;
  prometheus::Histogram& read_seconds_;
};

}  // namespace worker

#endif  // SHARDPS_WORKER_TRAIN_WORKER_METRICS_H_
