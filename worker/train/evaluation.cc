#include "worker/train/evaluation.h"

namespace worker {

absl::StatusOr<double> TestAccuracy(const model::Network& net,
                                    const float* params, loader::Loader& test,
                                    model::Network::Workspace* ws) {
  if (absl::Status s = test.StartEpoch(0); !s.ok()) return s;
  uint64_t correct = 0, seen = 0;
  while (true) {
    absl::StatusOr<const loader::Batch*> b = test.Next();
    if (!b.ok()) return b.status();
    if (*b == nullptr) break;
    correct += net.Evaluate(params, (*b)->features.data(), (*b)->labels.data(),
                            (*b)->size, ws, nullptr);
    seen += (*b)->size;
  }
  return seen == 0 ? 0.0 : static_cast<double>(correct) / seen;
}

}  // namespace worker
