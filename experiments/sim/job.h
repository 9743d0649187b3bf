// The plain descriptions shardps-sim works from: the cluster (hosts and
// links, as the launcher and the emulated cluster take them), the job (the
// real training loop's settings) and the calibration (costs measured on
// real runs, experiments/scale.py). Nothing here is tuned per point.
//
// Thread-safety: plain values.
#ifndef SHARDPS_EXPERIMENTS_SIM_JOB_H_
#define SHARDPS_EXPERIMENTS_SIM_JOB_H_

#include <cstdint>
#include <string>
#include <vector>

namespace sim {

struct ClusterSpec {
  // Link capacities in bytes/s, each direction (shardps-launch
  // --server_link, --worker_link, --storage_link).
  double server_link = 12.5e6;
  double worker_link = 62.5e6;
  double storage_link = 50e6;
  double latency = 0;  // seconds, one way, between any two hosts
  // > 0: every process shares one machine of this many cores (the emulated
  // cluster); 0: each host has CPUs of its own (server_cores each for a
  // server, worker_cores for a worker's client work: its calls to the
  // shards run on up to that many cores at once).
  int shared_cores = 0;
  int server_cores = 8;
  int worker_cores = 1;
};

enum class Loader { kSequential, kParallel };
enum class Consistency { kAsync, kSync };
// --overlap: a step's pull, compute, push in turn, or each layer's
// exchange (a PushPull per layer) started as backward writes its gradient
// and awaited only where forward reaches the layer.
enum class Overlap { kNone, kLayer };

// One parameterised layer, in forward order (shardps-worker --bench=model
// measures these): its parameter bytes, and when in a step's compute
// forward first reads them and backward last writes its gradient, as
// fractions of compute_seconds.
struct LayerTiming {
  double bytes = 0;
  double forward_at = 0;
  double gradient_at = 1;
};

struct JobSpec {
  int workers = 1;
  int servers = 1;
  Loader loader = Loader::kParallel;
  Consistency consistency = Consistency::kAsync;
  Overlap overlap = Overlap::kNone;
  std::vector<LayerTiming> layers;  // with kLayer: their bytes add up to
                                    // param_bytes
  double param_bytes = 0;  // float32 parameters, pulled and pushed a step
  double pull_ratio = 1;   // wire bytes per parameter byte (compression)
  double push_ratio = 1;
  double dataset_bytes = 0;  // the training set every worker reads
  double sample_bytes = 0;   // one record
  // The sequential loader's reads, one after another (its kBlockBytes),
  // simulated as at most 64 blocks a reader: a lone reader's gaps add up
  // the same, and 1,024 readers of ImageNet in 4 MiB blocks would be 34
  // million transfers.
  double read_block_bytes = 4 << 20;
  int batch = 16;
  int steps = 20;                // per worker
  double compute_seconds = 0.1;  // forward/backward per step
  double chunk_bytes = 1 << 20;  // largest payload of one call
  int prefetch_batches = 8;      // parallel loader's ring
  // Every shard as a host of its own. Otherwise (only without shared
  // cores) the S servers are one host with S times a server's link and
  // cores, and each worker's S calls one call of S shards' bytes: under
  // key-range sharding the shards are equal and every worker calls all of
  // them at once, so each server sees the same flows at the same times and
  // the max-min shares are the same; it is what makes N = 1024 fast.
  bool every_shard = false;
  // Asynchronous workers do not step in unison, nor evenly spread: where
  // each real one is in its step when another starts one follows from
  // start-ups no one times. Each worker starts its first step a random
  // part (uniform, of `seed`) of this after its first batch; Simulate
  // sets it to one uncontended step.
  double phase_spread_seconds = 0;
  uint64_t seed = 1;  // of the transfers' variation and the start phases
};

struct Calibration {
  // From process start to data: `startup_wait` seconds of round trips (to
  // storage and servers; no CPU), then `startup_cpu` +
  // `startup_cpu_per_server` x S seconds of work on each of
  // `startup_threads` threads (a lone worker's start-up keeps that many
  // cores busy, so start-ups sharing a machine's cores slow each other).
  double startup_wait = 0;
  double startup_cpu = 0;
  double startup_cpu_per_server = 0;
  double startup_threads = 1;
  // On one shared machine (shared_cores) the launcher starts the workers
  // one after another, each start (fork, exec, entering the worker's
  // network namespace) `launch_cpu` seconds of one core's work on that
  // machine before the worker's process begins: the later workers start
  // later, the more so the busier the cores. Hosts of their own start
  // their workers at once.
  double launch_cpu = 0;
  double storage_efficiency = 1;  // goodput / nominal of the storage link
  // CPU seconds per byte the sequential loader spends on each block it
  // reads (checking and decoding it, one thread) before it asks for the
  // next: a lone reader's link idles meanwhile, readers sharing the link
  // fill each other's gaps.
  double read_cpu_per_byte = 0;
  // The same for a pull's and for a push's bytes (they cross the links'
  // shapers in opposite directions, and are measured apart).
  double pull_efficiency = 1;
  double push_efficiency = 1;
  // What every pull (push) takes beyond its bytes and CPU, seconds: the
  // round trips of its calls and what else a transfer of no bytes would
  // cost (fitted with the efficiencies).
  double pull_delay = 0;
  double push_delay = 0;
  double call_cpu = 0;             // CPU seconds per call, each side
  double client_cpu_per_byte = 0;  // encode/decode, a worker
  double server_cpu_per_byte = 0;  // apply/read, a server
  // The CPU the bytes cost on their way (the kernels' packet work; on the
  // emulated cluster also its veths, bridge and shapers), per byte: spent
  // while they flow, half at each end.
  double wire_cpu_per_byte = 0;
  // How much a transfer varies once others share its links (standard
  // deviation over mean; experiments/scale.py fits it on one server's
  // runs): each shard's part of a pull or push that starts while another
  // crosses its server's link in the same direction varies so, on its
  // own; one that starts alone takes its time exactly (a lone worker's
  // vary 1-5%, so workers that never meet stay apart, as real ones do).
  double transfer_cv = 0;
  // Push bytes one connection has queued on a server's link at most (its
  // TCP window): a pull's request waits behind them, as the links' queues
  // are one FIFO for requests and bulk data. 0: requests never wait.
  double queued_push_bytes = 0;
};

struct SimResult {
  double init_seconds = 0;  // the slowest worker's, as the launcher reports
  // Samples whose step ended inside [latest first step end, earliest last
  // step end], over that window (the launcher's steady rate).
  double samples_per_second = 0;
  // The same over the first and the second half of the window: steady
  // when they differ by < 2%.
  double first_half = 0;
  double second_half = 0;
  double simulated_seconds = 0;
  // A pull's and a push's mean time, over every step (as the sweep's
  // pull_ms and push_ms).
  double pull_seconds = 0;
  double push_seconds = 0;
  std::vector<std::vector<double>> step_ends;  // per worker
};

}  // namespace sim

#endif  // SHARDPS_EXPERIMENTS_SIM_JOB_H_
