#include "ps/client/client.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <thread>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/memory/memory.h"
#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/notification.h"
#include "ps/wire/float_pieces.h"
#include "ps/wire/grpc_status.h"
#include "ps/wire/value_codec.h"
#include "ps/wire/wire_codec.h"

namespace ps {
namespace {

constexpr char kPullMethod[] = "/shardps.ParameterServer/Pull";
constexpr char kPushMethod[] = "/shardps.ParameterServer/Push";
constexpr char kHealthCheckMethod[] = "/grpc.health.v1.Health/Check";
constexpr int kPullValuesField = shardps::PullResponse::kValuesFieldNumber;
constexpr int kPushGradientField = shardps::PushRequest::kGradientFieldNumber;

absl::Status CheckOptions(const ClientOptions& o) {
  if (o.server_addrs.empty()) {
    return absl::InvalidArgumentError("client needs at least one server");
  }
  if (o.job.empty() || o.job.size() > 128) {
    return absl::InvalidArgumentError("job must have 1 to 128 characters");
  }
  if (o.max_message_bytes <= static_cast<int>(kMaxWireHeaderBytes)) {
    return absl::InvalidArgumentError("max_message_bytes is too small");
  }
  const size_t max_chunk = o.max_message_bytes - kMaxWireHeaderBytes;
  if (o.chunk_bytes < 64 || o.chunk_bytes % 64 != 0 ||
      o.chunk_bytes > max_chunk) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunk_bytes must be a multiple of 64 in [64, ", max_chunk,
                     "], got ", o.chunk_bytes));
  }
  if (o.channels_per_server < 1 || o.max_inflight_per_server < 1) {
    return absl::InvalidArgumentError(
        "channels_per_server and max_inflight_per_server must be >= 1");
  }
  if (o.rpc_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("rpc_timeout must be > 0");
  }
  if (o.pull_encoding != shardps::FLOAT32 && o.pull_encoding != shardps::FP16 &&
      o.pull_encoding != shardps::BF16) {
    return absl::InvalidArgumentError(
        absl::StrCat("pulls take float32, fp16 or bf16, not ",
                     EncodingName(o.pull_encoding)));
  }
  if (!shardps::ValueEncoding_IsValid(o.push_encoding)) {
    return absl::InvalidArgumentError("unknown push encoding");
  }
  if (o.metrics != nullptr &&
      o.metrics->num_shards() != static_cast<int>(o.server_addrs.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("client metrics have ", o.metrics->num_shards(),
                     " shards for ", o.server_addrs.size(), " servers"));
  }
  return absl::OkStatus();
}

// The whole gradient is checked before any chunk leaves, so that a NaN in
// the last chunk cannot leave the first ones applied. Nothing is in flight
// meanwhile and the check is bound by memory bandwidth, so a large gradient
// is checked by two threads, halving the time the servers sit idle.
bool GradientIsFinite(const float* grad, size_t n) {
  constexpr size_t kSplitAbove = 1 << 18;  // 1 MiB: thread start-up is noise
  if (n < kSplitAbove) return AllFinite(UnalignedFloats(grad, n));
  const size_t half = n / 2;
  bool first_ok = true;
  std::thread helper(
      [&] { first_ok = AllFinite(UnalignedFloats(grad, half)); });
  const bool second_ok = AllFinite(UnalignedFloats(grad + half, n - half));
  helper.join();
  return first_ok && second_ok;
}

// UNAVAILABLE: the server is down, restarting or shutting down. CANCELLED:
// this client never cancels its own calls, so the server ended the call,
// as gRPC does to calls caught by a server's shutdown.
// Retries wait at most this long, so that the workers resume within about
// a second of a restarted server, and of each other.
constexpr absl::Duration kMaxBackoff = absl::Seconds(1);

bool Retryable(const absl::Status& s) {
  return absl::IsUnavailable(s) || absl::IsCancelled(s);
}

