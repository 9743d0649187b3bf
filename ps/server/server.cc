#include "ps/server/server.h"

#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>

#include "absl/memory/memory.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ps/wire/table_spec.h"

namespace ps {

absl::StatusOr<std::unique_ptr<Server>> Server::Start(
    const ServerOptions& options) {
  // Process-wide switch inside gRPC; it only makes every server built from
  // here on carry the standard health service.
  grpc::EnableDefaultHealthCheckService(true);
  if (absl::Status s = CheckName("job", options.job); !s.ok()) return s;
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials =
      MakeServerCredentials(options.tls);
  if (!credentials.ok()) return credentials.status();
  std::unique_ptr<Server> server = absl::WrapUnique(new Server(options));
  ServiceOptions service;
  service.job = options.job;
  service.log = options.log;
  service.auth_token = options.auth_token;
  service.limits = options.limits;
  service.drop_reply_fraction = options.drop_reply_fraction;
  service.shared_memory = options.shared_memory;
  service.tracer = options.tracer;
  if (options.metrics_port >= 0) {
    absl::StatusOr<std::unique_ptr<MetricsEndpoint>> endpoint =
        MetricsEndpoint::Start(options.host, options.metrics_port);
    if (!endpoint.ok()) return endpoint.status();
    server->metrics_endpoint_ = *std::move(endpoint);
    server->metrics_ =
        std::make_unique<ServerMetrics>(server->metrics_endpoint_->registry());
    service.metrics = server->metrics_.get();
  }
  server->service_ = std::make_unique<ParameterService>(service);
  if (server->metrics_endpoint_ != nullptr) {
    server->metrics_endpoint_->AddCollector([service = server->service_.get()] {
      shardps::StatsResponse stats;
      service->FillStats(&stats);
      return StatsFamilies(stats);
    });
  }
  const bool replicated = !options.replication.etcd.empty();
  if (replicated) {
    absl::StatusOr<std::unique_ptr<Replicator>> replicator = Replicator::Create(
        options.replication, options.job, options.auth_token, options.tls,
        &server->service_->registry(), options.log);
    if (!replicator.ok()) return replicator.status();
    server->service_->registry().set_replicated();
    server->replicator_ = *std::move(replicator);
    server->service_->set_replicator(server->replicator_.get());
  }
  if (!options.checkpoint.dir.empty()) {
    CheckpointOptions checkpoint = options.checkpoint;
    checkpoint.log = options.log;
    absl::StatusOr<std::unique_ptr<Checkpointer>> checkpointer =
        Checkpointer::Open(checkpoint, &server->service_->registry());
    if (!checkpointer.ok()) return checkpointer.status();
    server->checkpointer_ = *std::move(checkpointer);
    server->service_->set_checkpointer(server->checkpointer_.get());
  }
  const std::string listen = absl::StrCat(options.host, ":", options.port);
  server->server_ = server->Build(listen, *credentials);
  if (server->server_ == nullptr || server->port_ == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", listen,
                     " (address in use, or not an address of this host?)"));
  }
  if (replicated) {
    // Serving already (calls are answered "catching up" meanwhile): the
    // primary forwards to this replica while it copies the state, which
    // replaces what a checkpoint restored. With no replica holding the
    // shard, the restored checkpoint becomes the shard's state.
    if (absl::Status s = server->replicator_->Start(server->address());
        !s.ok()) {
      return s;
    }
  }
  server->server_->GetHealthCheckService()->SetServingStatus(true);
  if (server->checkpointer_ != nullptr) server->checkpointer_->StartPeriodic();
  return server;
}

std::unique_ptr<grpc::Server> Server::Build(
    const std::string& listen,
    std::shared_ptr<grpc::ServerCredentials> credentials) {
  const ServerOptions& options = options_;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(listen, credentials, &port_);
  builder.RegisterService(service_.get());
  if (replicator_ != nullptr) builder.RegisterService(replicator_.get());
  builder.SetMaxReceiveMessageSize(options.max_message_bytes);
  builder.SetMaxSendMessageSize(options.max_message_bytes);
  // gRPC sets SO_REUSEPORT by default, which would let a second server bind
  // a busy port and silently take half of its connections.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // Accept the clients' keepalive pings (every 30 s) even while idle.
  builder.AddChannelArgument(
      GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 10000);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
  // A call's metadata (the token, chiefly) up to this size reaches Admit,
  // which answers a wrong one UNAUTHENTICATED; gRPC itself refuses larger
  // metadata with RESOURCE_EXHAUSTED. Either way the connection stays up.
  builder.AddChannelArgument(GRPC_ARG_MAX_METADATA_SIZE, kMaxMetadataBytes);
  if (options.max_concurrent_streams > 0) {
    builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS,
                               options.max_concurrent_streams);
  }
  return builder.BuildAndStart();
}

std::string Server::address() const {
  return absl::StrCat(
      options_.advertise_host.empty() ? options_.host : options_.advertise_host,
      ":", port_);
}

absl::Status Server::Shutdown(absl::Duration grace) {
  absl::MutexLock lock(&shutdown_mu_);
  if (shut_down_) return absl::OkStatus();
  shut_down_ = true;
  server_->GetHealthCheckService()->SetServingStatus(false);
  // Clients get a retryable answer while the last in-flight calls finish.
  service_->StartDraining();
  server_->Shutdown(absl::ToChronoTime(absl::Now() + grace));
  server_->Wait();
  if (checkpointer_ == nullptr) return absl::OkStatus();
  // Nothing can change the tables any more: this checkpoint holds every
  // push that was acknowledged.
  checkpointer_->StopPeriodic();
  return checkpointer_->WriteNow();
}

Server::~Server() {
  if (server_ != nullptr) {
    if (absl::Status s = Shutdown(absl::Seconds(1)); !s.ok()) {
      Logf(options_.log, "last checkpoint failed: %s", s.ToString());
    }
  }
  // No scrape may read the service once it goes.
  if (metrics_endpoint_ != nullptr) metrics_endpoint_->Stop();
}

}  // namespace ps
