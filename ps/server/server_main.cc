// shardps-server: one parameter-server shard. Runs until SIGTERM or SIGINT,
// then stops accepting calls, lets in-flight ones finish, writes a last
// checkpoint (with --checkpoint_dir) and exits 0.
#include <csignal>
#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "ps/base/port_file.h"
#include "ps/base/program.h"
#include "ps/server/server.h"
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
ABSL_FLAG(bool, allow_insecure, false,
          "Serve a non-loopback --host with neither TLS nor a token (only on "
          "a network where everyone who can reach the port may read and "
          "change the model).");
ABSL_FLAG(int, max_tables, 64,
          "Tables this server holds at most (RESOURCE_EXHAUSTED beyond).");
ABSL_FLAG(int64_t, max_memory_mb, 16384,
          "Memory of all tables' values and optimizer state, MiB "
          "(RESOURCE_EXHAUSTED beyond).");
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
ABSL_FLAG(double, shutdown_grace_s, 5,
          "Seconds in-flight calls get to finish on SIGTERM/SIGINT.");

int main(int argc, char** argv) {
  // Block the stop signals in every thread so that this one alone receives
  // them, through sigwait below. Threads inherit the mask, so this comes
  // before gRPC starts any.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  ps::GrpcRuntime grpc_runtime;
  ps::InitProgram(argc, argv,
                  "one key-range shard of the shardps parameter server.\n"
                  "  shardps-server --port=7070 --job=myjob");

  const int port = absl::GetFlag(FLAGS_port);
  const int max_mb = absl::GetFlag(FLAGS_max_message_mb);
  if (port < 0 || port > 65535) {
    absl::FPrintF(stderr, "shardps-server: --port=%d is not in 0..65535\n",
                  port);
    return 2;
  }
  const int metrics_port = absl::GetFlag(FLAGS_metrics_port);
  if (metrics_port < -1 || metrics_port > 65535) {
    absl::FPrintF(stderr,
                  "shardps-server: --metrics_port=%d is not in -1..65535\n",
                  metrics_port);
    return 2;
  }
  if (max_mb < 1 || max_mb > 1024) {
    absl::FPrintF(stderr,
                  "shardps-server: --max_message_mb=%d is not in 1..1024\n",
                  max_mb);
    return 2;
  }

  ps::ServerOptions options;
  options.host = absl::GetFlag(FLAGS_host);
  options.port = port;
  options.job = absl::GetFlag(FLAGS_job);
  options.max_message_bytes = max_mb << 20;
  options.metrics_port = metrics_port;
  if (absl::GetFlag(FLAGS_max_tables) < 1 ||
      absl::GetFlag(FLAGS_max_memory_mb) < 1 ||
      absl::GetFlag(FLAGS_max_concurrent_streams) < 0) {
    absl::FPrintF(stderr,
                  "shardps-server: --max_tables and --max_memory_mb must be "
                  ">= 1, --max_concurrent_streams >= 0\n");
    return 2;
  }
  options.limits.max_tables = absl::GetFlag(FLAGS_max_tables);
  options.limits.max_bytes =
      static_cast<uint64_t>(absl::GetFlag(FLAGS_max_memory_mb)) << 20;
  options.max_concurrent_streams = absl::GetFlag(FLAGS_max_concurrent_streams);
  const double every = absl::GetFlag(FLAGS_checkpoint_every);
  const double drops = absl::GetFlag(FLAGS_inject_reply_drops);
  if (!(every >= 0) || !(drops >= 0 && drops < 1)) {
    absl::FPrintF(stderr,
                  "shardps-server: --checkpoint_every must be >= 0 and "
                  "--inject_reply_drops in [0, 1)\n");
    return 2;
  }
  options.checkpoint.dir = absl::GetFlag(FLAGS_checkpoint_dir);
  options.checkpoint.every = absl::Seconds(every);
  options.drop_reply_fraction = drops;
  if (drops > 0) {
    absl::FPrintF(stderr,
                  "shardps-server: FAULT INJECTION: answering %.0f%% of pulls "
                  "and pushes UNAVAILABLE after carrying them out\n",
                  drops * 100);
  }
  absl::StatusOr<ps::Security> security = ps::SecurityFromFlags();
  if (!security.ok()) {
    absl::FPrintF(stderr, "shardps-server: %s\n", security.status().ToString());
    return 2;
  }
  options.tls = security->tls;
  options.auth_token = security->auth_token;
  if (absl::Status s = ps::CheckExposure(options.host, options.tls,
                                         !options.auth_token.empty(),
                                         absl::GetFlag(FLAGS_allow_insecure));
      !s.ok()) {
    absl::FPrintF(stderr, "shardps-server: %s\n", s.ToString());
    return 2;
  }
  absl::StatusOr<std::unique_ptr<ps::Tracer>> tracer = ps::OpenTraceFlag(
      absl::GetFlag(FLAGS_trace), absl::GetFlag(FLAGS_trace_name));
  if (!tracer.ok()) {
    absl::FPrintF(stderr, "shardps-server: %s\n", tracer.status().ToString());
    return 2;
  }
  options.tracer = tracer->get();
  absl::StatusOr<std::unique_ptr<ps::Server>> server =
      ps::Server::Start(options);
  if (!server.ok()) {
    absl::FPrintF(stderr, "shardps-server: %s\n", server.status().ToString());
    return 1;
  }
  const std::string port_file = absl::GetFlag(FLAGS_port_file);
  if (!port_file.empty()) {
    if (absl::Status s = ps::WritePortFile(port_file, (*server)->port());
        !s.ok()) {
      absl::FPrintF(stderr, "shardps-server: %s\n", s.ToString());
      return 1;
    }
  }
  absl::FPrintF(stderr, "shardps-server: job %s listening on %s\n", options.job,
                (*server)->address());
  if ((*server)->metrics_port() >= 0) {
    absl::FPrintF(stderr, "shardps-server: metrics at http://%s:%d/metrics\n",
                  options.host, (*server)->metrics_port());
  }

  int signal = 0;
  sigwait(&stop_signals, &signal);
  absl::FPrintF(stderr, "shardps-server: %s received, shutting down\n",
                signal == SIGTERM ? "SIGTERM" : "SIGINT");
  if (absl::Status s = (*server)->Shutdown(
          absl::Seconds(absl::GetFlag(FLAGS_shutdown_grace_s)));
      !s.ok()) {
    absl::FPrintF(stderr, "shardps-server: last checkpoint failed: %s\n",
                  s.ToString());
    return 1;
  }
  absl::FPrintF(stderr, "shardps-server: stopped\n");
  return 0;
}
