// Placement backends: chosen by --cluster from a table, each placing every
// process; what a backend needs and lacks is an error that says so.
#include "worker/launch/placement.h"

#include <gtest/gtest.h>

#include <string>

#include "util/files.h"

namespace worker {
namespace {

TEST(PlacementTest, AnUnknownKindNamesTheKindsThereAre) {
  absl::Status s = MakePlacement("kubernetes").status();
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_EQ(s.message(), "--cluster=kubernetes is not local, emulated or ssh");
}

TEST(PlacementTest, LocalPutsEveryProcessOnLoopback) {
  absl::StatusOr<std::unique_ptr<Placement>> p = MakePlacement("local");
  ASSERT_TRUE(p.ok());
  PlacementOptions o;
  o.servers = 2;
  o.workers = 3;
  o.data = "data/fm";
  absl::StatusOr<Placed> placed = (*p)->Place(o);
  ASSERT_TRUE(placed.ok()) << placed.status();
  ASSERT_EQ(placed->servers.size(), 2u);
  ASSERT_EQ(placed->workers.size(), 3u);
  for (const HostSlot& h : placed->servers) {
    EXPECT_EQ(h.address, "127.0.0.1");
    EXPECT_TRUE(h.command_prefix.empty());
    EXPECT_FALSE(h.remote);
  }
  EXPECT_EQ(placed->data, "data/fm");
  shardps::RunSummary summary;
  absl::StatusOr<bool> added = (*p)->Finish(&summary);
  ASSERT_TRUE(added.ok());
  EXPECT_FALSE(*added);
}

TEST(PlacementTest, SshPlacesOnTheHostfilesHostsRoundRobin) {
  testutil::ScopedTempDir dir;
  const std::string hostfile = dir.path() + "/hosts";
  testutil::WriteFile(hostfile, "# cluster\nalice@h1\nh2:2222\n");
  absl::StatusOr<std::unique_ptr<Placement>> p = MakePlacement("ssh");
  ASSERT_TRUE(p.ok());
  PlacementOptions o;
  o.servers = 2;
  o.workers = 1;
  o.hostfile = hostfile;
  o.ssh_base_port = 9000;
  absl::StatusOr<Placed> placed = (*p)->Place(o);
  ASSERT_TRUE(placed.ok()) << placed.status();
  EXPECT_EQ(placed->servers[0].address, "h1");
  EXPECT_EQ(placed->servers[1].address, "h2");
  EXPECT_EQ(placed->servers[1].port, 9001);
  EXPECT_EQ(placed->workers[0].address, "h1");  // (2 + 0) % 2 hosts
  EXPECT_TRUE(placed->workers[0].remote);
  o.hostfile = dir.path() + "/none";
  absl::Status s = (*p)->Place(o).status();
  EXPECT_NE(s.message().find("--hostfile=" + dir.path() + "/none"),
            std::string::npos)
      << s;
}

}  // namespace
}  // namespace worker
