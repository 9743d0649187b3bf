// ps::Client, continued: waiting for the servers to be ready, saying why
// while they are not (ps/client/connect_cause.h).
#include <grpcpp/client_context.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "ps/base/build_version.h"
#include "ps/client/client.h"
#include "ps/client/connect_cause.h"
#include "ps/client/connections.h"
#include "ps/client/fan_out.h"
#include "ps/wire/grpc_status.h"
#include "ps/wire/protocol_version.h"

namespace ps {
namespace {

constexpr char kHealthCheckMethod[] = "/grpc.health.v1.Health/Check";

}  // namespace

absl::Status Client::WaitReady(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  return ForEachServer(num_servers(),
                       [&](int s) { return WaitServer(s, deadline); });
}

absl::Status Client::WaitServerReady(int s, absl::Duration timeout) {
  return WaitServer(s, absl::Now() + timeout);
}

absl::Status Client::WaitServer(int s, absl::Time deadline) {
  // Each probe fails fast once a connection attempt has failed (no
  // wait_for_ready), so that its error says why; the wait says it every
  // kReportEvery rather than sitting silent until the deadline.
  constexpr absl::Duration kProbeTimeout = absl::Seconds(2);
  constexpr absl::Duration kReportEvery = absl::Seconds(3);
  ServerConn& server = conns_->server(s);
  const bool tls = options_.tls.enabled();
  absl::Status last = absl::DeadlineExceededError("no answer yet");
  absl::Time next_report = absl::Now() + kReportEvery;
  while (true) {
    grpc::ClientContext context;
    context.set_deadline(
        absl::ToChronoTime(std::min(deadline, absl::Now() + kProbeTimeout)));
    conns_->Authorize(&context);
    // An empty HealthCheckRequest asks about the server as a whole.
    grpc::Slice empty;
    grpc::ByteBuffer request(&empty, 1), response;
    absl::Notification done;
    grpc::Status answer;
    server.bulk_stubs[0]->UnaryCall(&context, kHealthCheckMethod,
                                    grpc::StubOptions(), &request, &response,
                                    [&](grpc::Status status) {
                                      answer = std::move(status);
                                      done.Notify();
                                    });
    done.WaitForNotification();
    if (answer.ok()) {
      grpc::Slice reply;
      // HealthCheckResponse{status: SERVING} encodes as 08 01.
      if (response.DumpToSingleSlice(&reply).ok() && reply.size() == 2 &&
          reply.begin()[0] == 0x08 && reply.begin()[1] == 0x01) {
        // A refusal (another protocol, job or token) will not go away by
        // waiting.
        last = CheckServerProtocol(s, deadline);
        if (!absl::IsUnavailable(last) && !absl::IsDeadlineExceeded(last)) {
          return last;
        }
      } else {
        last = absl::UnavailableError("the server is up but not serving yet");
      }
    } else if (answer.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED ||
               absl::IsDeadlineExceeded(last)) {
      // A probe cut short by the deadline says less than the failed
      // connection attempt before it.
      last = FromGrpcStatus(answer);
    }
    const absl::Time now = absl::Now();
    const std::string cause = ConnectCause(last, server.address, tls);
    if (now >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("waiting for readiness on shard ", s, " at ",
                       server.address, ": ", cause));
    }
    if (now >= next_report) {
      Logf(options_.log, "still waiting for shard %d at %s (%.0f s left): %s",
           s, server.address, absl::ToDoubleSeconds(deadline - now), cause);
      next_report = now + kReportEvery;
    }
    absl::SleepFor(absl::Milliseconds(100));  // polling interval
  }
}

absl::Status Client::CheckServerProtocol(int s, absl::Time deadline) {
  constexpr absl::Duration kCallTimeout = absl::Seconds(2);
  ServerConn& server = conns_->server(s);
  grpc::ClientContext context;
  context.set_deadline(
      absl::ToChronoTime(std::min(deadline, absl::Now() + kCallTimeout)));
  conns_->Authorize(&context);
  shardps::StatsResponse response;
  if (absl::Status answer = server.Annotate(
          "start-up check", s,
          server.stub->Stats(&context, StatsRequestWithVersion(), &response));
      !answer.ok()) {
    return answer;
  }
  return CheckPeerProtocol(absl::StrCat("shard ", s, " at ", server.address),
                           response.protocol_version(),
                           response.build_version());
}

shardps::StatsRequest Client::StatsRequestWithVersion() const {
  shardps::StatsRequest request;
  request.set_job(options_.job);
  request.set_protocol_version(kProtocolVersion);
  request.set_build_version(std::string(BuildVersion()));
  return request;
}

}  // namespace ps
