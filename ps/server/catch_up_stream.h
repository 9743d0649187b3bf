// The state a replica copies from its primary (Replication.CatchUp,
// proto/replication.proto) as a stream of CatchUpChunks: CatchUpWriter
// sends snapshots, AddCatchUpChunk puts them back together.
//
// Thread-safety: a CatchUpWriter is driven by gRPC one reaction at a time;
// AddCatchUpChunk is a free function.
#ifndef SHARDPS_PS_SERVER_CATCH_UP_STREAM_H_
#define SHARDPS_PS_SERVER_CATCH_UP_STREAM_H_

#include <grpcpp/security/credentials.h>
#include <grpcpp/support/server_callback.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/replication.grpc.pb.h"
#include "ps/table/table.h"

namespace ps {

// Streams `tables` (each table's meta in its first chunk, then its arrays
// in chunks of at most 1 MiB), or ends the call with an error. gRPC's
// callback API owns it from `new` to OnDone.
class CatchUpWriter final
    : public grpc::ServerWriteReactor<shardps::CatchUpChunk> {
 public:
  explicit CatchUpWriter(std::vector<TableSnapshot> tables);
  explicit CatchUpWriter(const absl::Status& status);
  CatchUpWriter(const CatchUpWriter&) = delete;
  CatchUpWriter& operator=(const CatchUpWriter&) = delete;

  void OnWriteDone(bool ok) override;
  void OnDone() override;

 private:
  // Writes the next chunk, or finishes.
  void Next();

  std::vector<TableSnapshot> tables_;
  size_t table_ = 0;
  size_t array_ = 0;
  size_t offset_ = 0;
  shardps::CatchUpChunk chunk_;
};

// Asks the primary at `primary` for its state (Replication.CatchUp), the
// call carrying `metadata` (tokens), and reads all of it before returning,
// so that a stream cut short restores nothing; UNAVAILABLE naming the
// primary when it fails or ends early.
absl::StatusOr<std::vector<TableSnapshot>> FetchShardState(
    const std::string& primary, const shardps::CatchUpRequest& request,
    std::shared_ptr<grpc::ChannelCredentials> credentials,
    const std::vector<std::pair<std::string, std::string>>& metadata,
    absl::Duration timeout);

// Adds one received chunk to *table; true once the table is complete.
// DATA_LOSS when chunks do not fit together.
absl::StatusOr<bool> AddCatchUpChunk(const shardps::CatchUpChunk& chunk,
                                     TableSnapshot* table);

}  // namespace ps

#endif  // SHARDPS_PS_SERVER_CATCH_UP_STREAM_H_
