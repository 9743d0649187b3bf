// libFuzzer target: encoded Pull, Push, PushPull and CreateTable requests, as a
// server receives them, against one ParameterService and its ShardStores.
// Besides what the sanitizers catch, it checks that a rejected request changes
// no table's version.
//
// Input: one byte picks the request kind, the rest is the encoded message.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

#include "proto/shardps.pb.h"
#include "ps/server/service.h"

namespace {

ps::ServiceOptions FuzzOptions() {
  ps::ServiceOptions options;
  options.job = "fuzz";
  // Fuzzed specs must not be able to ask for gigabytes.
  options.limits.max_tables = 8;
  options.limits.max_bytes = 64 << 20;
  return options;
}

// One service for the whole run, with a table the seeds address.
ps::ParameterService& Service() {
  static ps::ParameterService service(FuzzOptions());
  static const bool created = [] {
    shardps::CreateTableRequest spec;
    spec.set_job("fuzz");
    spec.set_table("t");
    spec.set_num_params(1000);
    spec.set_num_shards(2);
    spec.set_shard_index(0);
    spec.mutable_optimizer()->set_name("sgd");
    spec.mutable_optimizer()->set_learning_rate(0.5f);
    bool fresh;
    return service.registry().CreateTable(spec, &fresh).ok();
  }();
  if (!created) __builtin_trap();
  return service;
}

uint64_t TotalVersion(ps::ParameterService& service) {
  shardps::StatsResponse stats;
  service.registry().FillStats(&stats);
  uint64_t v = 0;
  for (const shardps::TableStats& t : stats.tables()) v += t.version();
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  ps::ParameterService& service = Service();
  const uint8_t kind = data[0] % 4;
  grpc::Slice slice(data + 1, size - 1);
  grpc::ByteBuffer request(&slice, 1), response;
  const uint64_t before = TotalVersion(service);
  absl::Status status;
  // A pull (or PushPull) on a sync/ssp table may wait for pushes that never
  // come; the wait then ends at the table's straggler timeout, or when the
  // service is destroyed, so what it writes to must outlive this input.
  struct Pending {
    grpc::ByteBuffer request, response;
    absl::Status status;
    std::atomic<bool> done{false};
  };
  auto pending = std::make_shared<Pending>();
  pending->request = request;
  auto done = [pending](absl::Status s) {
    pending->status = std::move(s);
    pending->done.store(true);
  };
  switch (kind) {
    case 0:
      service.HandlePull(pending->request, &pending->response, done);
      if (pending->done.load()) status = pending->status;
      break;
    case 3:
      service.HandlePushPull(pending->request, &pending->response, done);
      if (pending->done.load()) status = pending->status;
      break;
    case 1:
      status = service.HandlePush(request, &response);
      break;
    case 2: {
      shardps::CreateTableRequest spec;
      if (!spec.ParseFromArray(data + 1, size - 1)) return 0;
      bool created;
      status = service.registry().CreateTable(spec, &created).status();
      break;
    }
  }
  if (!status.ok() && TotalVersion(service) != before) __builtin_trap();
  return 0;
}
