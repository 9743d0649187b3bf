#include "ps/client/fan_out.h"

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

}  // namespace ps