std::chrono::system_clock::time_point DeadlineIn(absl::Duration d) {
  return absl::ToChronoTime(absl::Now() + d);
}

}  // namespace

struct Client::ServerConn {
  std::string address;
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  std::vector<std::unique_ptr<grpc::GenericStub>> bulk_stubs;  // per channel
  std::unique_ptr<shardps::ParameterServer::Stub> stub;

  // `status` with its message prefixed by what failed and where.
  absl::Status Annotate(absl::string_view what, int shard,
                        const absl::Status& status) const {
    return absl::Status(status.code(),
                        absl::StrCat(what, " on shard ", shard, " at ", address,
                                     ": ", status.message()));
  }
  absl::Status Annotate(absl::string_view what, int shard,
                        const grpc::Status& status) const {
    return Annotate(what, shard, FromGrpcStatus(status));
  }
};

// One Pull or Push: its chunk calls, the window of those in flight, and the
// first error. Shared by the caller and every callback so that whichever
// finishes last frees it.
class Client::BulkOp : public std::enable_shared_from_this<BulkOp> {
 public:
  struct Chunk {
    int shard;
    int channel;
    KeyRange keys;
    // ONEBIT pushes: where the chunk's encoded gradient starts in `encoded`.
    size_t encoded_offset = 0;
  };

  BulkOp(const Client& client, bool is_push, absl::string_view table,
         uint64_t base_key, float* out, const float* grad, uint64_t clock,
         const PushTag& tag, int window, std::vector<Chunk> chunks,
         absl::Duration timeout, const char* encoded)
      : client_(client),
        timeout_(timeout),
        encoded_(encoded),
        is_push_(is_push),
        tag_(tag),
        table_(table),
        base_key_(base_key),
        out_(out),
        grad_(grad),
        clock_(clock),
        window_(window),
        chunks_(std::move(chunks)) {}

  // After Run: the chunks that did not succeed (failed, or never launched
  // after a failure), in their order, for a retry to send again.
  std::vector<Chunk> Unfinished() {
    absl::MutexLock lock(&mu_);
    std::vector<Chunk> out;
    for (size_t i = 0; i < chunks_.size(); ++i) {
      if (!succeeded_[i]) out.push_back(chunks_[i]);
    }
    return out;
  }

  // Runs every chunk and waits for all of them, or gives up on stragglers
  // (see kStragglerGrace); either way nothing touches the caller's buffers
  // once this returns.
  absl::Status Run() {
    calls_.resize(chunks_.size());
    deadlines_.resize(chunks_.size());
    started_.resize(chunks_.size());
    {
      absl::MutexLock lock(&mu_);
      finished_.assign(chunks_.size(), false);
      succeeded_.assign(chunks_.size(), false);
    }
    std::vector<size_t> launch;
    {
      absl::MutexLock lock(&mu_);
      TakeLaunchesLocked(&launch);
    }
    for (size_t i : launch) Launch(i);
    absl::MutexLock lock(&mu_);
    const absl::Condition finished(this, &BulkOp::FinishedLocked);
    while (
        !mu_.AwaitWithDeadline(finished, latest_deadline_ + kStragglerGrace)) {
      if (absl::Now() >= latest_deadline_ + kStragglerGrace) {
        AbandonLocked();
        break;
      }
    }
    return error_;
  }

 private:
  // gRPC ends a call at its deadline, except one whose message is stuck
  // mid-write to a peer that stopped reading (a hung server): that call ends
  // only when the connection dies. Run() gives such calls this long past
  // their deadline, then returns DEADLINE_EXCEEDED; they finish in the
  // background, holding a reference to this op but not to the caller.
  static constexpr absl::Duration kStragglerGrace = absl::Seconds(1);

  struct Call {
    grpc::ClientContext context;
    grpc::ByteBuffer request;
    grpc::ByteBuffer response;
  };

