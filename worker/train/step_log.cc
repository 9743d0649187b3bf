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

void TraceStepPhases(ps::Tracer* tracer, absl::Time start, absl::Time got_batch,
                     absl::Time pulled, absl::Time computed,
                     absl::Time pushed) {
  if (tracer == nullptr) return;
  tracer->Record("wait_for_data", "worker", start, got_batch);
  tracer->Record("pull", "worker", got_batch, pulled);
  tracer->Record("compute", "worker", pulled, computed);
  tracer->Record("push", "worker", computed, pushed);
}

void AddPhaseSeconds(const StepTimes& t, shardps::WorkerSummary* summary) {
  auto seconds = [](absl::Duration d) { return absl::ToDoubleSeconds(d); };
  summary->set_read_seconds(summary->read_seconds() + seconds(t.wait_for_data));
  summary->set_pull_seconds(summary->pull_seconds() + seconds(t.pull));
  summary->set_compute_seconds(summary->compute_seconds() + seconds(t.compute));
  summary->set_push_seconds(summary->push_seconds() + seconds(t.push));
}

}  // namespace worker
