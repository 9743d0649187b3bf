// What shardps-worker does once its flags are read: opens its trace and
// metrics endpoint, connects to the servers and waits until they serve,
// then trains (writing RUN_DIR/summary-RANK.json) or evaluates the model as
// the servers hold it (writing RUN_DIR/evaluation.json).
//
// Thread-safety: call from the main thread, once.
#ifndef SHARDPS_WORKER_TRAIN_WORKER_PROCESS_H_
#define SHARDPS_WORKER_TRAIN_WORKER_PROCESS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "ps/client/client.h"
#include "worker/train/trainer.h"

namespace worker {

struct WorkerOptions {
  // The servers, job, chunking, encodings, retries and security; `worker`
  // is the rank. tracer and metrics are set by RunWorker.
  ps::ClientOptions client;
  // What to train, on what, where to write; tracer and metrics are set by
  // RunWorker.
  TrainerOptions trainer;
  bool evaluate_only = false;  // evaluate, do not train
  std::string rank_source;     // where rank and world came from, for the log
  absl::Duration ready_timeout = absl::Seconds(60);
  int blas_threads = 1;
  // Prometheus metrics at http://metrics_host:metrics_port/metrics; -1:
  // none, 0: any free port.
  int metrics_port = -1;
  std::string metrics_host = "0.0.0.0";
  std::string trace_path;  // Chrome trace of the worker; empty: none
  std::string trace_name;  // the process's name in it
};

// `process_start` is when the process started (the summary's init time
// counts from it).
absl::Status RunWorker(WorkerOptions options, absl::Time process_start);

}  // namespace worker

#endif  // SHARDPS_WORKER_TRAIN_WORKER_PROCESS_H_