  bool FinishedLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return inflight_ == 0 && callbacks_busy_ == 0 &&
           (next_ == chunks_.size() || !error_.ok());
  }

  void AbandonLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    abandoned_ = true;
    for (size_t i = 0; i < next_; ++i) {
      if (!finished_[i] && error_.ok()) {
        const Chunk& chunk = chunks_[i];
        error_ = absl::DeadlineExceededError(absl::StrCat(
            Describe(chunk), " on shard ", chunk.shard, " at ",
            client_.servers_[chunk.shard]->address,
            ": no answer within the deadline (the server stopped reading)"));
      }
    }
    // Callbacks already past the abandoned_ check may still be writing to
    // the caller's buffer or launching calls; let them finish first. Then the
    // calls still in flight become the Client's stragglers.
    mu_.Await(absl::Condition(
        +[](int* busy) { return *busy == 0; }, &callbacks_busy_));
    client_.AddStragglers(inflight_);
  }

  void TakeLaunchesLocked(std::vector<size_t>* launch)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    while (error_.ok() && next_ < chunks_.size() && inflight_ < window_) {
      const absl::Time deadline = absl::Now() + timeout_;
      deadlines_[next_] = deadline;
      latest_deadline_ = std::max(latest_deadline_, deadline);
      launch->push_back(next_++);
      ++inflight_;
    }
  }

  std::string Describe(const Chunk& chunk) const {
    return absl::StrCat(is_push_ ? "push" : "pull", " of '", table_, "' keys [",
                        chunk.keys.begin, ", ", chunk.keys.end, ")");
  }

  void Launch(size_t index) {
    const Chunk& chunk = chunks_[index];
    ServerConn& server = *client_.servers_[chunk.shard];
    calls_[index] = std::make_unique<Call>();
    started_[index] = absl::Now();
    Call& call = *calls_[index];
    call.context.set_deadline(absl::ToChronoTime(deadlines_[index]));
    client_.Authorize(&call.context);
    const std::string* method;
    if (is_push_) {
      method = &push_method_;
      EncodePush(chunk, &call.request);
      client_.push_bytes_.fetch_add(call.request.Length(),
                                    std::memory_order_relaxed);
    } else {
      method = &pull_method_;
      shardps::PullRequest pull;
      FillHeader(chunk, &pull);
      pull.set_encoding(client_.options_.pull_encoding);
      call.request = SerializeSmallMessage(pull);
    }
    // The callback owns a reference: a call outliving Run() keeps its
    // context alive. gRPC holds its own reference to the call while it runs
    // the callback, so the op (and its contexts) may be freed from there.
    server.bulk_stubs[chunk.channel]->UnaryCall(
        &call.context, *method, grpc::StubOptions(), &call.request,
        &call.response,
        [self = shared_from_this(), index](grpc::Status status) {
          self->OnDone(index, status);
        });
  }

  template <typename Message>
  void FillHeader(const Chunk& chunk, Message* m) const {
    m->set_job(client_.options_.job);
    m->set_table(table_);
    m->set_begin(chunk.keys.begin);
    m->set_end(chunk.keys.end);
    m->set_worker(client_.options_.worker);
    m->set_clock(clock_);
  }

  // The gradient is copied once, into a reused buffer that gRPC sends from
  // and releases whenever it is done with it. Sending the caller's memory in
  // place would tie its lifetime to the connection: a call that times out
  // against a hung server leaves its bytes queued on the socket.
  void EncodePush(const Chunk& chunk, grpc::ByteBuffer* request) {
    shardps::PushRequest header;
    FillHeader(chunk, &header);
    header.set_session(tag_.session);
    header.set_sequence(tag_.sequence);
    header.set_acked_below(tag_.acked_below);
    if (tag_.lr_scale != 1.0f) header.set_learning_rate_scale(tag_.lr_scale);
    const shardps::ValueEncoding encoding = client_.options_.push_encoding;
    header.set_encoding(encoding);
    const size_t n = chunk.keys.size();
    const size_t payload = EncodedBytes(encoding, n);
    PooledBuffer buffer =
        client_.push_buffers_.Acquire(kMaxWireHeaderBytes + payload);
    char* values = buffer.data() + kMaxWireHeaderBytes;
    const float* grad = grad_ + (chunk.keys.begin - base_key_);
    switch (encoding) {
      case shardps::FP16:
        EncodeFp16(grad, n, values);
        break;
      case shardps::BF16:
        EncodeBf16(grad, n, values);
        break;
      case shardps::ONEBIT:
        std::memcpy(values, encoded_ + chunk.encoded_offset, payload);
        break;
      default:
        std::memcpy(values, grad, payload);
    }
    const size_t header_bytes =
        WriteHeaderBefore(header, kPushGradientField, payload, values);
    grpc::Slice slice = std::move(buffer).ToSlice(
        kMaxWireHeaderBytes - header_bytes, header_bytes + payload);
    *request = grpc::ByteBuffer(&slice, 1);
  }

  absl::Status DecodePull(const Chunk& chunk, const grpc::ByteBuffer& reply) {
    SplitMessage split;
    if (absl::Status s = SplitBulkField(reply, kPullValuesField, &split);
        !s.ok()) {
      return s;
    }
    size_t got = 0;
    for (absl::string_view piece : split.bulk) got += piece.size();
    const shardps::ValueEncoding encoding = client_.options_.pull_encoding;
    const size_t n = chunk.keys.size();
    const size_t want = EncodedBytes(encoding, n);
    if (got != want) {
      return absl::DataLossError(absl::StrCat("server sent ", got, " bytes of ",
                                              EncodingName(encoding),
                                              " values, expected ", want));
    }
    float* out = out_ + (chunk.keys.begin - base_key_);
    if (encoding == shardps::FLOAT32) {
      char* dst = reinterpret_cast<char*>(out);
      for (absl::string_view piece : split.bulk) {
        std::memcpy(dst, piece.data(), piece.size());
        dst += piece.size();
      }
      return absl::OkStatus();
    }
    // The 16-bit decoders read one contiguous run.
    PooledBuffer gathered;
    const absl::string_view in =
        Contiguous(split.bulk, client_.push_buffers_, &gathered);
    return DecodeValues(encoding, in.data(), n, out);
  }

  // Each call's context is destroyed here, in its own completion callback
  // (gRPC keeps its own reference to the call meanwhile), while the Client
  // is known to be alive: a context holds a channel reference, and the last
  // reference to a channel must not be dropped on one of gRPC's callback
  // threads, which the channel's teardown joins.
  void OnDone(size_t index, const grpc::Status& status) {
    bool abandoned;
    {
      absl::MutexLock lock(&mu_);
      abandoned = abandoned_;
      if (abandoned) {
        --inflight_;
      } else {
        ++callbacks_busy_;
      }
    }
    if (abandoned) {
      // Run() has returned: the caller's buffers may be gone; the Client
      // waits for its stragglers before it closes its channels.
      calls_[index].reset();
      client_.StragglerDone();
      return;
    }
    const Chunk& chunk = chunks_[index];
    const ServerConn& server = *client_.servers_[chunk.shard];
    if (client_.options_.tracer != nullptr) {
      client_.options_.tracer->Record(is_push_ ? "push_rpc" : "pull_rpc",
                                      "client", started_[index], absl::Now(),
                                      "shard", chunk.shard);
    }
    if (client_.options_.metrics != nullptr) {
      client_.options_.metrics->RecordCall(
          is_push_, chunk.shard, status.ok(), calls_[index]->request.Length(),
          calls_[index]->response.Length(), absl::Now() - started_[index]);
    }
    absl::Status result;
    if (!status.ok()) {
      result = server.Annotate(Describe(chunk), chunk.shard, status);
    } else if (!is_push_) {
      client_.pull_bytes_.fetch_add(calls_[index]->response.Length(),
                                    std::memory_order_relaxed);
      result = DecodePull(chunk, calls_[index]->response);
      if (!result.ok()) {
        result = server.Annotate(Describe(chunk), chunk.shard, result);
      }
    }
    calls_[index].reset();
    std::vector<size_t> launch;
    {
      absl::MutexLock lock(&mu_);
      --inflight_;
      finished_[index] = true;
      succeeded_[index] = result.ok();
      if (!result.ok() && error_.ok()) error_ = result;
      TakeLaunchesLocked(&launch);
    }
    for (size_t i : launch) Launch(i);
    absl::MutexLock lock(&mu_);
    --callbacks_busy_;
  }

  const Client& client_;
  const absl::Duration timeout_;  // of each call
  // ONEBIT pushes: every chunk's gradient, encoded once before the first
  // launch (the encoding updates the residual, so a retry must resend the
  // same bytes rather than encode again).
  const char* const encoded_;
  const bool is_push_;
  const PushTag tag_;
  const std::string table_;
  const uint64_t base_key_;  // key of out_[0] / grad_[0]
  float* const out_;
  const float* const grad_;
  const uint64_t clock_;
  const int window_;
  const std::string pull_method_ = kPullMethod;
  const std::string push_method_ = kPushMethod;
  const std::vector<Chunk> chunks_;
  std::vector<std::unique_ptr<Call>> calls_;  // one per chunk, once launched
  std::vector<absl::Time> deadlines_;         // written before each launch
  std::vector<absl::Time> started_;           // when each call was launched

  absl::Mutex mu_;
  size_t next_ ABSL_GUARDED_BY(mu_) = 0;
  int inflight_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> finished_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> succeeded_ ABSL_GUARDED_BY(mu_);
  absl::Time latest_deadline_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  bool abandoned_ ABSL_GUARDED_BY(mu_) = false;
  // OnDone calls between their abandoned_ check and their last launch.
  int callbacks_busy_ ABSL_GUARDED_BY(mu_) = 0;
};

