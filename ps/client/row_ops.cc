// ps::Client, continued: sparse tables (rows by id; DESIGN.md "Sparse
// tables"). Ids are de-duplicated, grouped by shard with the table's
// RowPartition and sent in calls of at most chunk_bytes, all shards at
// once; pushes carry the client's session and sequence, so that servers
// apply each call once however often it is retried.
#include <grpcpp/client_context.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <thread>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "google/protobuf/io/coded_stream.h"
#include "ps/client/client.h"
#include "ps/client/connections.h"
#include "ps/client/fan_out.h"
#include "ps/client/push_op.h"
#include "ps/wire/float_pieces.h"
#include "ps/wire/row_partition.h"
#include "ps/wire/table_spec.h"
#include "ps/wire/value_codec.h"
#include "ps/wire/wire_codec.h"

namespace ps {
namespace {

shardps::CreateTableRequest RowShardSpec(const RowTableOptions& t,
                                         const std::string& job, int n, int s) {
  shardps::CreateTableRequest r;
  r.set_job(job);
  r.set_table(t.name);
  r.set_num_shards(n);
  r.set_shard_index(s);
  *r.mutable_optimizer() = t.optimizer;
  *r.mutable_init() = t.init;
  r.set_dim(t.dim);
  r.set_max_rows(t.max_rows_per_shard);
  r.set_row_sharding(t.sharding);
  r.set_id_space(t.id_space);
  return r;
}

// A call's distinct ids grouped by shard: shard s's are ids[begin[s],
// begin[s + 1]), and position i of the caller's ids holds ids[slot[i]].
// Rows travel in this order, so each shard's calls read and write one
// contiguous stretch of a single buffer. first[k] is the caller's first
// position of ids[k]; repeats lists the later positions of ids that occur
// more than once.
struct ShardedIds {
  std::vector<uint64_t> ids;
  std::vector<size_t> begin;
  std::vector<uint32_t> slot;
  std::vector<uint32_t> first;
  std::vector<uint32_t> repeats;
};

// Ids ahead of the one being de-duplicated whose hash-map slot is
// prefetched: the map of a 10^5-id call outgrows the core's cache.
constexpr size_t kDedupAhead = 16;

// Gradient floats from which a push checks them on a thread of their own,
// beside the grouping of its ids: below, thread start-up is not repaid.
constexpr size_t kCheckAsideAbove = 1 << 16;

ShardedIds GroupByShard(absl::Span<const uint64_t> ids,
                        const RowPartition& partition) {
  std::vector<uint32_t> first;  // of each distinct id, in first-seen order
  std::vector<uint32_t> distinct_of_position(ids.size());
  std::vector<uint32_t> repeats;
  absl::flat_hash_map<uint64_t, uint32_t> seen;
  seen.reserve(ids.size());
  first.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i + kDedupAhead < ids.size()) seen.prefetch(ids[i + kDedupAhead]);
    auto [it, fresh] = seen.try_emplace(ids[i], first.size());
    if (fresh) {
      first.push_back(i);
    } else {
      repeats.push_back(i);
    }
    distinct_of_position[i] = it->second;
  }
  // A counting sort of the distinct ids by shard, stable within a shard.
  const int shards = partition.num_shards();
  std::vector<uint32_t> shard_of(first.size(), 0);
  ShardedIds out;
  out.begin.assign(shards + 1, 0);
  for (size_t d = 0; d < first.size(); ++d) {
    if (shards > 1) shard_of[d] = partition.ShardOf(ids[first[d]]);
    ++out.begin[shard_of[d] + 1];
  }
  for (int s = 0; s < shards; ++s) out.begin[s + 1] += out.begin[s];
  std::vector<size_t> next(out.begin.begin(), out.begin.end() - 1);
  std::vector<uint32_t> slot_of_distinct(first.size());
  out.ids.resize(first.size());
  out.first.resize(first.size());
  for (size_t d = 0; d < first.size(); ++d) {
    const size_t k = next[shard_of[d]]++;
    slot_of_distinct[d] = k;
    out.ids[k] = ids[first[d]];
    out.first[k] = first[d];
  }
  out.slot.resize(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    out.slot[i] = slot_of_distinct[distinct_of_position[i]];
  }
  out.repeats = std::move(repeats);
  return out;
}

