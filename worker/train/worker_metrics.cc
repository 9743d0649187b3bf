#include "worker/train/worker_metrics.h"

#include "ps/obs/metrics_endpoint.h"

namespace worker {
namespace {

double Seconds(absl::Duration d) { return absl::ToDoubleSeconds(d); }

}  // namespace

WorkerMetrics::WorkerMetrics(prometheus::Registry& registry)
    : steps_(prometheus::BuildCounter()
                 .Name("shardps_worker_steps_total")
                 .Help("Training steps done by this process.")
                 .Register(registry)
                 .Add({})),
      samples_(prometheus::BuildCounter()
                   .Name("shardps_worker_samples_total")
                   .Help("Samples trained on by this process.")
                   .Register(registry)
                   .Add({})),
      epoch_(prometheus::BuildGauge()
                 .Name("shardps_worker_epoch")
                 .Help("The epoch being trained.")
                 .Register(registry)
                 .Add({})),
      loss_(prometheus::BuildGauge()
                .Name("shardps_worker_loss")
                .Help("Training loss of the last step.")
                .Register(registry)
                .Add({})),
      phases_(prometheus::BuildHistogram()
                  .Name("shardps_worker_step_seconds")
                  .Help("Time of each phase of a training step.")
                  .Register(registry)),
      wait_for_data_(
          phases_.Add({{"phase", "wait_for_data"}}, ps::LatencyBuckets())),
      pull_(phases_.Add({{"phase", "pull"}}, ps::LatencyBuckets())),
      compute_(phases_.Add({{"phase", "compute"}}, ps::LatencyBuckets())),
      push_(phases_.Add({{"phase", "push"}}, ps::LatencyBuckets())),
      queue_depth_(prometheus::BuildGauge()
                       .Name("shardps_loader_queue_depth")
                       .Help("Batches read ahead of the trainer when it took "
                             "its last one.")
                       .Register(registry)
                       .Add({})),
      stall_seconds_(prometheus::BuildCounter()
                         .Name("shardps_loader_stall_seconds_total")
                         .Help("Time the trainer waited for the loader.")
                         .Register(registry)
                         .Add({})),
      read_seconds_(prometheus::BuildHistogram()
                        .Name("shardps_loader_read_seconds")
                        .Help("Time of each of the loader's reads (a part of "
                              "a batch, or a whole shard).")
                        .Register(registry)
                        .Add({}, ps::LatencyBuckets())) {}

void WorkerMetrics::RecordStep(int epoch, int samples, float loss,
                               const StepTimes& times, size_t queue_depth) {
  steps_.Increment();
  samples_.Increment(samples);
  epoch_.Set(epoch);
  loss_.Set(loss);
  wait_for_data_.Observe(Seconds(times.wait_for_data));
  pull_.Observe(Seconds(times.pull));
  compute_.Observe(Seconds(times.compute));
  push_.Observe(Seconds(times.push));
  queue_depth_.Set(static_cast<double>(queue_depth));
  stall_seconds_.Increment(Seconds(times.wait_for_data));
}

void WorkerMetrics::RecordRead(absl::Duration read) {
  read_seconds_.Observe(Seconds(read));
}

}  // namespace worker