Client::Client(ClientOptions options, uint64_t session)
    : options_(std::move(options)), session_(session) {}

Client::~Client() {
  // Calls abandoned by a Pull/Push (stuck behind a hung server) end when
  // keepalive closes that connection, within about 40 s.
  absl::MutexLock lock(&stragglers_mu_);
  stragglers_mu_.Await(absl::Condition(
      +[](int* n) { return *n == 0; }, &stragglers_));
}

void Client::AddStragglers(int n) const {
  absl::MutexLock lock(&stragglers_mu_);
  stragglers_ += n;
}

void Client::StragglerDone() const {
  absl::MutexLock lock(&stragglers_mu_);
  --stragglers_;
}

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(ClientOptions options) {
  if (absl::Status s = CheckOptions(options); !s.ok()) return s;
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      MakeChannelCredentials(options.tls);
  if (!credentials.ok()) return credentials.status();
  // Random, so that a restarted worker's pushes are never mistaken for
  // retries of its previous incarnation's.
  absl::BitGen random;
  const uint64_t session =
      absl::Uniform<uint64_t>(absl::IntervalClosed, random, 1, ~uint64_t{0});
  auto client = absl::WrapUnique(new Client(std::move(options), session));
  const ClientOptions& o = client->options_;
  for (const std::string& address : o.server_addrs) {
    auto conn = std::make_unique<ServerConn>();
    conn->address = address;
    for (int c = 0; c < o.channels_per_server; ++c) {
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
      conn->channels.push_back(
          grpc::CreateCustomChannel(address, *credentials, args));
      conn->bulk_stubs.push_back(
          std::make_unique<grpc::GenericStub>(conn->channels.back()));
    }
    conn->stub = shardps::ParameterServer::NewStub(conn->channels[0]);
    client->servers_.push_back(std::move(conn));
  }
  return client;
}

