#include "ps/base/program.h"

#include <grpc/grpc.h>
#include <malloc.h>
#include <unistd.h>

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "ps/base/build_version.h"

namespace ps {

// gRPC receives each message into buffers it mallocs and frees per read.
// With glibc's default, dynamically adjusted thresholds those megabyte-sized
// buffers are either mmap'd fresh or trimmed back to the kernel as soon as
// they are freed, so every read faults in new pages: ~13 us per 4 KiB page
// on these VMs, which capped a server at about 1 GB/s of pushes. Fixed
// thresholds make glibc keep freed memory in its arenas and hand the same
// warm pages back to the next read.
void TuneProcessForBulkTransfers() {
  // Blocks below 32 MiB (glibc's ceiling) come from the arenas, not mmap.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  // Keep up to 1 GiB of freed memory at the top of each arena for reuse.
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  // Debian's abseil is built with deadlock detection on, which bookkeeps a
  // lock graph on every Mutex acquisition; the stripe locks are taken per
  // 16 KiB of every push. Tests keep it on.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}

GrpcRuntime::GrpcRuntime() { grpc_init(); }
GrpcRuntime::~GrpcRuntime() { grpc_shutdown_blocking(); }

std::vector<char*> InitProgram(int argc, char** argv, absl::string_view usage) {
  absl::SetProgramUsageMessage(usage);
  absl::FlagsUsageConfig config;
  // Abseil's --help lists flags of files named after the program; ours are
  // the *_main.cc files and the *_flags.cc files that several binaries
  // share, whatever the binary is called.
  config.contains_helpshort_flags = [](absl::string_view path) {
    return absl::EndsWith(path, "_main.cc") ||
           absl::EndsWith(path, "_flags.cc");
  };
  config.contains_help_flags = config.contains_helpshort_flags;
  config.version_string = [] { return absl::StrCat(BuildVersion(), "\n"); };
  absl::SetFlagsUsageConfig(config);
  std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  TuneProcessForBulkTransfers();
  return positional;
}

StopSignals::StopSignals() {
  sigemptyset(&set_);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&set_, sig);
  pthread_sigmask(SIG_BLOCK, &set_, nullptr);
}

int StopSignals::Wait() const {
  int signal = 0;
  while (sigwait(&set_, &signal) != 0) {
  }
  return signal;
}

int StopSignals::WaitFor(absl::Duration timeout) const {
  const timespec ts = absl::ToTimespec(timeout);
  const int signal = sigtimedwait(&set_, nullptr, &ts);
  return signal > 0 ? signal : 0;
}

std::string SignalName(int signal) {
  const char* name = sigabbrev_np(signal);
  return name != nullptr ? absl::StrCat("SIG", name)
                         : absl::StrCat("signal ", signal);
}

std::string SiblingBinary(absl::string_view name) {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return std::string(name);
  const absl::string_view path(self, n);
  return absl::StrCat(path.substr(0, path.rfind('/')), "/", name);
}

}  // namespace ps