// Each shard's stretch of ShardedIds cut into calls of at most `per_call`
// rows.
struct ChunkedIds {
  ChunkedIds(const ShardedIds& sharded, size_t per_call)
      : begin(sharded.begin), per_call(std::max<size_t>(1, per_call)) {
    for (size_t s = 0; s + 1 < begin.size(); ++s) {
      count.push_back((begin[s + 1] - begin[s] + this->per_call - 1) /
                      this->per_call);
    }
  }
  // The first row and the row count of `shard`'s chunk-th call.
  std::pair<size_t, size_t> Range(int shard, size_t chunk) const {
    const size_t first = begin[shard] + chunk * per_call;
    return {first, std::min(per_call, begin[shard + 1] - first)};
  }

  const std::vector<size_t>& begin;
  const size_t per_call;
  std::vector<size_t> count;
};

// One call to `shard` with the client's deadline and token; its error names
// the shard.
absl::Status CallShard(
    Connections& conns, absl::Duration timeout, int shard,
    absl::string_view what,
    absl::FunctionRef<grpc::Status(grpc::ClientContext*,
                                   shardps::ParameterServer::Stub*)>
        call) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  conns.Authorize(&context);
  ServerConn& server = conns.server(shard);
  return server.Annotate(what, shard, call(&context, server.stub.get()));
}

constexpr char kPullRowsMethod[] = "/shardps.ParameterServer/PullRows";
constexpr char kPushRowsMethod[] = "/shardps.ParameterServer/PushRows";

// One try of a row call on connection `channel` (modulo the server's) of
// `shard`'s server, with the client's deadline and token; traced and
// counted like a dense chunk call: its span (pull_rows_rpc,
// push_rows_rpc), its metrics and its bytes. Its error names the shard.
absl::Status RowCall(Connections& conns, int shard, size_t channel, bool push,
                     const grpc::ByteBuffer& request,
                     grpc::ByteBuffer* response) {
  const ClientOptions& options = conns.options();
  ServerConn& server = conns.server(shard);
  grpc::ClientContext context;
  const absl::Time start = absl::Now();
  context.set_deadline(absl::ToChronoTime(start + options.rpc_timeout));
  conns.Authorize(&context);
  absl::Notification done;
  grpc::Status answer;
  server.bulk_stubs[channel % server.bulk_stubs.size()]->UnaryCall(
      &context, push ? kPushRowsMethod : kPullRowsMethod, grpc::StubOptions(),
      &request, response, [&](grpc::Status s) {
        answer = std::move(s);
        done.Notify();
      });
  // The call always ends (its deadline at the latest), and only then are
  // its buffers and context let go.
  done.WaitForNotification();
  const absl::Time end = absl::Now();
  const absl::Status status =
      server.Annotate(push ? "push rows" : "pull rows", shard, answer);
  const size_t sent = request.Length();
  const size_t received = status.ok() ? response->Length() : 0;
  if (options.tracer != nullptr) {
    options.tracer->Record(push ? "push_rows_rpc" : "pull_rows_rpc", "client",
                           start, end, "shard", shard);
  }
  if (options.metrics != nullptr) {
    options.metrics->RecordCall(push ? ClientMetrics::Method::kPushRows
                                     : ClientMetrics::Method::kPullRows,
                                shard, status.ok(), sent, received,
                                end - start);
  }
  if (push) {
    conns.CountPushBytes(sent);
  } else if (status.ok()) {
    conns.CountPullBytes(received);
  }
  return status;
}

}  // namespace