void Client::Authorize(grpc::ClientContext* context) const {
  if (!options_.auth_token.empty()) {
    context->AddMetadata(kAuthMetadataKey, BearerValue(options_.auth_token));
  }
}

absl::Status Client::WaitReady(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  // All servers at once: connection set-up is mostly waiting, and a worker
  // among many starting together should not pay it once per server.
  std::vector<absl::Status> statuses(num_servers());
  std::vector<std::thread> waiters;
  for (int s = 0; s < num_servers(); ++s) {
    waiters.emplace_back([this, s, deadline, &statuses] {
      statuses[s] = WaitServer(s, deadline);
    });
  }
  for (std::thread& t : waiters) t.join();
  for (const absl::Status& status : statuses) {
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

absl::Status Client::WaitServer(int s, absl::Time deadline) {
  ServerConn& server = *servers_[s];
  grpc::Status last;
  while (true) {
    grpc::ClientContext context;
    context.set_wait_for_ready(true);
    context.set_deadline(absl::ToChronoTime(deadline));
    Authorize(&context);
    // An empty HealthCheckRequest asks about the server as a whole.
    grpc::Slice empty;
    grpc::ByteBuffer request(&empty, 1), response;
    absl::Notification done;
    server.bulk_stubs[0]->UnaryCall(&context, kHealthCheckMethod,
                                    grpc::StubOptions(), &request, &response,
                                    [&](grpc::Status status) {
                                      last = std::move(status);
                                      done.Notify();
                                    });
    done.WaitForNotification();
    if (last.ok()) {
      grpc::Slice reply;
      // HealthCheckResponse{status: SERVING} encodes as 08 01.
      if (response.DumpToSingleSlice(&reply).ok() && reply.size() == 2 &&
          reply.begin()[0] == 0x08 && reply.begin()[1] == 0x01) {
        return absl::OkStatus();
      }
      last = grpc::Status(grpc::StatusCode::UNAVAILABLE, "not serving yet");
    }
    if (absl::Now() >= deadline) {
      return server.Annotate("waiting for readiness", s, last);
    }
    absl::SleepFor(absl::Milliseconds(20));  // polling interval
  }
}

absl::Status Client::CreateTable(const TableOptions& table) {
  return Retrying("table creation", [&] { return CreateTableOnce(table); });
}

absl::Status Client::CreateTableOnce(const TableOptions& table) {
  const int n = num_servers();
  std::vector<grpc::ClientContext> contexts(n);
  std::vector<shardps::CreateTableRequest> requests(n);
  std::vector<shardps::CreateTableResponse> responses(n);
  std::vector<grpc::Status> statuses(n);
  absl::BlockingCounter pending(n);
  for (int s = 0; s < n; ++s) {
    shardps::CreateTableRequest& r = requests[s];
    r.set_job(options_.job);
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
    contexts[s].set_deadline(DeadlineIn(options_.rpc_timeout));
    Authorize(&contexts[s]);
    servers_[s]->stub->async()->CreateTable(
        &contexts[s], &requests[s], &responses[s],
        [&statuses, &pending, s](grpc::Status status) {
          statuses[s] = std::move(status);
          pending.DecrementCount();
        });
  }
  pending.Wait();
  for (int s = 0; s < n; ++s) {
    if (!statuses[s].ok()) {
      return servers_[s]->Annotate(
          absl::StrCat("creating table '", table.name, "'"), s, statuses[s]);
    }
  }
  const shardps::ConsistencyConfig& c = table.consistency;
  const absl::Duration pull_wait =
      c.mode() != shardps::CONSISTENCY_ASYNC
          ? absl::Seconds(c.straggler_timeout_seconds())
          : absl::ZeroDuration();
  absl::MutexLock lock(&tables_mu_);
  tables_[table.name] = absl::WrapUnique(
      new TableInfo(RangePartition(table.num_params, n), pull_wait));
  return absl::OkStatus();
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
            servers_[s]->address, " has ", found->num_params(), " keys over ",
            found->num_shards(), " shards; this worker expects ",
            table.num_params, " over ", n));
      }
    }
    if (missing < 0) break;
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("table '", table.name, "' was not created within ",
                       absl::FormatDuration(timeout), ": shard ", missing,
                       " at ", servers_[missing]->address,
                       " still has no such table (is rank 0 running?)"));
    }
    // Polling interval: short, because every rank but 0 starts here.
    absl::SleepFor(absl::Milliseconds(10));
  }
  absl::MutexLock lock(&tables_mu_);
  tables_[table.name] = absl::WrapUnique(
      new TableInfo(RangePartition(table.num_params, n), absl::ZeroDuration()));
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

