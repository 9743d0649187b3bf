#include "worker/train/step_log.h"

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ps/base/file_io.h"
#include "worker/train/position.h"

namespace worker {
namespace {

double Ms(absl::Duration d) { return absl::ToDoubleMilliseconds(d); }

}  // namespace

absl::StatusOr<std::unique_ptr<StepLog>> StepLog::Open(const std::string& path,
                                                       bool append) {
  if (append) {
    if (absl::Status s = TruncateToLastLine(path); !s.ok()) return s;
  }
  std::ofstream out(path, append ? std::ios::app : std::ios::trunc);
  if (!out) return ps::ErrnoStatus(errno, "write", path);
  if (!append) {
    out << "epoch,step,batch,loss,read_ms,compute_ms,pull_ms,push_ms,"
           "end_unix_s\n";
  }
  return std::unique_ptr<StepLog>(new StepLog(path, std::move(out)));
}

absl::Status StepLog::Append(int epoch, uint64_t step, int batch, float loss,
                             const StepTimes& t, absl::Time end) {
  out_ << absl::StrFormat("%d,%d,%d,%.5f,%.3f,%.3f,%.3f,%.3f,%.6f\n", epoch,
                          step, batch, loss, Ms(t.wait_for_data), Ms(t.compute),
                          Ms(t.pull), Ms(t.push),
                          absl::ToUnixMicros(end) * 1e-6)
       << std::flush;  // a killed worker's file is whole up to here
  if (!out_) {
    return absl::UnavailableError(absl::StrCat("cannot write ", path_));
  }
  return absl::OkStatus();
}

}  // namespace worker
