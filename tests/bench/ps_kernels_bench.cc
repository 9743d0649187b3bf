// Google Benchmark micro-benchmarks of the server's per-byte kernels: what a
// pushed chunk costs once it has arrived, without the network; and what
// counting a call in the Prometheus metrics costs.
//   build/bin/ps_kernels_bench
#include <benchmark/benchmark.h>

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "ps/client/row_buckets.h"
#include "ps/server/server_metrics.h"
#include "ps/table/shard_store.h"
#include "ps/table/sparse_rows.h"
#include "ps/table/updater.h"
#include "ps/wire/float_pieces.h"
#include "ps/wire/value_codec.h"

namespace ps {
namespace {

// A float payload starting 1 byte into a buffer, as gRPC slices deliver it.
struct Payload {
  explicit Payload(size_t n) : storage(n * sizeof(float) + 1, '\0') {
    for (size_t i = 0; i < n; ++i) {
      const float v = 1e-3f * static_cast<float>(i % 97);
      std::memcpy(&storage[1 + i * sizeof(float)], &v, sizeof v);
    }
  }
  absl::string_view bytes() const {
    return absl::string_view(storage).substr(1);
  }
  std::string storage;
};

void BM_AllFinite(benchmark::State& state) {
  const size_t n = state.range(0);
  Payload payload(n);
  for (auto _ : state) {
    benchmark::DoNotOptimize(
        AllFinite(UnalignedFloats(payload.bytes().data(), n)));
  }
  state.SetBytesProcessed(state.iterations() * n * sizeof(float));
}
BENCHMARK(BM_AllFinite)->Arg(1 << 18)->Arg(10 << 20);

// A push's chunk copied into its send buffer or slot, checked on the way.
void BM_CopyAndCheckFinite(benchmark::State& state) {
  const size_t n = state.range(0);
  Payload payload(n);
  std::vector<char> to(n * sizeof(float));
  for (auto _ : state) {
    benchmark::DoNotOptimize(CopyAndCheckFinite(
        UnalignedFloats(payload.bytes().data(), n), to.data()));
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * n * sizeof(float));
}
BENCHMARK(BM_CopyAndCheckFinite)->Arg(1 << 18)->Arg(10 << 20);

void BM_SgdApply(benchmark::State& state) {
  const size_t n = state.range(0);
  Payload payload(n);
  std::vector<float> weights(n, 1.0f);
  SgdUpdater sgd(1e-6f);
  for (auto _ : state) {
    sgd.Apply(0, weights.data(), UnalignedFloats(payload.bytes().data(), n),
              1.0f);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * n * sizeof(float));
}
BENCHMARK(BM_SgdApply)->Arg(1 << 18)->Arg(10 << 20);

// A whole 1 MiB push into a shard of state.range(0) keys: validation, stripe
// locks and the update, with the chunk cycling over the shard.
void BM_ShardStorePush(benchmark::State& state) {
  const uint64_t keys = state.range(0);
  const uint64_t chunk = 1 << 18;
  ShardStore store({0, keys}, std::make_unique<SgdUpdater>(1e-6f),
                   std::vector<float>(keys, 1.0f));
  Payload payload(chunk);
  // Two pieces split mid-float, as the transport may cut them.
  const absl::string_view all = payload.bytes();
  std::vector<absl::string_view> pieces = {all.substr(0, 4097),
                                           all.substr(4097)};
  uint64_t at = 0;
  for (auto _ : state) {
    FloatPieces gradient(pieces);
    benchmark::DoNotOptimize(store.Push({at, at + chunk}, gradient));
    at = (at + chunk) % keys;
  }
  state.SetBytesProcessed(state.iterations() * chunk * sizeof(float));
}
BENCHMARK(BM_ShardStorePush)->Arg(1 << 20)->Arg(10 << 20);

// A sparse push or pull as one server call carries it: state.range(1)
// distinct uniform ids of 8 drawn batches, out of 800k rows of dim
// state.range(0) that all exist (SGD). What the server spends per row:
// finding each id's row, then updating or copying it. A table that cannot
// be made skips the benchmark.
class SparseRowsCall {
 public:
  explicit SparseRowsCall(benchmark::State& state)
      : dim(state.range(0)), per_call(state.range(1)) {
    constexpr uint64_t kRows = 800000;
    SparseRowsOptions options;
    options.dim = dim;
    options.max_rows = kRows;
    options.optimizer.set_name("sgd");
    options.optimizer.set_learning_rate(1e-6f);
    rows_ = *SparseRows::Create(options);
    std::mt19937_64 random(7);
    std::vector<uint64_t> all(kRows);
    for (uint64_t& id : all) id = random();
    const std::vector<float> init(kRows * dim, 0.0f);
    ok_ =
        rows_->Push(all, UnalignedFloats(init.data(), init.size()), 1.0f).ok();
    if (!ok_) state.SkipWithError("cannot create the rows");
    batches_.resize(8);
    for (std::vector<uint64_t>& ids : batches_) {
      std::shuffle(all.begin(), all.end(), random);
      ids.assign(all.begin(), all.begin() + per_call);
    }
  }
  bool ok() const { return ok_; }
  SparseRows& rows() { return *rows_; }
  const std::vector<uint64_t>& next() { return batches_[b_++ % 8]; }

  const uint32_t dim;
  const size_t per_call;