absl::Status Client::RunBulk(bool is_push, absl::string_view table,
                             uint64_t begin, uint64_t end, float* out,
                             const float* grad, uint64_t clock,
                             const PushTag& tag) {
  absl::StatusOr<TableInfo*> info = FindTable(table, begin, end);
  if (!info.ok()) return info.status();
  const std::vector<ShardSlice> pieces = (*info)->partition.Split({begin, end});
  // A pull may wait on the servers for the other workers' pushes.
  const absl::Duration timeout =
      options_.rpc_timeout +
      (is_push ? absl::ZeroDuration() : (*info)->pull_wait);
  if (pieces.empty()) return absl::OkStatus();
  // Chunks sit on a global grid of chunk_floats keys; they are ordered
  // round-robin over the shards so that every shard starts at once.
  const uint64_t chunk_floats = options_.chunk_bytes / sizeof(float);
  std::vector<std::vector<BulkOp::Chunk>> per_shard(pieces.size());
  size_t longest = 0;
  for (size_t p = 0; p < pieces.size(); ++p) {
    const ShardSlice& piece = pieces[p];
    int channel = 0;
    for (uint64_t at = piece.keys.begin; at < piece.keys.end;) {
      const uint64_t stop =
          std::min(piece.keys.end, (at / chunk_floats + 1) * chunk_floats);
      per_shard[p].push_back({piece.shard, channel, {at, stop}});
      channel = (channel + 1) % options_.channels_per_server;
      at = stop;
    }
    longest = std::max(longest, per_shard[p].size());
  }
  std::vector<BulkOp::Chunk> chunks;
  for (size_t i = 0; i < longest; ++i) {
    for (const auto& shard_chunks : per_shard) {
      if (i < shard_chunks.size()) chunks.push_back(shard_chunks[i]);
    }
  }
  const int window =
      options_.max_inflight_per_server * static_cast<int>(pieces.size());
  PooledBuffer encoded;
  if (is_push && options_.push_encoding == shardps::ONEBIT) {
    size_t bytes = 0;
    for (BulkOp::Chunk& chunk : chunks) {
      chunk.encoded_offset = bytes;
      bytes += EncodedBytes(shardps::ONEBIT, chunk.keys.size());
    }
    encoded = push_buffers_.Acquire(bytes);
    TableInfo& t = **info;
    absl::MutexLock lock(&t.residual_mu);
    if (t.residual.empty()) t.residual.assign(t.partition.num_params(), 0.0f);
    for (const BulkOp::Chunk& chunk : chunks) {
      EncodeOneBit(grad + (chunk.keys.begin - begin),
                   &t.residual[chunk.keys.begin], chunk.keys.size(),
                   encoded.data() + chunk.encoded_offset);
    }
  }
  // A retry sends only the chunks that have not succeeded yet.
  return Retrying(is_push ? "push" : "pull", [&] {
    auto op = std::make_shared<BulkOp>(*this, is_push, table, begin, out, grad,
                                       clock, tag, window, std::move(chunks),
                                       timeout, encoded.data());
    absl::Status s = op->Run();
    chunks = op->Unfinished();
    return s;
  });
}

