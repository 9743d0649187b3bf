// Helpers shared by the test suites.
#ifndef SHARDPS_TESTS_TEST_UTIL_H_
#define SHARDPS_TESTS_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace testutil {

// A fresh directory under /tmp, removed with everything in it on scope exit.
class ScopedTempDir {
 public:
  explicit ScopedTempDir(const std::string& prefix = "shardps-test") {
    std::string pattern = "/tmp/" + prefix + "-XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) {
      ADD_FAILURE() << "mkdtemp failed for " << pattern;
    }
    path_ = pattern;
  }
  ~ScopedTempDir() { std::system(("rm -rf '" + path_ + "'").c_str()); }
  ScopedTempDir(const ScopedTempDir&) = delete;
  ScopedTempDir& operator=(const ScopedTempDir&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

}  // namespace testutil

#endif  // SHARDPS_TESTS_TEST_UTIL_H_