absl::Status Client::CreateRowTable(const RowTableOptions& table) {
  const int n = num_servers();
  if (absl::Status s =
          ValidateTableSpec(RowShardSpec(table, options_.job, n, 0));
      !s.ok() || table.dim == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "table '", table.name,
        "': ", s.ok() ? "a sparse table needs dim >= 1" : s.message()));
  }
  absl::Status created = Retried("table creation", [&] {
    return ForEachServer(n, [&](int s) {
      shardps::CreateTableResponse response;
      return CallShard(*conns_, options_.rpc_timeout, s,
                       absl::StrCat("creating table '", table.name, "'"),
                       [&](grpc::ClientContext* context,
                           shardps::ParameterServer::Stub* stub) {
                         return stub->CreateTable(
                             context, RowShardSpec(table, options_.job, n, s),
                             &response);
                       });
    });
  });
  if (!created.ok()) return created;
  AddRowTable(table.name, std::make_unique<RowTableInfo>(RowTableInfo{
                              table.dim, RowPartition(FromWire(table.sharding),
                                                      n, table.id_space)}));
  return absl::OkStatus();
}

absl::Status Client::OpenRowTable(absl::string_view table) {
  absl::StatusOr<std::vector<shardps::StatsResponse>> stats = Stats();
  if (!stats.ok()) return stats.status();
  const shardps::TableStats* first = nullptr;
  for (int s = 0; s < num_servers(); ++s) {
    const shardps::TableStats* found = nullptr;
    for (const shardps::TableStats& t : (*stats)[s].tables()) {
      if (t.table() == table && t.dim() > 0) found = &t;
    }
    if (found == nullptr) {
      return absl::NotFoundError(absl::StrCat("no sparse table '", table,
                                              "' on shard ", s, " at ",
                                              conns_->server(s).address));
    }
    if (first == nullptr) first = found;
  }
  AddRowTable(
      std::string(table),
      std::make_unique<RowTableInfo>(RowTableInfo{
          first->dim(), RowPartition(FromWire(first->row_sharding()),
                                     num_servers(), first->id_space())}));
  return absl::OkStatus();
}

absl::StatusOr<uint32_t> Client::RowDim(absl::string_view table) {
  absl::StatusOr<const RowTableInfo*> info = FindRowTable(table);
  if (!info.ok()) return info.status();
  return (*info)->dim;
}

void Client::AddRowTable(std::string name, std::unique_ptr<RowTableInfo> info) {
  absl::MutexLock lock(&tables_mu_);
  row_tables_[std::move(name)] = std::move(info);
}

absl::StatusOr<const Client::RowTableInfo*> Client::FindRowTable(
    absl::string_view table) {
  absl::MutexLock lock(&tables_mu_);
  auto it = row_tables_.find(table);
  if (it == row_tables_.end()) {
    return absl::NotFoundError(absl::StrCat(
        "sparse table '", table,
        "' was not created or opened by this client (CreateRowTable, "
        "OpenRowTable)"));
  }
  return it->second.get();
}

absl::Status Client::PullRows(absl::string_view table,
                              absl::Span<const uint64_t> ids, float* out,
                              bool create) {
  absl::StatusOr<const RowTableInfo*> info = FindRowTable(table);
  if (!info.ok()) return info.status();
  const uint32_t dim = (*info)->dim;
  const ShardedIds sharded = GroupByShard(ids, (*info)->partition);
  std::vector<float> rows(sharded.ids.size() * dim);
  const ChunkedIds chunks(sharded,
                          options_.chunk_bytes / (sizeof(float) * dim));
  if (absl::Status s =
          ForEachChunk(chunks.count, options_.max_inflight_per_server,
                       [&](int shard, size_t chunk) {
                         const auto [first, n] = chunks.Range(shard, chunk);
                         return PullRowsCall(
                             shard, chunk, dim, table,
                             absl::MakeConstSpan(sharded.ids).subspan(first, n),
                             create, rows.data() + first * dim);
                       });
      !s.ok()) {
    return s;
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    std::memcpy(out + i * dim, &rows[uint64_t{sharded.slot[i]} * dim],
                dim * sizeof(float));
  }
  return absl::OkStatus();
}

