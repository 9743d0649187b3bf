// shardps-server: one parameter-server shard (ps/server/serve.h). Runs until
// SIGTERM, SIGINT or SIGHUP, then stops accepting calls, lets in-flight ones
// finish, writes a last checkpoint (with --checkpoint_dir) and exits 0.
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "ps/base/program.h"
#include "ps/server/serve.h"
#include "ps/wire/security_flags.h"

ABSL_FLAG(std::string, host, "0.0.0.0", "Address to listen on.");
ABSL_FLAG(int, port, 0, "Port to listen on; 0 picks any free port.");
ABSL_FLAG(std::string, port_file, "",
          "If set, write the port actually bound to this file once serving "
          "(written whole, then renamed into place).");
ABSL_FLAG(std::string, job, "default",
          "Job id; requests carrying another job id are refused.");
ABSL_FLAG(int, max_message_mb, 256,
          "Largest gRPC message accepted or sent, in MiB; the workers' "
          "chunk size must fit.");
ABSL_FLAG(bool, shared_memory, true,
          "Let clients on this host send and receive float32 values through "
          "shared memory (/dev/shm) instead of TCP.");
ABSL_FLAG(bool, allow_insecure, false,
          "Serve a non-loopback --host with neither TLS nor a token (only on "
          "a network where everyone who can reach the port may read and "
          "change the model).");
ABSL_FLAG(int, max_tables, 64,
          "Tables this server holds at most (RESOURCE_EXHAUSTED beyond).");
ABSL_FLAG(int64_t, max_memory_mb, 16384,
          "Memory of all tables' values and optimizer state, MiB "
          "(RESOURCE_EXHAUSTED beyond).");
ABSL_FLAG(int, max_workers, 4096,
          "Distinct worker ids an async table takes pushes from "
          "(RESOURCE_EXHAUSTED beyond; sync and ssp tables take their "
          "num_workers).");
ABSL_FLAG(int, max_concurrent_streams, 0,
          "Calls in flight per client connection; 0: gRPC's default.");
ABSL_FLAG(std::string, checkpoint_dir, "",
          "This server's own checkpoint directory: the latest checkpoint in "
          "it is restored at start, a new one is written every "
          "--checkpoint_every seconds and on SIGTERM/SIGINT. Empty: no "
          "checkpoints (a restarted server starts empty).");
ABSL_FLAG(double, checkpoint_every, 30,
          "Seconds between checkpoints (with --checkpoint_dir); 0: only on "
          "SIGTERM/SIGINT. A killed server loses at most the pushes since "
          "its last checkpoint.");
ABSL_FLAG(double, inject_reply_drops, 0,
          "FAULT INJECTION for tests: this fraction of pulls and pushes is "
          "carried out but answered UNAVAILABLE, as if the reply were lost. "
          "Never set in a real job.");
ABSL_FLAG(std::string, trace, "",
          "Write a Chrome trace (Perfetto, chrome://tracing) of request "
          "handling to this file, rewritten every 10 s and at exit.");
ABSL_FLAG(std::string, trace_name, "shardps-server",
          "The process's name in the --trace file.");
ABSL_FLAG(int, metrics_port, -1,
          "Serve Prometheus metrics (requests, bytes and latency per method, "
          "applied updates, per-worker clock lag) at "
          "http://HOST:PORT/metrics on --host; 0 picks any free port; -1: "
          "no metrics endpoint.");
ABSL_FLAG(std::string, etcd, "",
          "http://host:port of the job's etcd: this server is replica "
          "--replica of shard --shard, with the others of that shard in "
          "etcd (straggler policy drop is refused). Empty: not replicated.");
ABSL_FLAG(int, shard, 0, "With --etcd: the shard this server replicates.");
ABSL_FLAG(int, replica, 0,
          "With --etcd: this server's replica number within its shard.");
ABSL_FLAG(std::string, replication_token_file, "",
          "With --etcd: a file holding the replicas' own secret, which "
          "forwarded calls and catch-ups must carry (give it to servers "
          "only, not workers). Empty: the job's token (--auth_token_file) "
          "is all a forward needs, so any job member could pose as a "
          "primary to a backup.");
ABSL_FLAG(std::string, advertise_host, "",
          "With --etcd: the host peers and clients reach this server at "
          "(empty: --host, which must then not be 0.0.0.0).");
ABSL_FLAG(double, shutdown_grace_s, 5,
          "Seconds in-flight calls get to finish on SIGTERM/SIGINT/SIGHUP.");

