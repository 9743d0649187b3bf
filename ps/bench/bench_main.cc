// shardps-bench: push and pull throughput and latency of the parameter
// servers (ps/bench/bench.h).
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ps/base/program.h"
#include "ps/bench/bench.h"
#include "ps/client/server_addrs.h"
#include "ps/wire/row_partition.h"
#include "ps/wire/security_flags.h"
#include "ps/wire/value_codec.h"

ABSL_FLAG(int, spawn_servers, 0,
          "Start this many shardps-server processes on loopback and bench "
          "them; 0 uses --server_addrs instead.");
ABSL_FLAG(int, replicas, 1,
          "With --spawn_servers: replicas per shard (> 1 starts an etcd "
          "and replicated servers, which forward every push).");
ABSL_FLAG(std::string, server_addrs, "",
          "Servers to bench, host:port,... or a pattern with {i} plus "
          "--num_servers.");
ABSL_FLAG(int, num_servers, 0,
          "Server count for a {i} --server_addrs; shards with --etcd.");
ABSL_FLAG(std::string, etcd, "",
          "Bench a replicated job started elsewhere: its etcd "
          "(http://host:port), whose layout names the --num_servers shards' "
          "primaries, instead of --server_addrs.");
ABSL_FLAG(int, workers, 1, "Client threads, each with its own ps::Client.");
ABSL_FLAG(int64_t, params, 1000000, "Table size in float32 parameters.");
ABSL_FLAG(double, seconds, 5, "Seconds of pushing, then of pulling.");
ABSL_FLAG(bool, json, false, "Print one JSON line per run.");
ABSL_FLAG(std::string, job, "bench", "Job id (spawned servers get it too).");
ABSL_FLAG(int, chunk_kb, 0,
          "Client chunk size in KiB; 0: 1024, and pushes 256 with --etcd or "
          "--replicas > 1.");
ABSL_FLAG(int, channels_per_server, 2, "TCP connections per server.");
ABSL_FLAG(int, inflight, 4, "Chunk calls in flight per server.");
ABSL_FLAG(bool, shared_memory, true,
          "Float32 values to and from servers on this host go through shared "
          "memory; false: always TCP (to measure the wire).");
ABSL_FLAG(std::string, compression, "none",
          "Values on the wire: none, fp16, bf16 (pulls and pushes) or onebit "
          "(pushes; pulls float32).");
ABSL_FLAG(std::string, mode, "dense",
          "dense: push and pull a dense table of --params floats; sparse: "
          "pull and push rows of a sparse table by id (the --dim, --ids_* "
          "--zipf and --row_sharding flags).");
ABSL_FLAG(int, dim, 16, "--mode=sparse: floats per row.");
ABSL_FLAG(int64_t, ids_per_call, 100000,
          "--mode=sparse: ids in each PullRows / PushRows call.");
ABSL_FLAG(int64_t, id_space, 10000000,
          "--mode=sparse: ids are drawn from [0, id_space).");
ABSL_FLAG(double, zipf, 1.1,
          "--mode=sparse: Zipf exponent (> 1) of the ids' popularity, id 0 "
          "the hottest; 0 draws ids uniformly.");
ABSL_FLAG(std::string, row_sharding, "hash",
          "--mode=sparse: hash (XXH3 of the id) or range (id_space cut into "
          "equal ranges), how the table's rows are spread over servers.");

namespace {

absl::Status SparseOptionsFromFlags(ps::SparseBenchOptions* o) {
  const std::string mode = absl::GetFlag(FLAGS_mode);
  if (mode != "dense" && mode != "sparse") {
    return absl::InvalidArgumentError(
        absl::StrCat("--mode must be dense or sparse, not '", mode, "'"));
  }
  o->enabled = mode == "sparse";
  const std::string sharding = absl::GetFlag(FLAGS_row_sharding);
  absl::StatusOr<shardps::RowSharding> parsed = ps::ParseRowSharding(sharding);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--row_sharding ", parsed.status().message()));
  }
  o->sharding = *parsed;
  if (absl::GetFlag(FLAGS_dim) < 1 || absl::GetFlag(FLAGS_ids_per_call) < 1 ||
      absl::GetFlag(FLAGS_id_space) < 2) {
    return absl::InvalidArgumentError(
        "--dim and --ids_per_call must be >= 1 and --id_space >= 2");
  }
  o->dim = static_cast<uint32_t>(absl::GetFlag(FLAGS_dim));
  o->ids_per_call = static_cast<uint64_t>(absl::GetFlag(FLAGS_ids_per_call));
  o->id_space = static_cast<uint64_t>(absl::GetFlag(FLAGS_id_space));
  o->zipf = absl::GetFlag(FLAGS_zipf);
  return absl::OkStatus();
}

