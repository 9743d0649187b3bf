// Helpers shared by the test suites.
#ifndef SHARDPS_TESTS_TEST_UTIL_H_
#define SHARDPS_TESTS_TEST_UTIL_H_

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>

#include "ps/server_process.h"

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

// Runs `command` with /bin/sh; its exit code (-1 if it did not exit) and
// its output, stdout and stderr together.
inline std::pair<int, std::string> Shell(const std::string& command) {
  std::string out;
  FILE* f = popen(("(" + command + ") 2>&1").c_str(), "r");
  if (f == nullptr) return {-1, out};
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  const int status = pclose(f);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// Writes a synthetic data set with shardps-data into `out`; `flags` as on
// its command line. The tool's exit code.
inline int MakeSyntheticData(const std::string& out, const std::string& flags) {
  return std::system((ps::SiblingBinary("shardps-data") + " synthetic --out " +
                      out + " " + flags + " 2>/dev/null")
                         .c_str());
}

}  // namespace testutil

#endif  // SHARDPS_TESTS_TEST_UTIL_H_
