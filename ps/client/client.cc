#include "ps/client/client.h"

#include <grpcpp/client_context.h>

#include <algorithm>
#include <cmath>
#include <thread>
#include <utility>

#include "absl/memory/memory.h"
#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "ps/client/chunk_plan.h"
#include "ps/client/chunked_op.h"
#include "ps/client/connections.h"
#include "ps/client/fan_out.h"
#include "ps/client/pull_op.h"
#include "ps/client/push_op.h"
#include "ps/client/retry.h"
#include "ps/wire/float_pieces.h"
#include "ps/wire/range_partition.h"
#include "ps/wire/table_spec.h"
#include "ps/wire/value_codec.h"
#include "ps/wire/wire_codec.h"

namespace ps {
namespace {

absl::Status CheckTransfer(const ClientOptions& o) {
  if (o.max_message_bytes <= static_cast<int>(kMaxWireHeaderBytes)) {
    return absl::InvalidArgumentError("max_message_bytes is too small");
  }
  const size_t max_chunk = o.max_message_bytes - kMaxWireHeaderBytes;
  for (const auto& [name, bytes] :
       {std::pair{"chunk_bytes", o.chunk_bytes},
        std::pair{"push_chunk_bytes", o.push_chunk_bytes}}) {
    if (bytes < 64 || bytes % 64 != 0 || bytes > max_chunk) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, " must be a multiple of 64 in [64, ", max_chunk,
                       "], got ", bytes));
    }
  }
  if (o.channels_per_server < 1 || o.max_inflight_per_server < 1) {
    return absl::InvalidArgumentError(
        "channels_per_server and max_inflight_per_server must be >= 1");
  }
  if (o.rpc_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("rpc_timeout must be > 0");
  }
  return absl::OkStatus();
}

int ShardCount(const ClientOptions& o) {
  return o.etcd.empty() ? static_cast<int>(o.server_addrs.size())
                        : o.num_shards;
}

absl::Status CheckOptions(const ClientOptions& o) {
  if (o.etcd.empty() && o.server_addrs.empty()) {
    return absl::InvalidArgumentError("client needs at least one server");
  }
  if (!o.etcd.empty() &&
      (o.num_shards < 1 ||
       (!o.server_addrs.empty() &&
        o.server_addrs.size() != static_cast<size_t>(o.num_shards)))) {
    return absl::InvalidArgumentError(
        "with etcd the client takes num_shards >= 1, and server_addrs only "
        "as num_shards primaries to start with while etcd is away");
  }
  if (o.job.empty() || o.job.size() > 128) {
    return absl::InvalidArgumentError("job must have 1 to 128 characters");
  }
  if (absl::Status s = CheckTransfer(o); !s.ok()) return s;
  if (absl::Status s = CheckPullEncoding(o.pull_encoding); !s.ok()) return s;
  if (!shardps::ValueEncoding_IsValid(o.push_encoding)) {
    return absl::InvalidArgumentError("unknown push encoding");
  }
  if (o.metrics != nullptr && o.metrics->num_shards() != ShardCount(o)) {
    return absl::InvalidArgumentError(
        absl::StrCat("client metrics have ", o.metrics->num_shards(),
                     " shards for ", ShardCount(o), " servers"));
  }
  return absl::OkStatus();
}

std::chrono::system_clock::time_point DeadlineIn(absl::Duration d) {
  return absl::ToChronoTime(absl::Now() + d);
}

// server `s`'s CreateTableRequest for `table` of `n` shards.
shardps::CreateTableRequest ShardSpec(const TableOptions& table,
                                      const std::string& job, int n, int s) {
  shardps::CreateTableRequest r;
  r.set_job(job);
  r.set_table(table.name);
  r.set_num_params(table.num_params);
  r.set_num_shards(n);
  r.set_shard_index(s);
  *r.mutable_optimizer() = table.optimizer;
  *r.mutable_init() = table.init;
  *r.mutable_consistency() = table.consistency;
  for (const shardps::InitSegment& seg : table.init_segments) {
    *r.add_init_segments() = seg;
  }
  return r;
}

}  // namespace

// What the client knows of a table it created or opened.
struct Client::TableInfo {
  TableInfo(RangePartition partition, absl::Duration pull_wait)
      : partition(std::move(partition)), pull_wait(pull_wait) {}
  const RangePartition partition;
  const absl::Duration pull_wait;  // the longest a pull may wait
  // ONEBIT pushes: the quantization error of every key, added to its next
  // gradient (allocated by the first such push).
  absl::Mutex residual_mu;
  std::vector<float> residual ABSL_GUARDED_BY(residual_mu);
};

