// ProgressLine shows a run's progress: on a terminal as one line rewritten
// in place, otherwise (a log file, a pipe) as a line of its own per update,
// so that logs stay readable.
//
// Thread-safety: none; one thread uses it.
#ifndef SHARDPS_PS_OBS_PROGRESS_LINE_H_
#define SHARDPS_PS_OBS_PROGRESS_LINE_H_

#include <cstdio>

#include "absl/strings/string_view.h"

namespace ps {

class ProgressLine {
 public:
  // Writes to `out`; `terminal` says whether it is one (normally
  // isatty(fileno(out))).
  ProgressLine(std::FILE* out, bool terminal)
      : out_(out), terminal_(terminal) {}
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;
  // Ends a line left open.
  ~ProgressLine() { End(); }

  bool terminal() const { return terminal_; }

  // The current state: replaces the line on a terminal, else is printed as
  // a line.
  void Update(absl::string_view text);

  // A message that stays (an epoch's summary, a warning): on a terminal
  // the progress line is ended first.
  void Print(absl::string_view text);

  // Ends the progress line on a terminal (before other output).
  void End();

 private:
  std::FILE* const out_;
  const bool terminal_;
  bool open_ = false;  // a progress line is shown without its newline
};

}  // namespace ps

#endif  // SHARDPS_PS_OBS_PROGRESS_LINE_H_
