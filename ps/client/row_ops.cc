// ps::Client, continued: sparse tables (rows by id; DESIGN.md "Sparse
// tables"). Ids are grouped by shard with the table's RowPartition and
// hashed into buckets of about chunk_bytes (RowBuckets), each de-duplicated
// and sent by one of the shard's lanes, all shards at once; pushes carry
// the client's session and sequence, so that servers apply each call once
// however often it is retried.
#include <grpcpp/client_context.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <thread>
#include <utility>

#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "google/protobuf/io/coded_stream.h"
#include "ps/client/client.h"
#include "ps/client/connections.h"
#include "ps/client/fan_out.h"
#include "ps/client/push_op.h"
#include "ps/client/row_buckets.h"
#include "ps/wire/buffer_pool.h"
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

// Gradient floats from which a push checks them on a thread of its own,
// beside the bucketing of its ids: below, thread start-up is not repaid.
constexpr size_t kCheckAsideAbove = 1 << 16;

// Rows ahead of the one a push call copies whose memory is prefetched.
constexpr size_t kRowsAhead = 8;

// RowBuckets numbers a call's positions in 32 bits.
absl::Status CheckIdCount(size_t n) {
  if (n <= std::numeric_limits<uint32_t>::max()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      n, " ids in one call; a call takes at most 2^32 - 1: split it"));
}

// A size of gradients up to which no id's summed repeats can overflow to
// infinity: an id occurs at most n times, and n values of at most b sum,
// with the rounding of 2^24 additions at most, to well under 8 n b.
float SafeToSum(size_t n) {
  if (n > (size_t{1} << 24)) return 0;
  return std::numeric_limits<float>::max() / (8.0f * std::max<size_t>(n, 1));
}

