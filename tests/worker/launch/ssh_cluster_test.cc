#include "worker/launch/ssh_cluster.h"

#include <gtest/gtest.h>

#include "util/files.h"

namespace worker {
namespace {

TEST(SshClusterTest, HostfileLinesAndErrors) {
  testutil::ScopedTempDir dir;
  const std::string path = dir.path() + "/hosts";
  testutil::WriteFile(path,
                      "# cluster\n\nnode1\nalice@node2:2222  # second\n"
                      "  10.0.0.3:22\n");
  absl::StatusOr<std::vector<SshHost>> hosts = ReadHostfile(path);
  ASSERT_TRUE(hosts.ok()) << hosts.status();
  ASSERT_EQ(hosts->size(), 3u);
  EXPECT_EQ((*hosts)[0].destination, "node1");
  EXPECT_EQ((*hosts)[0].ssh_port, 22);
  EXPECT_EQ((*hosts)[1].destination, "alice@node2");
  EXPECT_EQ((*hosts)[1].host, "node2");
  EXPECT_EQ((*hosts)[1].ssh_port, 2222);
  EXPECT_EQ((*hosts)[2].host, "10.0.0.3");

  testutil::WriteFile(path, "node1\nnode2:http\n");
  absl::Status s = ReadHostfile(path).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find(path + " line 2"), std::string::npos) << s;
  testutil::WriteFile(path, "# nothing\n");
  EXPECT_NE(ReadHostfile(path).status().message().find("lists no host"),
            std::string::npos);
  EXPECT_EQ(ReadHostfile(dir.path() + "/none").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(SshClusterTest, PlacementIsRoundRobinWithOnePortPerServer) {
  const std::vector<SshHost> hosts = {{"a", "a", 22}, {"u@b", "b", 2200}};
  SshSlots p = PlaceOnHosts(hosts, 3, 2, 9000, {"-i", "k"});
  ASSERT_EQ(p.servers.size(), 3u);
  ASSERT_EQ(p.workers.size(), 2u);
  EXPECT_EQ(p.servers[0].address, "a");
  EXPECT_EQ(p.servers[1].address, "b");
  EXPECT_EQ(p.servers[2].address, "a");
  EXPECT_EQ(p.servers[2].port, 9002);
  EXPECT_EQ(p.workers[0].address, "b");  // (3 + 0) % 2
  EXPECT_TRUE(p.workers[0].remote);
  const std::vector<std::string> want = {
      "/usr/bin/ssh", "-tt", "-o", "BatchMode=yes", "-p",
      "2200",         "-i",  "k",  "u@b",           "--"};
  EXPECT_EQ(p.workers[0].command_prefix, want);
}

TEST(SshClusterTest, ShellQuoteSurvivesQuotesAndSpaces) {
  EXPECT_EQ(ShellQuote("--x=a b"), "'--x=a b'");
  EXPECT_EQ(ShellQuote("it's"), "'it'\\''s'");
  EXPECT_EQ(ShellQuote("{i}"), "'{i}'");
}

}  // namespace
}  // namespace worker
