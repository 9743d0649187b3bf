// Where library code reports what a user should see but is not an error of
// the call it is in: a retry, a restored checkpoint, a dropped straggler.
// As LevelDB's Options::info_log, a component takes a LogSink* in its
// options and passes it down; null means the process's standard error,
// each line prefixed with the program's name.
//
//   ps::Logf(options.log, "restored %d tables from %s", n, path);
//
// Thread-safety: Write may be called from any thread; StderrLog writes each
// line with one call, so lines of concurrent writers do not interleave.
#ifndef SHARDPS_PS_BASE_LOG_H_
#define SHARDPS_PS_BASE_LOG_H_

#include <string>

#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"

namespace ps {

class LogSink {
 public:
  virtual ~LogSink() = default;
  // One line, without its newline.
  virtual void Write(absl::string_view line) = 0;
};

// Lines to standard error as "PREFIX: line".
class StderrLog final : public LogSink {
 public:
  explicit StderrLog(std::string prefix) : prefix_(std::move(prefix)) {}
  void Write(absl::string_view line) override;

 private:
  const std::string prefix_;
};

// The default sink: standard error, prefixed with the program's name
// (shardps-server, shardps-worker, ...).
LogSink& DefaultLog();

// Writes `line` to `sink`, or to DefaultLog() when `sink` is null.
void Log(LogSink* sink, absl::string_view line);

template <typename... Args>
void Logf(LogSink* sink, const absl::FormatSpec<Args...>& format,
          const Args&... args) {
  Log(sink, absl::StrFormat(format, args...));
}

}  // namespace ps

#endif  // SHARDPS_PS_BASE_LOG_H_