absl::Status Client::Pull(absl::string_view table, uint64_t begin, uint64_t end,
                          float* out, uint64_t clock) {
  return RunBulk(/*is_push=*/false, table, begin, end, out, nullptr, clock,
                 PushTag{});
}

absl::Status Client::Retrying(absl::string_view what,
                              absl::FunctionRef<absl::Status()> call) const {
  absl::Status s = call();
  if (!Retryable(s) || options_.retry_give_up <= absl::ZeroDuration()) {
    return s;
  }
  const absl::Time give_up = absl::Now() + options_.retry_give_up;
  absl::Duration backoff = absl::Milliseconds(100);
  absl::BitGen jitter;
  for (int attempt = 1; Retryable(s); ++attempt) {
    const absl::Time now = absl::Now();
    if (now >= give_up) {
      return absl::UnavailableError(absl::StrCat(
          s.message(), "; gave up retrying the ", what, " after ", attempt,
          " attempts over ", absl::FormatDuration(options_.retry_give_up)));
    }
    const absl::Duration wait =
        std::min(backoff * absl::Uniform(jitter, 0.5, 1.5), give_up - now);
    absl::FPrintF(
        stderr, "shardps client: %s failed: %s; retry in %s (gives up in %s)\n",
        what, s.message(), absl::FormatDuration(wait),
        absl::FormatDuration(give_up - now));
    if (options_.metrics != nullptr) options_.metrics->RecordRetry();
    absl::SleepFor(wait);
    backoff = std::min(backoff * 2, kMaxBackoff);
    s = call();
  }
  return s;
}

