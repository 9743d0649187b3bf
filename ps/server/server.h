// Server runs one shardps parameter-server shard: a gRPC server hosting
// ParameterService and the standard grpc.health.v1 health service.
//
// Thread-safety: all methods are safe to call concurrently.
#ifndef SHARDPS_PS_SERVER_SERVER_H_
#define SHARDPS_PS_SERVER_SERVER_H_

#include <grpcpp/server.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "ps/base/log.h"
#include "ps/obs/metrics_endpoint.h"
#include "ps/obs/trace.h"
#include "ps/server/checkpointer.h"
#include "ps/server/server_metrics.h"
#include "ps/server/service.h"
#include "ps/wire/security.h"

namespace ps {

// The largest metadata (headers) of a call the server reads; see Server.
inline constexpr int kMaxMetadataBytes = 2 << 20;

struct ServerOptions {
  std::string host = "0.0.0.0";
  // Where the server's messages go (restores, checkpoints, stragglers);
  // null: stderr. Must outlive the server.
  LogSink* log = nullptr;
  int port = 0;  // 0 = any free port; see Server::port()
  // Requests for any other job are refused with FAILED_PRECONDITION.
  std::string job = "default";
  // Largest message accepted either way; the client's chunk size must fit.
  int max_message_bytes = 256 << 20;
  // ps/wire/security.h: TLS / mutual TLS, and the token every call must carry
  // (empty: none).
  TlsFiles tls;
  std::string auth_token;
  TableLimits limits;              // tables and their memory
  int max_concurrent_streams = 0;  // calls per connection; 0: gRPC's default
  // ps/server/checkpointer.h: with a directory, the server restores its latest
  // checkpoint before serving, writes one every checkpoint.every and a last
  // one at Shutdown. Empty directory: no checkpoints.
  CheckpointOptions checkpoint;
  // FAULT INJECTION for tests (ServiceOptions::drop_reply_fraction).
  double drop_reply_fraction = 0;
  // Same-host clients may attach shared memory (ServiceOptions).
  bool shared_memory = true;
  // Spans of request handling go here (ps/obs/trace.h); null: none. Must
  // outlive the server.
  Tracer* tracer = nullptr;
  // Prometheus metrics (ps/server/server_metrics.h) served at
  // http://host:metrics_port/metrics; 0: any free port; -1: none.
  int metrics_port = -1;
  // With replication.etcd set, this server is one replica of a shard
  // (ps/server/replicator.h), reached by peers and clients at
  // advertise_host (empty: host) and its port.
  ReplicationOptions replication;
  std::string advertise_host;
};

class Server {
 public:
  // Restores the checkpoint if any, binds and starts serving. UNAVAILABLE
  // names the address when binding fails (port in use, bad host); a
  // checkpoint that cannot be restored is an error too
  // (ps/server/checkpointer.h).
  static absl::StatusOr<std::unique_ptr<Server>> Start(
      const ServerOptions& options);

  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;
  // Shuts down with a short grace period if still running.
  ~Server();

  int port() const { return port_; }
  // The metrics endpoint's port; -1 without one.
  int metrics_port() const {
    return metrics_endpoint_ ? metrics_endpoint_->port() : -1;
  }
  // "host:port" with the port actually bound (advertise_host if set).
  std::string address() const;

  // Marks the server NOT_SERVING, stops accepting calls (new ones get
  // UNAVAILABLE), lets in-flight calls finish for up to `grace`, then cancels
  // the rest and writes a last checkpoint (its error is returned).
  // Idempotent.
  absl::Status Shutdown(absl::Duration grace);

  // Null without a checkpoint directory.
  Checkpointer* checkpointer() { return checkpointer_.get(); }

 private:
  explicit Server(ServerOptions options) : options_(std::move(options)) {}
  // The gRPC server with this server's services, listening on `listen`;
  // null when it cannot bind.
  std::unique_ptr<grpc::Server> Build(
      const std::string& listen,
      std::shared_ptr<grpc::ServerCredentials> credentials);

  const ServerOptions options_;
  // Declared first, to outlive the service that counts into them; the
  // endpoint stops serving (its collector reads the service) in ~Server.
  std::unique_ptr<MetricsEndpoint> metrics_endpoint_;
  std::unique_ptr<ServerMetrics> metrics_;
  // Declared before server_ so that they outlive it.
  std::unique_ptr<ParameterService> service_;
  std::unique_ptr<Checkpointer> checkpointer_;
  std::unique_ptr<Replicator> replicator_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  absl::Mutex shutdown_mu_;
  bool shut_down_ ABSL_GUARDED_BY(shutdown_mu_) = false;
};

}  // namespace ps

#endif  // SHARDPS_PS_SERVER_SERVER_H_
