#include "worker/train/model_table.h"

namespace worker {
namespace {

shardps::InitSegment ToSegment(const model::TensorInit& t, uint64_t seed) {
  shardps::InitSegment seg;
  seg.set_begin(t.begin);
  seg.set_end(t.end);
  switch (t.kind) {
    case model::TensorInit::Kind::kNormal:
      seg.mutable_init()->set_kind("normal");
      break;
    case model::TensorInit::Kind::kUniform:
      seg.mutable_init()->set_kind("uniform");
      break;
    case model::TensorInit::Kind::kZeros:
      seg.mutable_init()->set_kind("zeros");
      break;
  }
  seg.mutable_init()->set_scale(t.scale);
  seg.mutable_init()->set_seed(seed);
  return seg;
}

}  // namespace

ps::TableOptions ModelTable(const TrainerOptions& options,
                            const model::Network& net) {
  ps::TableOptions table;
  table.name = options.table;
  table.num_params = net.num_params();
  table.optimizer = options.optimizer;
  table.consistency = options.consistency;
  uint64_t seed = options.seed;
  for (const model::TensorInit& t : net.InitPlan()) {
    table.init_segments.push_back(ToSegment(t, seed++));
  }
  return table;
}

}  // namespace worker
