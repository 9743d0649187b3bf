#include "ps/client/connections.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>

#include "absl/strings/str_cat.h"
#include "ps/client/client.h"
#include "ps/wire/grpc_status.h"

namespace ps {
namespace {

grpc::ChannelArguments ChannelArgs(const ClientOptions& o) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(o.max_message_bytes);
  args.SetMaxSendMessageSize(o.max_message_bytes);
  // A private subchannel pool gives each channel its own TCP connection;
  // otherwise gRPC would share one connection among identical channels.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  // Pings on busy connections: one to a hung server is closed after
  // 40 s instead of holding its queued calls forever.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 30000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10000);
  // Reconnect to a restarted server on the retry loop's schedule rather
  // than gRPC's default 1 s, growing to 120 s. (The minimum stays at its
  // default: gRPC also uses it as the connection attempt's timeout.)
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  return args;
}

}  // namespace

absl::Status ServerConn::Annotate(absl::string_view what, int shard,
                                  const absl::Status& status) const {
  return absl::Status(status.code(),
                      absl::StrCat(what, " on shard ", shard, " at ", address,
                                   ": ", status.message()));
}

absl::Status ServerConn::Annotate(absl::string_view what, int shard,
                                  const grpc::Status& status) const {
  return Annotate(what, shard, FromGrpcStatus(status));
}

absl::StatusOr<std::unique_ptr<Connections>> Connections::Open(
    const ClientOptions& options) {
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      MakeChannelCredentials(options.tls);
  if (!credentials.ok()) return credentials.status();
  std::unique_ptr<Connections> conns(new Connections(options));
  const grpc::ChannelArguments args = ChannelArgs(options);
  for (const std::string& address : options.server_addrs) {
    auto conn = std::make_unique<ServerConn>();
    conn->address = address;
    for (int c = 0; c < options.channels_per_server; ++c) {
      conn->channels.push_back(
          grpc::CreateCustomChannel(address, *credentials, args));
      conn->bulk_stubs.push_back(
          std::make_unique<grpc::GenericStub>(conn->channels.back()));
    }
    conn->stub = shardps::ParameterServer::NewStub(conn->channels[0]);
    conns->servers_.push_back(std::move(conn));
  }
  return conns;
}

Connections::~Connections() {
  absl::MutexLock lock(&abandoned_mu_);
  abandoned_mu_.Await(absl::Condition(
      +[](int* n) { return *n == 0; }, &abandoned_));
}

void Connections::Authorize(grpc::ClientContext* context) const {
  if (!options_.auth_token.empty()) {
    context->AddMetadata(kAuthMetadataKey, BearerValue(options_.auth_token));
  }
}

void Connections::AddAbandoned(int n) {
  absl::MutexLock lock(&abandoned_mu_);
  abandoned_ += n;
}

void Connections::AbandonedDone() {
  absl::MutexLock lock(&abandoned_mu_);
  --abandoned_;
}

}  // namespace ps