absl::Status Client::PullRowsCall(int shard, size_t channel, uint32_t dim,
                                  absl::string_view table,
                                  absl::Span<const uint64_t> ids, bool create,
                                  float* out) {
  const shardps::ValueEncoding encoding = options_.pull_encoding;
  shardps::PullRowsRequest pull;
  pull.set_job(options_.job);
  pull.set_table(std::string(table));
  pull.mutable_ids()->Add(ids.begin(), ids.end());
  pull.set_create(create);
  pull.set_encoding(encoding);
  const grpc::ByteBuffer request = SerializeSmallMessage(pull);
  grpc::ByteBuffer response;
  if (absl::Status s = Retried("pull rows",
                               [&] {
                                 return RowCall(*conns_, shard, channel,
                                                /*push=*/false, request,
                                                &response);
                               });
      !s.ok()) {
    return s;
  }
  // The rows are read where they arrived, the other fields parsed.
  const size_t n = ids.size() * dim;
  SplitMessage split;
  shardps::PullRowsResponse reply;
  size_t bytes = 0;
  const bool parsed =
      SplitBulkField(response, shardps::PullRowsResponse::kValuesFieldNumber,
                     &split)
          .ok() &&
      reply.ParseFromString(split.rest);
  for (absl::string_view piece : split.bulk) bytes += piece.size();
  if (!parsed || reply.encoding() != encoding ||
      bytes != EncodedBytes(encoding, n)) {
    return conns_->server(shard).Annotate(
        "pull rows", shard,
        absl::DataLossError(absl::StrCat(
            parsed ? "" : "a malformed answer: ", "the answer holds ", bytes,
            " bytes for ", ids.size(), " rows of dim ", dim)));
  }
  if (encoding == shardps::FLOAT32) {
    char* at = reinterpret_cast<char*>(out);
    for (absl::string_view piece : split.bulk) {
      std::memcpy(at, piece.data(), piece.size());
      at += piece.size();
    }
    return absl::OkStatus();
  }
  PooledBuffer storage;
  const absl::string_view in =
      Contiguous(split.bulk, conns_->buffers(), &storage);
  return DecodeValues(encoding, in.data(), n, out);
}

absl::Status Client::PushRows(absl::string_view table,
                              absl::Span<const uint64_t> ids,
                              const float* grads, float lr_scale) {
  absl::StatusOr<const RowTableInfo*> info = FindRowTable(table);
  if (!info.ok()) return info.status();
  const uint32_t dim = (*info)->dim;
  if (!std::isfinite(lr_scale) || lr_scale < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "learning rate scale must be finite and >= 0, got ", lr_scale));
  }
  // Nothing is sent before both the gradients are checked and the ids
  // grouped; a large push does the two side by side.
  const UnalignedFloats all_grads(grads, ids.size() * dim);
  bool finite = true;
  ShardedIds sharded;
  if (all_grads.size() < kCheckAsideAbove) {
    finite = AllFinite(all_grads);
    if (finite) sharded = GroupByShard(ids, (*info)->partition);
  } else {
    std::thread checker([&] { finite = AllFinite(all_grads); });
    sharded = GroupByShard(ids, (*info)->partition);
    checker.join();
  }
  if (!finite) {
    return absl::InvalidArgumentError(
        absl::StrCat("the row gradients for table '", table,
                     "' hold a NaN or an infinity: nothing was sent"));
  }
  // Each row in shard order is read where it is: in the caller's gradients
  // (no copy of the whole push), or, for an id that repeats, in `sums`,
  // where its gradients are added up so that it travels once.
  std::vector<const float*> rows(sharded.ids.size());
  for (size_t k = 0; k < rows.size(); ++k) {
    rows[k] = grads + uint64_t{sharded.first[k]} * dim;
  }
  std::vector<float> sums;
  if (!sharded.repeats.empty()) {
    absl::flat_hash_map<uint32_t, size_t> sum_of_slot;
    for (uint32_t i : sharded.repeats) {
      const uint32_t k = sharded.slot[i];
      auto [it, fresh] = sum_of_slot.try_emplace(k, sums.size());
      if (fresh) sums.insert(sums.end(), rows[k], rows[k] + dim);
      float* sum = &sums[it->second];
      for (uint32_t j = 0; j < dim; ++j) sum[j] += grads[uint64_t{i} * dim + j];
    }
    if (!AllFinite(UnalignedFloats(sums.data(), sums.size()))) {
      return absl::InvalidArgumentError(
          "the summed gradients of a repeated id overflow to infinity: "
          "nothing was sent");
    }
    for (const auto& [k, at] : sum_of_slot) rows[k] = &sums[at];
  }
  const ChunkedIds chunks(sharded,
                          options_.push_chunk_bytes / (sizeof(float) * dim));
  const PushTag tag = OpenPush(lr_scale);
  absl::Status pushed = ForEachChunk(
      chunks.count, options_.max_inflight_per_server,
      [&](int shard, size_t chunk) {
        const auto [first, n] = chunks.Range(shard, chunk);
        return PushRowsCall(shard, chunk, dim, table,
                            absl::MakeConstSpan(sharded.ids).subspan(first, n),
                            absl::MakeConstSpan(rows).subspan(first, n),
                            static_cast<uint32_t>(chunk), tag);
      });
  ClosePush(tag.sequence);
  return pushed;
}

