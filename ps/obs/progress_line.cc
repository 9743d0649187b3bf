#include "ps/obs/progress_line.h"

namespace ps {

void ProgressLine::Update(absl::string_view text) {
  if (terminal_) {
    // Back to the line's start and clear it, then the new text.
    std::fprintf(out_, "\r\033[K%.*s", static_cast<int>(text.size()),
                 text.data());
    open_ = true;
  } else {
    std::fprintf(out_, "%.*s\n", static_cast<int>(text.size()), text.data());
  }
  std::fflush(out_);
}

void ProgressLine::Print(absl::string_view text) {
  End();
  std::fprintf(out_, "%.*s\n", static_cast<int>(text.size()), text.data());
  std::fflush(out_);
}

void ProgressLine::End() {
  if (!open_) return;
  std::fputc('\n', out_);
  std::fflush(out_);
  open_ = false;
}

}  // namespace ps
