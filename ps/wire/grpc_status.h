// The 1:1 mapping between absl::Status (used inside shardps) and grpc::Status
// (on the wire). Both libraries number their codes after the same canonical
// list, so the code carries over unchanged. A message travels in a trailer,
// and a peer with gRPC's default settings refuses metadata over 8 KB (and
// loses the real code with it), so a message longer than
// kMaxWireMessageBytes is cut there.
//
// Thread-safety: pure functions.
#ifndef SHARDPS_PS_WIRE_GRPC_STATUS_H_
#define SHARDPS_PS_WIRE_GRPC_STATUS_H_

#include <grpcpp/support/status.h>

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace ps {

inline constexpr size_t kMaxWireMessageBytes = 1024;

inline grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  std::string message(status.message());
  if (message.size() > kMaxWireMessageBytes) {
    const size_t cut = message.size() - kMaxWireMessageBytes;
    message.resize(kMaxWireMessageBytes);
    absl::StrAppend(&message, "... (", cut, " more bytes)");
  }
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::move(message));
}

inline absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      status.error_message());
}

}  // namespace ps

#endif  // SHARDPS_PS_WIRE_GRPC_STATUS_H_
