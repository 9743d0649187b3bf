#include "worker/launch/placement.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace worker {
namespace {

using Factory = std::unique_ptr<Placement> (*)();

constexpr std::pair<absl::string_view, Factory> kBackends[] = {
    {"local", &MakeLocalPlacement},
    {"emulated", &MakeEmulatedPlacement},
    {"ssh", &MakeSshPlacement},
};

// Every process on this host, reached on loopback.
class LocalPlacement final : public Placement {
 public:
  absl::StatusOr<Placed> Place(const PlacementOptions& options) override {
    Placed placed;
    placed.servers.resize(options.servers);
    placed.workers.resize(options.workers);
    placed.data = options.data;
    placed.control_address = "127.0.0.1";
    return placed;
  }
};

}  // namespace

std::unique_ptr<Placement> MakeLocalPlacement() {
  return std::make_unique<LocalPlacement>();
}

absl::StatusOr<std::unique_ptr<Placement>> MakePlacement(
    absl::string_view kind) {
  std::vector<absl::string_view> kinds;
  for (const auto& [name, make] : kBackends) {
    if (name == kind) return make();
    kinds.push_back(name);
  }
  const absl::string_view last = kinds.back();
  kinds.pop_back();
  return absl::InvalidArgumentError(absl::StrCat("--cluster=", kind, " is not ",
                                                 absl::StrJoin(kinds, ", "),
                                                 " or ", last));
}

}  // namespace worker
