// File plumbing: an errno becomes a status naming the path and the reason
// with absl's code for it; whole writes and reads; directories with their
// parents.
#include "ps/base/file_io.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <string>

#include "util/files.h"

namespace ps {
namespace {

TEST(FileIoTest, ErrnoStatusNamesWhatPathAndReasonWithItsCode) {
  const absl::Status missing = ErrnoStatus(ENOENT, "open", "/x/y");
  EXPECT_TRUE(absl::IsNotFound(missing));
  EXPECT_EQ(missing.message(), "cannot open /x/y: No such file or directory");
  EXPECT_TRUE(absl::IsPermissionDenied(ErrnoStatus(EACCES, "create", "/p")));
  EXPECT_TRUE(absl::IsResourceExhausted(ErrnoStatus(ENOSPC, "write", "/p")));
  EXPECT_NE(ErrnoStatus(EIO, "read", "/dev/sdz")
                .message()
                .find("cannot read /dev/sdz: Input/output error"),
            std::string::npos);
}

TEST(FileIoTest, WholeFilesGoOutAndComeBackByteForByte) {
  testutil::ScopedTempDir dir;
  const std::string path = dir.path() + "/f";
  std::string bytes(3 << 20, '\0');  // past any single write's size
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 7);
  ASSERT_TRUE(WriteStringToFile(path, bytes, 0600).ok());
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  absl::StatusOr<std::string> back = ReadFileToString(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(*back == bytes);
  absl::Status s = ReadFileToString(dir.path() + "/none").status();
  EXPECT_TRUE(absl::IsNotFound(s)) << s;
  EXPECT_NE(s.message().find(dir.path() + "/none"), std::string::npos) << s;
  s = WriteStringToFile(dir.path() + "/no/such/dir/f", "x");
  EXPECT_TRUE(absl::IsNotFound(s)) << s;
}

TEST(FileIoTest, PreadFullyStopsOnlyAtTheEnd) {
  testutil::ScopedTempDir dir;
  const std::string path = dir.path() + "/f";
  ASSERT_TRUE(WriteStringToFile(path, "0123456789").ok());
  const int fd = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  char out[16] = {};
  absl::StatusOr<size_t> got = PreadFully(fd, out, 4, 3, path);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, 4u);
  EXPECT_EQ(std::string(out, 4), "3456");
  got = PreadFully(fd, out, 16, 7, path);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, 3u);  // the file ends
  ::close(fd);
  got = PreadFully(fd, out, 4, 0, path);  // closed: EBADF, named
  EXPECT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("cannot read " + path),
            std::string::npos);
}

TEST(FileIoTest, CreateDirectoriesMakesParentsOrSaysWhyNot) {
  testutil::ScopedTempDir dir;
  const std::string deep = dir.path() + "/a/b/c";
  ASSERT_TRUE(CreateDirectories(deep).ok());
  EXPECT_TRUE(std::filesystem::is_directory(deep));
  EXPECT_TRUE(CreateDirectories(deep).ok());  // already there
  testutil::WriteFile(dir.path() + "/file", "x");
  absl::Status s = CreateDirectories(dir.path() + "/file/sub");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "cannot create directory " + dir.path() +
                             "/file/sub: Not a directory");
  s = CreateDirectories(dir.path() + "/file");  // a file stands there
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("Not a directory"), std::string::npos) << s;
  EXPECT_TRUE(absl::IsInvalidArgument(CreateDirectories("")));
}

}  // namespace
}  // namespace ps