absl::Status Client::Push(absl::string_view table, uint64_t begin, uint64_t end,
                          const float* grad, uint64_t clock, float lr_scale) {
  if (begin < end && !GradientIsFinite(grad, end - begin)) {
    return absl::InvalidArgumentError(
        absl::StrCat("gradient for '", table, "' keys [", begin, ", ", end,
                     ") contains NaN or Inf; nothing was sent"));
  }
  if (!std::isfinite(lr_scale) || lr_scale < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "learning rate scale must be finite and >= 0, got ", lr_scale));
  }
  PushTag tag{session_, 0, 0, lr_scale};
  {
    absl::MutexLock lock(&push_mu_);
    tag.sequence = next_sequence_++;
    open_pushes_.insert(tag.sequence);
  }
  absl::Cleanup close = [&] {
    absl::MutexLock lock(&push_mu_);
    open_pushes_.erase(tag.sequence);
  };
  {
    // The oldest push still open here (this one, or an older one running on
    // another thread): servers may forget everything below it.
    absl::MutexLock lock(&push_mu_);
    tag.acked_below = *open_pushes_.begin();
  }
  return RunBulk(/*is_push=*/true, table, begin, end, nullptr, grad, clock,
                 tag);
}

absl::StatusOr<std::vector<shardps::StatsResponse>> Client::Stats() {
  absl::StatusOr<std::vector<shardps::StatsResponse>> result;
  absl::Status s = Retrying("stats", [&] {
    result = StatsOnce();
    return result.status();
  });
  if (!s.ok()) return s;
  return result;
}

absl::StatusOr<std::vector<shardps::StatsResponse>> Client::StatsOnce() {
  const int n = num_servers();
  std::vector<grpc::ClientContext> contexts(n);
  shardps::StatsRequest request;
  request.set_job(options_.job);
  std::vector<shardps::StatsResponse> responses(n);
  std::vector<grpc::Status> statuses(n);
  absl::BlockingCounter pending(n);
  for (int s = 0; s < n; ++s) {
    contexts[s].set_deadline(DeadlineIn(options_.rpc_timeout));
    Authorize(&contexts[s]);
    servers_[s]->stub->async()->Stats(
        &contexts[s], &request, &responses[s],
        [&statuses, &pending, s](grpc::Status status) {
          statuses[s] = std::move(status);
          pending.DecrementCount();
        });
  }
  pending.Wait();
  for (int s = 0; s < n; ++s) {
    if (!statuses[s].ok()) {
      return servers_[s]->Annotate("stats", s, statuses[s]);
    }
  }
  return responses;
}

}  // namespace ps
