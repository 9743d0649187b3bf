#include "ps/process_tuning.h"

#include <malloc.h>

#include "absl/synchronization/mutex.h"

namespace ps {

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

}  // namespace ps
