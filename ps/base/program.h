// Start-up shared by every shardps binary: the gRPC runtime's lifetime, flag
// parsing with a --help that lists the program's own flags and their
// defaults, then process tuning; and where the sibling binaries are.
//
// Thread-safety: InitProgram runs once, first thing in main(), before any
// thread is started; the rest is safe to call from any thread.
#ifndef SHARDPS_PS_BASE_PROGRAM_H_
#define SHARDPS_PS_BASE_PROGRAM_H_

#include <signal.h>

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace ps {

// Holds gRPC initialized for the life of main(). gRPC otherwise tears its
// runtime down on a background thread when the last gRPC object dies, which
// can race with process exit (a crash or a hang in exit()). Declare one
// first in main(), so it is destroyed last: its destructor waits for that
// teardown to finish.
class GrpcRuntime {
 public:
  GrpcRuntime();
  ~GrpcRuntime();
  GrpcRuntime(const GrpcRuntime&) = delete;
  GrpcRuntime& operator=(const GrpcRuntime&) = delete;
};

// Parses the command line (exits with a message on a bad flag), tunes the
// process for bulk transfers (see program.cc) and returns the positional
// arguments. --help lists the flags of the *_main.cc and *_flags.cc files.
std::vector<char*> InitProgram(int argc, char** argv, absl::string_view usage);

// The process tuning InitProgram applies (fixed malloc thresholds, so that
// megabyte buffers are reused warm rather than faulted in again; Abseil's
// deadlock detection off), for a process whose main() is not ours: the
// Python module calls it when imported.
void TuneProcessForBulkTransfers();

// The stop signals (SIGINT, SIGTERM, SIGHUP), blocked in every thread so
// that the main thread takes them when it is ready to stop in order. Build
// one first thing in main(), before any thread exists: threads inherit the
// mask.
class StopSignals {
 public:
  StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // Waits for a stop signal; returns it.
  int Wait() const;
  // Waits up to `timeout`; the signal, or 0 if none came.
  int WaitFor(absl::Duration timeout) const;

 private:
  sigset_t set_;
};

// "SIGTERM", "SIGINT", ...
std::string SignalName(int signal);

// Path of a program installed beside the running executable (all shardps
// binaries are built into one directory).
std::string SiblingBinary(absl::string_view name);

}  // namespace ps

#endif  // SHARDPS_PS_BASE_PROGRAM_H_
