#include "ps/client/server_addrs.h"

#include <gtest/gtest.h>

namespace ps {
namespace {

using Addrs = std::vector<std::string>;

TEST(ServerAddrsTest, ExplicitList) {
  EXPECT_EQ(*ParseServerAddrs("a:1, b:2,[::1]:3", 0),
            (Addrs{"a:1", "b:2", "[::1]:3"}));
  EXPECT_EQ(*ParseServerAddrs("a:1,b:2", 2), (Addrs{"a:1", "b:2"}));
}

TEST(ServerAddrsTest, PatternExpandsWithCount) {
  EXPECT_EQ(*ParseServerAddrs("ps-{i}.svc:7070", 3),
            (Addrs{"ps-0.svc:7070", "ps-1.svc:7070", "ps-2.svc:7070"}));
}

TEST(ServerAddrsTest, BadInputNamesTheProblem) {
  auto expect_error = [](absl::string_view addrs, int count,
                         absl::string_view needle) {
    absl::StatusOr<Addrs> r = ParseServerAddrs(addrs, count);
    ASSERT_FALSE(r.ok()) << addrs;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(needle), absl::string_view::npos)
        << r.status();
  };
  expect_error("", 0, "no server");
  expect_error("ps-{i}:1", 0, "count");
  expect_error("a:1,b:2", 3, "count is 3");
  expect_error("a:1,bhost", 0, "'bhost'");
  expect_error("a:0", 0, "'a:0'");
  expect_error("a:70000", 0, "'a:70000'");
  expect_error("a:1,,b:2", 0, "''");
}

}  // namespace
}  // namespace ps
