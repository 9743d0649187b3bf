#include "ps/server/catch_up_stream.h"

#include <grpcpp/create_channel.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "ps/wire/grpc_status.h"
#include "ps/wire/security.h"

namespace ps {
namespace {

constexpr size_t kChunkValues = (1 << 20) / sizeof(float);

}  // namespace

CatchUpWriter::CatchUpWriter(std::vector<TableSnapshot> tables)
    : tables_(std::move(tables)) {
  Next();
}

CatchUpWriter::CatchUpWriter(const absl::Status& status) {
  Finish(ToGrpcStatus(status));
}

void CatchUpWriter::OnWriteDone(bool ok) {
  if (!ok) {
    Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "write failed"));
    return;
  }
  Next();
}

void CatchUpWriter::OnDone() { delete this; }

void CatchUpWriter::Next() {
  if (table_ == tables_.size()) {
    Finish(grpc::Status::OK);
    return;
  }
  const TableSnapshot& t = tables_[table_];
  chunk_.Clear();
  if (array_ == 0 && offset_ == 0) *chunk_.mutable_meta() = t.meta;
  if (array_ < t.arrays.size()) {
    const std::vector<float>& a = t.arrays[array_];
    const size_t n = std::min(kChunkValues, a.size() - offset_);
    chunk_.set_array(array_);
    chunk_.set_offset(offset_);
    chunk_.set_values(reinterpret_cast<const char*>(a.data() + offset_),
                      n * sizeof(float));
    offset_ += n;
    if (offset_ == a.size()) {
      ++array_;
      offset_ = 0;
    }
  }
  if (array_ >= t.arrays.size()) {
    chunk_.set_last(true);
    ++table_;
    array_ = 0;
    offset_ = 0;
  }
  StartWrite(&chunk_);
}

absl::StatusOr<bool> AddCatchUpChunk(const shardps::CatchUpChunk& chunk,
                                     TableSnapshot* table) {
  if (chunk.has_meta()) {
    table->meta = chunk.meta();
    table->arrays.assign(chunk.meta().arrays(), {});
  }
  if (!chunk.values().empty()) {
    if (chunk.array() >= table->arrays.size() ||
        chunk.values().size() % sizeof(float) != 0) {
      return absl::DataLossError("a catch-up chunk does not fit its table");
    }
    std::vector<float>& a = table->arrays[chunk.array()];
    if (chunk.offset() != a.size()) {
      return absl::DataLossError("catch-up chunks out of order");
    }
    const size_t n = chunk.values().size() / sizeof(float);
    a.resize(a.size() + n);
    std::memcpy(a.data() + chunk.offset(), chunk.values().data(),
                chunk.values().size());
  }
  return chunk.last();
}

absl::StatusOr<std::vector<TableSnapshot>> FetchShardState(
    const std::string& primary, const shardps::CatchUpRequest& request,
    std::shared_ptr<grpc::ChannelCredentials> credentials,
    const std::vector<std::pair<std::string, std::string>>& metadata,
    absl::Duration timeout) {
  auto stub = shardps::Replication::NewStub(
      grpc::CreateChannel(primary, std::move(credentials)));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  for (const auto& [key, value] : metadata) context.AddMetadata(key, value);
  std::unique_ptr<grpc::ClientReader<shardps::CatchUpChunk>> reader =
      stub->CatchUp(&context, request);
  std::vector<TableSnapshot> tables(1);
  shardps::CatchUpChunk chunk;
  while (reader->Read(&chunk)) {
    absl::StatusOr<bool> complete = AddCatchUpChunk(chunk, &tables.back());
    if (!complete.ok()) {
      context.TryCancel();
      reader->Finish().IgnoreError();
      return absl::UnavailableError(absl::StrCat(
          "catching up from ", primary, ": ", complete.status().message()));
    }
    if (*complete) tables.emplace_back();
  }
  if (grpc::Status s = reader->Finish(); !s.ok()) {
    return absl::UnavailableError(
        absl::StrCat("catching up from ", primary, ": ", s.error_message()));
  }
  tables.pop_back();  // the one being filled when the stream ended
  return tables;
}

}  // namespace ps