Client::Client(ClientOptions options, uint64_t session)
    : options_(std::move(options)), session_(session) {}

Client::~Client() = default;

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(ClientOptions options) {
  if (options.push_chunk_bytes == 0) {
    options.push_chunk_bytes = options.chunk_bytes != 0 ? options.chunk_bytes
                               : options.etcd.empty()
                                   ? kChunkBytes
                                   : kReplicatedPushChunkBytes;
  }
  if (options.chunk_bytes == 0) options.chunk_bytes = kChunkBytes;
  if (absl::Status s = CheckOptions(options); !s.ok()) return s;
  // Random, so that a restarted worker's pushes are never mistaken for
  // retries of its previous incarnation's.
  absl::BitGen random;
  const uint64_t session =
      absl::Uniform<uint64_t>(absl::IntervalClosed, random, 1, ~uint64_t{0});
  auto client = absl::WrapUnique(new Client(std::move(options), session));
  absl::StatusOr<std::unique_ptr<Connections>> conns =
      Connections::Open(client->options_);
  if (!conns.ok()) return conns.status();
  client->conns_ = *std::move(conns);
  return client;
}

int Client::num_servers() const { return conns_->size(); }
std::vector<std::string> Client::ServerAddresses() const {
  std::vector<std::string> addresses;
  for (int s = 0; s < conns_->size(); ++s) {
    addresses.push_back(conns_->server(s).address);
  }
  return addresses;
}

uint64_t Client::push_bytes() const { return conns_->push_bytes(); }
uint64_t Client::pull_bytes() const { return conns_->pull_bytes(); }
uint64_t Client::memory_push_bytes() const {
  return conns_->memory_push_bytes();
}
uint64_t Client::memory_pull_bytes() const {
  return conns_->memory_pull_bytes();
}

absl::Status Client::Retried(absl::string_view what,
                             absl::FunctionRef<absl::Status()> call) {
  RetryPolicy policy;
  policy.give_up = options_.retry_give_up;
  policy.log = options_.log;
  policy.metrics = options_.metrics;
  if (!options_.etcd.empty()) {
    policy.sleep = [conns = conns_.get()](absl::Duration d) {
      conns->SleepUnlessLayoutChanges(d);
    };
  }
  return Retrying(policy, what, call);
}

absl::Status Client::CreateTable(const TableOptions& table) {
  // What every server would check (all but the job and the shard), checked
  // once here before anything is sent.
  if (absl::Status s =
          ValidateTableSpec(ShardSpec(table, options_.job, num_servers(), 0));
      !s.ok()) {
    return absl::Status(
        s.code(), absl::StrCat("table '", table.name, "': ", s.message()));
  }
  return Retried("table creation", [&] { return CreateTableOnce(table); });
}

absl::Status Client::CreateTableOnce(const TableOptions& table) {
  const int n = num_servers();
  if (absl::Status s = ForEachServer(
          n,
          [&](int s) {
            const shardps::CreateTableRequest request =
                ShardSpec(table, options_.job, n, s);
            shardps::CreateTableResponse response;
            grpc::ClientContext context;
            context.set_deadline(DeadlineIn(options_.rpc_timeout));
            conns_->Authorize(&context);
            return conns_->server(s).Annotate(
                absl::StrCat("creating table '", table.name, "'"), s,
                conns_->server(s).stub->CreateTable(&context, request,
                                                    &response));
          });
      !s.ok()) {
    return s;
  }
  AddTable(table);
  return absl::OkStatus();
}

void Client::AddTable(const TableOptions& table) {
  const shardps::ConsistencyConfig& c = table.consistency;
  const absl::Duration pull_wait =
      c.mode() != shardps::CONSISTENCY_ASYNC
          ? absl::Seconds(c.straggler_timeout_seconds())
          : absl::ZeroDuration();
  absl::MutexLock lock(&tables_mu_);
  tables_[table.name] = std::make_unique<TableInfo>(
      RangePartition(table.num_params, num_servers()), pull_wait);
}

