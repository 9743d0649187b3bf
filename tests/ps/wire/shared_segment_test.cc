// SharedSegment: a client's segment opened by name is the same memory, its
// name is gone once opened, and anything that is not exactly the object
// the client described is refused.
#include "ps/wire/shared_segment.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <string>

namespace ps {
namespace {

constexpr size_t kBytes = SharedSegment::kHeaderBytes + 4096;

TEST(SharedSegmentTest, OpenedByNameIsTheSameMemoryAndTheNameIsGone) {
  absl::StatusOr<std::unique_ptr<SharedSegment>> created =
      SharedSegment::Create(kBytes);
  ASSERT_TRUE(created.ok()) << created.status();
  const std::string name = (*created)->name();
  absl::StatusOr<std::unique_ptr<SharedSegment>> opened =
      SharedSegment::Open(name, kBytes, (*created)->nonce());
  ASSERT_TRUE(opened.ok()) << opened.status();
  std::memcpy((*created)->data() + 100, "hello", 5);
  EXPECT_EQ(std::string((*opened)->data() + 100, 5), "hello");
  (*opened)->data()[200] = 'x';
  EXPECT_EQ((*created)->data()[200], 'x');
  // Nobody else can open it any more.
  errno = 0;
  EXPECT_LT(shm_open(name.c_str(), O_RDWR, 0), 0);
  EXPECT_EQ(errno, ENOENT);
  EXPECT_EQ(
      SharedSegment::Open(name, kBytes, (*created)->nonce()).status().code(),
      absl::StatusCode::kNotFound);
}

TEST(SharedSegmentTest, TwoSegmentsHaveDifferentNamesAndNonces) {
  absl::StatusOr<std::unique_ptr<SharedSegment>> a =
      SharedSegment::Create(kBytes);
  absl::StatusOr<std::unique_ptr<SharedSegment>> b =
      SharedSegment::Create(kBytes);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE((*a)->name(), (*b)->name());
  EXPECT_NE((*a)->nonce(), (*b)->nonce());
  (*a)->Unlink();
  (*b)->Unlink();
}

TEST(SharedSegmentTest, RefusesWhatTheClientDidNotDescribe) {
  absl::StatusOr<std::unique_ptr<SharedSegment>> created =
      SharedSegment::Create(kBytes);
  ASSERT_TRUE(created.ok()) << created.status();
  const std::string name = (*created)->name();
  const std::string nonce((*created)->nonce());
  std::string wrong = nonce;
  wrong[0] ^= 1;
  EXPECT_EQ(SharedSegment::Open(name, kBytes, wrong).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(SharedSegment::Open(name, kBytes + 64, nonce).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(SharedSegment::Open(name, kBytes, nonce.substr(1)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SharedSegment::Open(name, 8, nonce).status().code(),
            absl::StatusCode::kInvalidArgument);
  // Names other than Create's never reach the file system.
  for (const char* bad :
       {"/etc/passwd", "/shardps-../../etc/passwd", "shardps-0123",
        "/shardps-0123456789ABCDEF0123456789abcdef",
        "/shardps-0123456789abcdef0123456789abcdef0"}) {
    absl::Status s = SharedSegment::Open(bad, kBytes, nonce).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("name"), absl::string_view::npos) << s;
  }
  // Still there for the right description after the refusals.
  EXPECT_TRUE(SharedSegment::Open(name, kBytes, nonce).ok());
}

TEST(SharedSegmentTest, RefusesAnObjectOthersMayWrite) {
  absl::StatusOr<std::unique_ptr<SharedSegment>> created =
      SharedSegment::Create(kBytes);
  ASSERT_TRUE(created.ok()) << created.status();
  const std::string name = (*created)->name();
  const int fd = shm_open(name.c_str(), O_RDWR, 0);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(fchmod(fd, 0666), 0);
  close(fd);
  absl::Status s =
      SharedSegment::Open(name, kBytes, (*created)->nonce()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
  (*created)->Unlink();
}

TEST(SharedSegmentTest, TooSmallForItsHeaderIsRefused) {
  EXPECT_EQ(SharedSegment::Create(16).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ps