// Calls fn(first, count, piece) for the calls of `rows` rows a bucket of
// `shard` needs, at most per_call rows each: normally one; pieces
// bucket + k * buckets_of_shard stay unique within the shard's op.
absl::Status ForEachCallOfBucket(
    size_t rows, size_t per_call, size_t bucket, size_t buckets_of_shard,
    absl::FunctionRef<absl::Status(size_t first, size_t count, size_t piece)>
        fn) {
  for (size_t first = 0, k = 0; first < rows; first += per_call, ++k) {
    if (absl::Status s = fn(first, std::min(per_call, rows - first),
                            bucket + k * buckets_of_shard);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

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
  if (absl::Status s = CheckIdCount(ids.size()); !s.ok()) return s;
  const size_t per_call =
      std::max<size_t>(1, options_.chunk_bytes / (sizeof(float) * dim));
  const RowBuckets buckets(ids, (*info)->partition, per_call);
  return ForEachChunk(
      buckets.count(), options_.max_inflight_per_server,
      [&](int shard, size_t bucket) {
        const absl::Span<const uint32_t> positions =
            buckets.Positions(shard, bucket);
        const DistinctIds distinct = Deduplicate(ids, positions);
        // Every float is written by the calls before it is read.
        const PooledBuffer buffer = conns_->buffers().Acquire(
            distinct.ids.size() * dim * sizeof(float));
        float* rows = reinterpret_cast<float*>(buffer.data());
        if (absl::Status s = ForEachCallOfBucket(
                distinct.ids.size(), per_call, bucket, buckets.count()[shard],
                [&](size_t first, size_t count, size_t piece) {
                  return PullRowsCall(
                      shard, piece, dim, table,
                      absl::MakeConstSpan(distinct.ids).subspan(first, count),
                      create, rows + first * dim);
                });
            !s.ok()) {
          return s;
        }
        for (size_t j = 0; j < positions.size(); ++j) {
          std::memcpy(out + uint64_t{positions[j]} * dim,
                      rows + uint64_t{distinct.index[j]} * dim,
                      dim * sizeof(float));
        }
        return absl::OkStatus();
      });
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
  if (absl::Status s = CheckIdCount(ids.size()); !s.ok()) return s;
  const size_t per_call =
      std::max<size_t>(1, options_.push_chunk_bytes / (sizeof(float) * dim));
  // Nothing is sent before the gradients are checked. A large push checks
  // them on a thread of its own while its ids are put in buckets and its
  // lanes build their first calls; each call waits for the check.
  const UnalignedFloats all(grads, ids.size() * dim);
  Magnitudes sizes{};
  absl::Notification checked;
  auto check = [&] {
    sizes = CheckMagnitudes(all, SafeToSum(ids.size()));
    checked.Notify();
  };
  std::thread checker;
  if (all.size() < kCheckAsideAbove) {
    check();
  } else {
    checker = std::thread(check);
  }
  const RowBuckets buckets(ids, (*info)->partition, per_call);
  // Each lane sums the bucket it sends, unless a sum could overflow: then
  // no lane sends, and every bucket is summed and checked first (`summed`,
  // empty until then), so that the push stays all-or-nothing.
  std::vector<std::vector<BucketRows>> summed;
  const PushTag tag = OpenPush(lr_scale);
  auto send = [&] {
    const bool presummed = !summed.empty();
    return ForEachChunk(
        buckets.count(), options_.max_inflight_per_server,
        [&](int shard, size_t bucket) {
          BucketRows own;
          if (!presummed) {
            own = SumBucket(ids, buckets.Positions(shard, bucket), grads, dim);
          }
          const BucketRows& rows = presummed ? summed[shard][bucket] : own;
          const auto may_send = [&] {
            checked.WaitForNotification();
            return sizes.finite && (sizes.within || presummed)
                       ? absl::OkStatus()
                       : absl::CancelledError("unchecked: not sent");
          };
          return ForEachCallOfBucket(
              rows.ids.size(), per_call, bucket, buckets.count()[shard],
              [&](size_t first, size_t count, size_t piece) {
                return PushRowsCall(
                    shard, piece, dim, table,
                    absl::MakeConstSpan(rows.ids).subspan(first, count),
                    absl::MakeConstSpan(rows.rows).subspan(first, count),
                    static_cast<uint32_t>(piece), tag, may_send);
              });
        });
  };
  absl::Status pushed = send();
  if (checker.joinable()) checker.join();
  if (!sizes.finite) {
    pushed = absl::InvalidArgumentError(
        absl::StrCat("the row gradients for table '", table,
                     "' hold a NaN or an infinity: nothing was sent"));
  } else if (!sizes.within) {
    absl::StatusOr<std::vector<std::vector<BucketRows>>> all =
        SumAllBuckets(ids, buckets, grads, dim);
    pushed = all.status();
    if (all.ok()) {
      summed = *std::move(all);
      pushed = send();
    }
  }
  ClosePush(tag.sequence);
  return pushed;
}

absl::Status Client::PushRowsCall(int shard, size_t channel, uint32_t dim,
                                  absl::string_view table,
                                  absl::Span<const uint64_t> ids,
                                  absl::Span<const float* const> rows,
                                  uint32_t piece, const PushTag& tag,
                                  absl::FunctionRef<absl::Status()> may_send) {
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
  // Row k of this call, encoded. The rows lie scattered over the caller's
  // gradients (a bucket's ids are spread by their hash): the ones a few
  // places on are asked for while this one is copied.
  const size_t row_bytes = EncodedBytes(encoding, dim);
  for (size_t k = 0; k < rows.size(); ++k) {
    if (k + kRowsAhead < rows.size()) {
      const char* ahead = reinterpret_cast<const char*>(rows[k + kRowsAhead]);
      for (size_t b = 0; b < dim * sizeof(float); b += 64) {
        __builtin_prefetch(ahead + b);
      }
    }
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
  if (absl::Status s = may_send(); !s.ok()) return s;
  return Retried("push rows", [&] {
    return RowCall(*conns_, shard, channel, /*push=*/true, request, &response);
  });
}

}  // namespace ps