absl::Status Client::OpenTable(const TableOptions& table,
                               absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  const int n = num_servers();
  while (true) {
    absl::StatusOr<std::vector<shardps::StatsResponse>> stats = Stats();
    if (!stats.ok()) return stats.status();
    int missing = -1;
    for (int s = 0; s < n && missing < 0; ++s) {
      const shardps::TableStats* found = nullptr;
      for (const shardps::TableStats& t : (*stats)[s].tables()) {
        if (t.table() == table.name) found = &t;
      }
      if (found == nullptr) {
        missing = s;
      } else if (found->num_params() != table.num_params ||
                 found->num_shards() != static_cast<uint32_t>(n)) {
        return absl::FailedPreconditionError(absl::StrCat(
            "table '", table.name, "' on shard ", s, " at ",
            conns_->server(s).address, " has ", found->num_params(),
            " keys over ", found->num_shards(), " shards; this worker expects ",
            table.num_params, " over ", n));
      }
    }
    if (missing < 0) break;
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("table '", table.name, "' was not created within ",
                       absl::FormatDuration(timeout), ": shard ", missing,
                       " at ", conns_->server(missing).address,
                       " still has no such table (is rank 0 running?)"));
    }
    // Polling interval: short, because every rank but 0 starts here.
    absl::SleepFor(absl::Milliseconds(10));
  }
  AddTable(table);
  return absl::OkStatus();
}

absl::StatusOr<Client::TableInfo*> Client::FindTable(absl::string_view table,
                                                     uint64_t begin,
                                                     uint64_t end) {
  TableInfo* info;
  {
    absl::ReaderMutexLock lock(&tables_mu_);
    auto it = tables_.find(table);
    if (it == tables_.end()) {
      return absl::NotFoundError(absl::StrCat(
          "table '", table, "' is unknown to this client; call CreateTable"));
    }
    info = it->second.get();
  }
  if (begin > end || end > info->partition.num_params()) {
    return absl::InvalidArgumentError(
        absl::StrCat("key range [", begin, ", ", end, ") is not inside table '",
                     table, "' of ", info->partition.num_params(), " keys"));
  }
  return info;
}

absl::Status Client::RunRetried(
    absl::string_view what, std::vector<Chunk> chunks,
    absl::FunctionRef<std::shared_ptr<ChunkedOp>(std::vector<Chunk>)> make) {
  if (chunks.empty()) return absl::OkStatus();
  // A retry sends only the chunks that have not succeeded yet. A server
  // that lost the op's shared memory (it restarted) gets them again at once,
  // through a new segment; only a server restarted again meanwhile makes
  // that happen twice, so a few times is plenty.
  return Retried(what, [&] {
    constexpr int kMemoryAttempts = 8;
    absl::Status s;
    for (int attempt = 0; attempt < kMemoryAttempts; ++attempt) {
      std::shared_ptr<ChunkedOp> op = make(std::move(chunks));
      s = op->Run();
      chunks = op->Unfinished();
      if (s.ok() || !op->memory_lost()) break;
    }
    return s;
  });
}

absl::Status Client::Pull(absl::string_view table, uint64_t begin, uint64_t end,
                          float* out, uint64_t clock) {
  absl::StatusOr<TableInfo*> info = FindTable(table, begin, end);
  if (!info.ok()) return info.status();
  std::vector<Chunk> chunks = PlanChunks((*info)->partition, {begin, end},
                                         options_.chunk_bytes / sizeof(float),
                                         options_.channels_per_server);
  // A pull may wait on the servers for the other workers' pushes.
  const OpContext context{
      conns_.get(),
      std::string(table),
      begin,
      clock,
      options_.rpc_timeout + (*info)->pull_wait,
      options_.max_inflight_per_server * ShardsTouched(chunks)};
  return RunRetried("pull", std::move(chunks), [&](std::vector<Chunk> c) {
    return std::make_shared<PullOp>(context, std::move(c), out);
  });
}

PushTag Client::OpenPush(float lr_scale) {
  absl::MutexLock lock(&push_mu_);
  PushTag tag{session_, next_sequence_++, 0, lr_scale};
  open_pushes_.insert(tag.sequence);
  // The oldest push still open here (this one, or an older one running on
  // another thread): servers may forget everything below it.
  tag.acked_below = *open_pushes_.begin();
  return tag;
}

void Client::ClosePush(uint64_t sequence) {
  absl::MutexLock lock(&push_mu_);
  open_pushes_.erase(sequence);
}

absl::Status Client::Push(absl::string_view table, uint64_t begin, uint64_t end,
                          const float* grad, uint64_t clock, float lr_scale) {
  return SendPush(table, begin, end, grad, nullptr, clock, lr_scale);
}

absl::Status Client::PushPull(absl::string_view table, uint64_t begin,
                              uint64_t end, const float* grad, float* out,
                              uint64_t clock, float lr_scale) {
  return SendPush(table, begin, end, grad, out, clock, lr_scale);
}

