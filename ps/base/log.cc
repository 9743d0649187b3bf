#include "ps/base/log.h"

#include <cerrno>
#include <cstdio>

#include "absl/strings/str_cat.h"

namespace ps {

void StderrLog::Write(absl::string_view line) {
  const std::string text = absl::StrCat(prefix_, ": ", line, "\n");
  std::fwrite(text.data(), 1, text.size(), stderr);
}

LogSink& DefaultLog() {
  // Immutable once built (glibc sets the name before main()), and never
  // destroyed: threads may still log while the process exits.
  static StderrLog* const log = new StderrLog(program_invocation_short_name);
  return *log;
}

void Log(LogSink* sink, absl::string_view line) {
  (sink != nullptr ? *sink : DefaultLog()).Write(line);
}

}  // namespace ps