 private:
  std::unique_ptr<SparseRows> rows_;
  std::vector<std::vector<uint64_t>> batches_;
  size_t b_ = 0;
  bool ok_ = false;
};

void BM_SparseRowsPush(benchmark::State& state) {
  SparseRowsCall call(state);
  if (!call.ok()) return;
  const uint32_t dim = call.dim;
  const size_t per_call = call.per_call;
  Payload payload(per_call * dim);
  for (auto _ : state) {
    benchmark::DoNotOptimize(
        call.rows()
            .Push(call.next(),
                  UnalignedFloats(payload.bytes().data(), per_call * dim), 1.0f)
            .ok());
  }
  state.SetItemsProcessed(state.iterations() * per_call);
}
BENCHMARK(BM_SparseRowsPush)->Args({16, 14336})->Args({64, 3584});

void BM_SparseRowsPull(benchmark::State& state) {
  SparseRowsCall call(state);
  if (!call.ok()) return;
  const uint32_t dim = call.dim;
  const size_t per_call = call.per_call;
  std::vector<float> out(per_call * dim);
  for (auto _ : state) {
    benchmark::DoNotOptimize(
        call.rows().Pull(call.next(), /*create=*/false, out.data()).ok());
  }
  state.SetItemsProcessed(state.iterations() * per_call);
}
BENCHMARK(BM_SparseRowsPull)->Args({16, 14336})->Args({64, 3584});

// The client's share of a sparse push bucket: de-duplicating
// state.range(0) uniform ids out of state.range(1), as the lane sending it
// does (out of 4096, most ids repeat).
void BM_Deduplicate(benchmark::State& state) {
  const size_t n = state.range(0);
  std::mt19937_64 random(7);
  std::vector<uint64_t> ids(n);
  for (uint64_t& id : ids) id = random() % state.range(1);
  std::vector<uint32_t> positions(n);
  for (size_t i = 0; i < n; ++i) positions[i] = i;
  for (auto _ : state) {
    benchmark::DoNotOptimize(Deduplicate(ids, positions).ids.size());
  }
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_Deduplicate)->Args({14336, 10000000})->Args({14336, 4096});

// The optimizers' update rules over a 1 MiB run (state.range(0) selects
// momentum, adagrad, adam).
void BM_OptimizerApply(benchmark::State& state) {
  const size_t n = 1 << 18;
  Payload payload(n);
  shardps::OptimizerConfig c;
  c.set_learning_rate(1e-3f);
  switch (state.range(0)) {
    case 0:
      c.set_name("momentum");
      c.set_momentum(0.9f);
      break;
    case 1:
      c.set_name("adagrad");
      c.set_epsilon(1e-8f);
      break;
    default:
      c.set_name("adam");
      c.set_beta1(0.9f);
      c.set_beta2(0.999f);
      c.set_epsilon(1e-8f);
  }
  std::unique_ptr<Updater> updater = *MakeUpdater(c, n);
  std::vector<float> weights(n, 1.0f);
  for (auto _ : state) {
    updater->Apply(0, weights.data(),
                   UnalignedFloats(payload.bytes().data(), n), 1.0f);
    benchmark::ClobberMemory();
  }
  state.SetLabel(c.name());
  state.SetBytesProcessed(state.iterations() * n * sizeof(float));
}
BENCHMARK(BM_OptimizerApply)->Arg(0)->Arg(1)->Arg(2);

// Wire codecs over 1 MiB of float32 values (bytes processed are float32
// bytes): state.range(0) selects fp16, bf16, onebit.
void BM_Encode(benchmark::State& state) {
  const size_t n = 1 << 18;
  std::vector<float> values(n), residual(n, 0.0f);
  for (size_t i = 0; i < n; ++i)
    values[i] = 1e-3f * static_cast<float>(i % 97) - 0.04f;
  const auto encoding = static_cast<shardps::ValueEncoding>(state.range(0));
  std::vector<char> out(EncodedBytes(encoding, n));
  for (auto _ : state) {
    switch (encoding) {
      case shardps::FP16:
        EncodeFp16(values.data(), n, out.data());
        break;
      case shardps::BF16:
        EncodeBf16(values.data(), n, out.data());
        break;
      default:
        EncodeOneBit(values.data(), residual.data(), n, out.data());
    }
    benchmark::ClobberMemory();
  }
  state.SetLabel(std::string(EncodingName(encoding)));
  state.SetBytesProcessed(state.iterations() * n * sizeof(float));
}
BENCHMARK(BM_Encode)
    ->Arg(shardps::FP16)
    ->Arg(shardps::BF16)
    ->Arg(shardps::ONEBIT);

void BM_Decode(benchmark::State& state) {
  const size_t n = 1 << 18;
  const auto encoding = static_cast<shardps::ValueEncoding>(state.range(0));
  std::vector<char> in(EncodedBytes(encoding, n), '\x11');
  std::vector<float> out(n);
  for (auto _ : state) {
    benchmark::DoNotOptimize(
        DecodeValues(encoding, in.data(), n, out.data()).ok());
    benchmark::ClobberMemory();
  }
  state.SetLabel(std::string(EncodingName(encoding)));
  state.SetBytesProcessed(state.iterations() * n * sizeof(float));
}
BENCHMARK(BM_Decode)
    ->Arg(shardps::FP16)
    ->Arg(shardps::BF16)
    ->Arg(shardps::ONEBIT);

// What --metrics_port adds to every answered call (two threads: the
// latency histogram takes a lock).
void BM_ServerMetricsRecordCall(benchmark::State& state) {
  static prometheus::Registry registry;
  static ServerMetrics metrics(registry);
  for (auto _ : state) {
    metrics.RecordCall(RpcMethod::kPush, absl::StatusCode::kOk,
                       absl::Microseconds(250));
  }
}
BENCHMARK(BM_ServerMetricsRecordCall)->Threads(1)->Threads(2);

}  // namespace
}  // namespace ps

BENCHMARK_MAIN();
