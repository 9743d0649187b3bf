#include "ps/client/fan_out.h"

#include <algorithm>
#include <thread>
#include <vector>

namespace ps {

absl::Status ForEachServer(int n, absl::FunctionRef<absl::Status(int)> call) {
  std::vector<absl::Status> statuses(n);
  std::vector<std::thread> threads;
  threads.reserve(n);
  for (int s = 0; s < n; ++s) {
    threads.emplace_back([&statuses, &call, s] { statuses[s] = call(s); });
  }
  for (std::thread& t : threads) t.join();
  for (const absl::Status& status : statuses) {
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

absl::Status ForEachChunk(
    absl::Span<const size_t> chunks, int inflight,
    absl::FunctionRef<absl::Status(int shard, size_t chunk)> call) {
  struct Lane {
    int shard;
    size_t first;
    size_t stride;
  };
  std::vector<Lane> lanes;
  for (size_t s = 0; s < chunks.size(); ++s) {
    const size_t n = std::min<size_t>(std::max(inflight, 1), chunks[s]);
    for (size_t l = 0; l < n; ++l) lanes.push_back({static_cast<int>(s), l, n});
  }
  // A lone lane needs no thread of its own.
  if (lanes.size() == 1) {
    for (size_t c = 0; c < chunks[lanes[0].shard]; ++c) {
      if (absl::Status s = call(lanes[0].shard, c); !s.ok()) return s;
    }
    return absl::OkStatus();
  }
  return ForEachServer(static_cast<int>(lanes.size()), [&](int l) {
    const Lane& lane = lanes[l];
    for (size_t c = lane.first; c < chunks[lane.shard]; c += lane.stride) {
      if (absl::Status s = call(lane.shard, c); !s.ok()) return s;
    }
    return absl::OkStatus();
  });
}

}  // namespace ps