absl::Status Client::Assign(absl::string_view table, uint64_t begin,
                            uint64_t end, const float* values) {
  return SendPush(table, begin, end, values, nullptr, 0, 1.0f,
                  /*assign=*/true);
}

absl::Status Client::SendPush(absl::string_view table, uint64_t begin,
                              uint64_t end, const float* grad, float* out,
                              uint64_t clock, float lr_scale, bool assign) {
  // The whole gradient is checked before any chunk leaves, so that a NaN in
  // the last chunk cannot leave the first ones applied: here, or (float32)
  // by the op as it copies the values.
  if (begin < end && !PushOp::ChecksGradient(options_, assign) &&
      !AllFiniteInParallel({UnalignedFloats(grad, end - begin)})) {
    return absl::InvalidArgumentError(absl::StrCat(
        assign ? "values" : "gradient", " for '", table, "' keys [", begin,
        ", ", end, ") contains NaN or Inf; nothing was sent"));
  }
  if (!std::isfinite(lr_scale) || lr_scale < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "learning rate scale must be finite and >= 0, got ", lr_scale));
  }
  absl::StatusOr<TableInfo*> info = FindTable(table, begin, end);
  if (!info.ok()) return info.status();
  std::vector<Chunk> chunks = PlanChunks(
      (*info)->partition, {begin, end},
      options_.push_chunk_bytes / sizeof(float), options_.channels_per_server);
  PooledBuffer encoded;
  if (options_.push_encoding == shardps::ONEBIT && !assign) {
    size_t bytes = 0;
    for (Chunk& chunk : chunks) {
      chunk.encoded_offset = bytes;
      bytes += EncodedBytes(shardps::ONEBIT, chunk.keys.size());
    }
    encoded = conns_->buffers().Acquire(bytes);
    TableInfo& t = **info;
    absl::MutexLock lock(&t.residual_mu);
    if (t.residual.empty()) t.residual.assign(t.partition.num_params(), 0.0f);
    for (const Chunk& chunk : chunks) {
      ps::EncodeOneBit(grad + (chunk.keys.begin - begin),
                       &t.residual[chunk.keys.begin], chunk.keys.size(),
                       encoded.data() + chunk.encoded_offset);
    }
  }
  // A PushPull's answers may wait for the clock's pushes of every worker,
  // this one's later chunks among them: all of its chunks go at once.
  const absl::Duration pull_wait =
      out != nullptr ? (*info)->pull_wait : absl::ZeroDuration();
  const OpContext context{
      conns_.get(),
      std::string(table),
      begin,
      clock,
      options_.rpc_timeout + pull_wait,
      pull_wait > absl::ZeroDuration()
          ? static_cast<int>(chunks.size())
          : options_.max_inflight_per_server * ShardsTouched(chunks)};
  const PushTag tag = OpenPush(lr_scale);
  absl::Status s = RunRetried(assign           ? "assign"
                              : out != nullptr ? "push_pull"
                                               : "push",
                              std::move(chunks), [&](std::vector<Chunk> c) {
                                return std::make_shared<PushOp>(
                                    context, std::move(c), grad, encoded.data(),
                                    tag, out, assign);
                              });
  ClosePush(tag.sequence);
  return s;
}

absl::StatusOr<std::vector<shardps::StatsResponse>> Client::Stats() {
  absl::StatusOr<std::vector<shardps::StatsResponse>> result;
  absl::Status s = Retried("stats", [&] {
    result = StatsOnce();
    return result.status();
  });
  if (!s.ok()) return s;
  return result;
}

absl::StatusOr<std::vector<shardps::StatsResponse>> Client::StatsOnce() {
  std::vector<shardps::StatsResponse> responses(num_servers());
  if (absl::Status s = ForEachServer(
          num_servers(),
          [&](int s) {
            absl::StatusOr<shardps::StatsResponse> answer = ServerStats(s);
            if (!answer.ok()) return answer.status();
            responses[s] = *std::move(answer);
            return absl::OkStatus();
          });
      !s.ok()) {
    return s;
  }
  return responses;
}

absl::StatusOr<shardps::StatsResponse> Client::ServerStats(int s) {
  grpc::ClientContext context;
  context.set_deadline(DeadlineIn(options_.rpc_timeout));
  conns_->Authorize(&context);
  shardps::StatsResponse response;
  if (absl::Status answer = conns_->server(s).Annotate(
          "stats", s,
          conns_->server(s).stub->Stats(&context, StatsRequestWithVersion(),
                                        &response));
      !answer.ok()) {
    return answer;
  }
  return response;
}

}  // namespace ps
