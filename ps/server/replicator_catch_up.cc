// Replicator's catch-up half (ps/server/replicator.h): a replica copying
// its shard from the primary, when it starts and again after losing its
// place in etcd, and the primary serving that copy (Replication.CatchUp).
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ps/server/catch_up_stream.h"
#include "ps/server/replicator.h"
#include "ps/wire/security.h"

namespace ps {

absl::Status Replicator::CatchUpAgain() {
  bool first_try = false;
  {
    absl::MutexLock lock(&mu_);
    first_try = !catching_up_;
    catching_up_ = true;
  }
  if (first_try) {
    Logf(log_,
         "this replica's place in etcd was lost and registered again; "
         "copying the shard from its primary before serving again");
    // Pulls that waited on it as the primary: their clients retry on the
    // new one.
    registry_->EndWaits(absl::UnavailableError(
        absl::StrCat("replica ", options_.replica, " of shard ", options_.shard,
                     " is no longer its primary")));
  }
  absl::StatusOr<JobLayout> layout =
      ReadLayout(*etcd_, job_, options_.shard + 1);
  if (!layout.ok()) return layout.status();
  const ShardLayout& shard = layout->shards[options_.shard];
  // Only from a primary: a shard without one waits for a ready replica to
  // take over (this one's state may be behind).
  if (shard.epoch == 0 || shard.primary_address == Address()) {
    return absl::UnavailableError(absl::StrCat(
        "shard ", options_.shard, " has no primary to copy from yet"));
  }
  if (absl::Status s = CatchUpFrom(shard.primary_address, shard.epoch);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = membership()->SetReady(true); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  catching_up_ = false;
  return absl::OkStatus();
}

absl::Status Replicator::CatchUpFrom(const std::string& primary,
                                     int64_t epoch) {
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      MakeChannelCredentials(tls_);
  if (!credentials.ok()) return credentials.status();
  shardps::CatchUpRequest request;
  request.set_job(job_);
  request.set_shard(options_.shard);
  request.set_address(Address());
  Logf(log_, "catching up from the primary at %s", primary);
  const absl::Time start = absl::Now();
  std::vector<std::pair<std::string, std::string>> metadata;
  if (!auth_token_.empty()) {
    metadata.emplace_back(kAuthMetadataKey, BearerValue(auth_token_));
  }
  if (!options_.token.empty()) {
    metadata.emplace_back(kReplicationTokenMetadataKey, options_.token);
  }
  absl::StatusOr<std::vector<TableSnapshot>> fetched =
      FetchShardState(primary, request, *credentials, metadata, kCatchUpWait);
  if (!fetched.ok()) return fetched.status();
  std::vector<TableSnapshot>& tables = *fetched;
  {
    absl::MutexLock lock(&mu_);
    copied_epoch_ = epoch;
    copied_positions_.clear();
  }
  for (TableSnapshot& table : tables) {
    const std::string name = table.meta.spec().table();
    const uint64_t position = table.meta.admitted_pushes();
    // Not retryable: the state does not fit this server (its limits).
    if (absl::Status s = registry_->Install(std::move(table)); !s.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("the primary's table '", name,
                       "' cannot be restored here: ", s.message()));
    }
    absl::MutexLock lock(&mu_);
    copied_positions_[name] = position;
  }
  Logf(log_, "caught up from %s: %d tables in %s", primary, tables.size(),
       absl::FormatDuration(absl::Now() - start));
  return absl::OkStatus();
}

grpc::ServerWriteReactor<shardps::CatchUpChunk>* Replicator::CatchUp(
    grpc::CallbackServerContext* context,
    const shardps::CatchUpRequest* request) {
  absl::Status admitted =
      CheckAuthorization(context->client_metadata(), auth_token_);
  if (admitted.ok()) {
    admitted = CheckReplicationToken(context->client_metadata());
  }
  if (!admitted.ok()) return new CatchUpWriter(admitted);
  if (request->job() != job_ || request->shard() != options_.shard) {
    return new CatchUpWriter(absl::FailedPreconditionError(absl::StrCat(
        "this is shard ", options_.shard, " of job '", job_, "'")));
  }
  if (absl::Status s = CheckPrimary(); !s.ok()) return new CatchUpWriter(s);
  // Only a registered replica becomes a forwarding target: any other
  // address would cost every push a failed forward, or, answering errors,
  // fail them.
  if (!Registered(request->address())) {
    return new CatchUpWriter(absl::FailedPreconditionError(
        absl::StrCat(request->address(), " is not a replica of shard ",
                     options_.shard, " in etcd")));
  }
  {
    // From now on every push is forwarded to it: one applied before a
    // table's snapshot below is in it, one applied after is forwarded.
    absl::MutexLock lock(&mu_);
    if (std::find(targets_.begin(), targets_.end(), request->address()) ==
        targets_.end()) {
      targets_.push_back(request->address());
    }
  }
  Logf(log_, "replica at %s catches up; forwarding to it from now on",
       request->address());
  std::vector<TableSnapshot> tables;
  registry_->Snapshot(&tables);
  return new CatchUpWriter(std::move(tables));
}

}  // namespace ps