absl::Status Client::PushRowsCall(int shard, size_t channel, uint32_t dim,
                                  absl::string_view table,
                                  absl::Span<const uint64_t> ids,
                                  absl::Span<const float* const> rows,
                                  uint32_t piece, const PushTag& tag) {
  // 1-bit SGD keeps per-key error state, which rows made on first touch do
  // not have: rows travel as float32 then.
  const shardps::ValueEncoding encoding =
      options_.push_encoding == shardps::ONEBIT ? shardps::FLOAT32
                                                : options_.push_encoding;
  const size_t n = ids.size() * dim;
  const size_t value_bytes = EncodedBytes(encoding, n);
  const size_t id_bytes = ids.size() * sizeof(uint64_t);
  // The message as protobuf would write it but in one pooled buffer: the
  // small fields and the gradients' tag in front of the gradients, the ids
  // (a packed fixed64 field) after them; fields may come in any order.
  const size_t ids_field =
      1 + google::protobuf::io::CodedOutputStream::VarintSize64(id_bytes) +
      id_bytes;
  PooledBuffer buffer =
      conns_->buffers().Acquire(kMaxWireHeaderBytes + value_bytes + ids_field);
  char* values = buffer.data() + kMaxWireHeaderBytes;
  // Row k of this call, encoded.
  const size_t row_bytes = EncodedBytes(encoding, dim);
  for (size_t k = 0; k < rows.size(); ++k) {
    char* to = values + k * row_bytes;
    switch (encoding) {
      case shardps::FP16:
        EncodeFp16(rows[k], dim, to);
        break;
      case shardps::BF16:
        EncodeBf16(rows[k], dim, to);
        break;
      default:
        std::memcpy(to, rows[k], dim * sizeof(float));
    }
  }
  uint8_t* at = reinterpret_cast<uint8_t*>(values + value_bytes);
  *at++ = (shardps::PushRowsRequest::kIdsFieldNumber << 3) | 2;
  at = google::protobuf::io::CodedOutputStream::WriteVarint64ToArray(id_bytes,
                                                                     at);
  std::memcpy(at, ids.data(), id_bytes);
  shardps::PushRowsRequest header;
  header.set_job(options_.job);
  header.set_table(std::string(table));
  header.set_encoding(encoding);
  header.set_worker(options_.worker);
  header.set_session(tag.session);
  header.set_sequence(tag.sequence);
  header.set_acked_below(tag.acked_below);
  header.set_piece(piece);
  if (tag.lr_scale != 1.0f) header.set_learning_rate_scale(tag.lr_scale);
  const size_t header_bytes =
      WriteHeaderBefore(header, shardps::PushRowsRequest::kGradientsFieldNumber,
                        value_bytes, values);
  grpc::Slice slice =
      std::move(buffer).ToSlice(kMaxWireHeaderBytes - header_bytes,
                                header_bytes + value_bytes + ids_field);
  const grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;
  return Retried("push rows", [&] {
    return RowCall(*conns_, shard, channel, /*push=*/true, request, &response);
  });
}

}  // namespace ps