absl::StatusOr<ps::BenchOptions> BenchOptionsFromFlags() {
  ps::BenchOptions o;
  o.spawn_servers = absl::GetFlag(FLAGS_spawn_servers);
  o.replicas = absl::GetFlag(FLAGS_replicas);
  o.workers = absl::GetFlag(FLAGS_workers);
  o.params =
      static_cast<uint64_t>(std::max<int64_t>(0, absl::GetFlag(FLAGS_params)));
  o.length = absl::Seconds(absl::GetFlag(FLAGS_seconds));
  o.json = absl::GetFlag(FLAGS_json);
  o.compression = absl::GetFlag(FLAGS_compression);
  if (absl::Status s = SparseOptionsFromFlags(&o.sparse); !s.ok()) return s;
  if (o.spawn_servers == 0 && !absl::GetFlag(FLAGS_etcd).empty()) {
    o.client.etcd = absl::GetFlag(FLAGS_etcd);
    o.client.num_shards = absl::GetFlag(FLAGS_num_servers);
    if (o.client.num_shards < 1) {
      return absl::InvalidArgumentError("--etcd needs --num_servers >= 1");
    }
  } else if (o.spawn_servers == 0) {
    absl::StatusOr<std::vector<std::string>> addrs = ps::ParseServerAddrs(
        absl::GetFlag(FLAGS_server_addrs), absl::GetFlag(FLAGS_num_servers));
    if (!addrs.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--server_addrs: ", addrs.status().message(),
                       " (or use --spawn_servers=S)"));
    }
    o.client.server_addrs = *std::move(addrs);
  }
  absl::StatusOr<ps::WireEncodings> encodings = ps::EncodingsFor(o.compression);
  if (!encodings.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--compression: ", encodings.status().message()));
  }
  absl::StatusOr<ps::Security> security = ps::SecurityFromFlags();
  if (!security.ok()) return security.status();
  o.client.tls = security->tls;
  o.client.auth_token = security->auth_token;
  o.client.pull_encoding = encodings->pull;
  o.client.push_encoding = encodings->push;
  o.client.job = absl::GetFlag(FLAGS_job);
  if (absl::GetFlag(FLAGS_chunk_kb) < 0) {
    return absl::InvalidArgumentError("--chunk_kb must be >= 0");
  }
  o.client.chunk_bytes = static_cast<size_t>(absl::GetFlag(FLAGS_chunk_kb))
                         << 10;
  o.client.channels_per_server = absl::GetFlag(FLAGS_channels_per_server);
  o.client.max_inflight_per_server = absl::GetFlag(FLAGS_inflight);
  o.client.shared_memory = absl::GetFlag(FLAGS_shared_memory);
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  ps::GrpcRuntime grpc_runtime;
  ps::InitProgram(
      argc, argv,
      "push/pull throughput of shardps servers.\n"
      "  shardps-bench --spawn_servers=2 --workers=2 --params=1000000 --json\n"
      "  shardps-bench --mode=sparse --spawn_servers=4 --dim=64 --zipf=1.1");
  absl::StatusOr<ps::BenchOptions> options = BenchOptionsFromFlags();
  absl::Status status =
      options.ok() ? ps::RunBench(*std::move(options)) : options.status();
  if (!status.ok()) {
    absl::FPrintF(stderr, "shardps-bench: %s\n", status.ToString());
    return 1;
  }
  return 0;
}
