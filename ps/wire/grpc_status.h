// The 1:1 mapping between absl::Status (used inside shardps) and grpc::Status
// (on the wire). Both libraries number their codes after the same canonical
// list, so the code carries over unchanged.
//
// Thread-safety: pure functions.
#ifndef SHARDPS_PS_WIRE_GRPC_STATUS_H_
#define SHARDPS_PS_WIRE_GRPC_STATUS_H_

#include <grpcpp/support/status.h>

#include <string>

#include "absl/status/status.h"

namespace ps {

inline grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

inline absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      status.error_message());
}

}  // namespace ps

#endif  // SHARDPS_PS_WIRE_GRPC_STATUS_H_