namespace {

absl::Status OutOfRange(absl::string_view flag, double value,
                        absl::string_view range) {
  return absl::InvalidArgumentError(
      absl::StrCat("--", flag, "=", value, " is not in ", range));
}

// Addresses, message size, limits and security.
absl::Status ReadServingFlags(ps::ServerOptions* o) {
  o->host = absl::GetFlag(FLAGS_host);
  o->port = absl::GetFlag(FLAGS_port);
  o->job = absl::GetFlag(FLAGS_job);
  o->metrics_port = absl::GetFlag(FLAGS_metrics_port);
  const int max_mb = absl::GetFlag(FLAGS_max_message_mb);
  if (o->port < 0 || o->port > 65535) {
    return OutOfRange("port", o->port, "0..65535");
  }
  if (o->metrics_port < -1 || o->metrics_port > 65535) {
    return OutOfRange("metrics_port", o->metrics_port, "-1..65535");
  }
  if (max_mb < 1 || max_mb > 1024) {
    return OutOfRange("max_message_mb", max_mb, "1..1024");
  }
  o->max_message_bytes = max_mb << 20;
  absl::StatusOr<ps::Security> security = ps::SecurityFromFlags();
  if (!security.ok()) return security.status();
  o->tls = security->tls;
  o->auth_token = security->auth_token;
  return ps::CheckExposure(o->host, o->tls, !o->auth_token.empty(),
                           absl::GetFlag(FLAGS_allow_insecure));
}

// Tables' limits, checkpoints and fault injection.
absl::Status ReadStateFlags(ps::ServerOptions* o) {
  if (absl::GetFlag(FLAGS_max_tables) < 1 ||
      absl::GetFlag(FLAGS_max_memory_mb) < 1 ||
      absl::GetFlag(FLAGS_max_workers) < 1 ||
      absl::GetFlag(FLAGS_max_concurrent_streams) < 0) {
    return absl::InvalidArgumentError(
        "--max_tables, --max_memory_mb and --max_workers must be >= 1, "
        "--max_concurrent_streams >= 0");
  }
  o->limits.max_tables = absl::GetFlag(FLAGS_max_tables);
  o->limits.max_workers = absl::GetFlag(FLAGS_max_workers);
  o->limits.max_bytes =
      static_cast<uint64_t>(absl::GetFlag(FLAGS_max_memory_mb)) << 20;
  o->max_concurrent_streams = absl::GetFlag(FLAGS_max_concurrent_streams);
  const double every = absl::GetFlag(FLAGS_checkpoint_every);
  const double drops = absl::GetFlag(FLAGS_inject_reply_drops);
  if (!(every >= 0)) return OutOfRange("checkpoint_every", every, "[0, inf)");
  if (!(drops >= 0 && drops <= 1)) {
    return OutOfRange("inject_reply_drops", drops, "[0, 1]");
  }
  o->checkpoint.dir = absl::GetFlag(FLAGS_checkpoint_dir);
  o->checkpoint.every = absl::Seconds(every);
  o->drop_reply_fraction = drops;
  o->shared_memory = absl::GetFlag(FLAGS_shared_memory);
  return absl::OkStatus();
}

// --etcd and where this replica sits.
absl::Status ReadReplicationFlags(ps::ServerOptions* o) {
  o->replication.etcd = absl::GetFlag(FLAGS_etcd);
  o->advertise_host = absl::GetFlag(FLAGS_advertise_host);
  const int shard = absl::GetFlag(FLAGS_shard);
  const int replica = absl::GetFlag(FLAGS_replica);
  if (shard < 0 || replica < 0) {
    return absl::InvalidArgumentError("--shard and --replica must be >= 0");
  }
  o->replication.shard = shard;
  o->replication.replica = replica;
  const std::string token_file = absl::GetFlag(FLAGS_replication_token_file);
  if (!token_file.empty() && o->replication.etcd.empty()) {
    return absl::InvalidArgumentError(
        "--replication_token_file is for replicated servers (--etcd)");
  }
  absl::StatusOr<std::string> token = ps::ReadTokenFile(token_file);
  if (!token.ok()) {
    return absl::Status(
        token.status().code(),
        absl::StrCat("--replication_token_file: ", token.status().message()));
  }
  o->replication.token = *std::move(token);
  if (!o->replication.etcd.empty() && o->advertise_host.empty() &&
      (o->host == "0.0.0.0" || o->host == "::")) {
    return absl::InvalidArgumentError(
        "--etcd with --host=" + o->host +
        " needs --advertise_host: the address peers and clients reach");
  }
  return absl::OkStatus();
}

absl::StatusOr<ps::ServeOptions> ServeOptionsFromFlags() {
  ps::ServeOptions o;
  if (absl::Status s = ReadServingFlags(&o.server); !s.ok()) return s;
  if (absl::Status s = ReadStateFlags(&o.server); !s.ok()) return s;
  if (absl::Status s = ReadReplicationFlags(&o.server); !s.ok()) return s;
  o.port_file = absl::GetFlag(FLAGS_port_file);
  o.shutdown_grace = absl::Seconds(absl::GetFlag(FLAGS_shutdown_grace_s));
  o.trace_path = absl::GetFlag(FLAGS_trace);
  o.trace_name = absl::GetFlag(FLAGS_trace_name);
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const ps::StopSignals stop;  // before gRPC starts any thread
  ps::GrpcRuntime grpc_runtime;
  ps::InitProgram(argc, argv,
                  "one key-range shard of the shardps parameter server.\n"
                  "  shardps-server --port=7070 --job=myjob");
  absl::StatusOr<ps::ServeOptions> options = ServeOptionsFromFlags();
  if (!options.ok()) {
    absl::FPrintF(stderr, "shardps-server: %s\n", options.status().ToString());
    return 2;
  }
  if (absl::Status s = ps::Serve(*std::move(options), stop); !s.ok()) {
    absl::FPrintF(stderr, "shardps-server: %s\n", s.ToString());
    return 1;
  }
  return 0;
}
