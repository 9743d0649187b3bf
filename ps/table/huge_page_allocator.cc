#include "ps/table/huge_page_allocator.h"

#include <sys/mman.h>

#include <cstdlib>

namespace ps {

void* AllocateMaybeHuge(size_t bytes) {
  if (bytes < kHugePageBytes) {
    const size_t lines = (bytes + kCacheLineBytes - 1) / kCacheLineBytes;
    if (void* p = std::aligned_alloc(
            kCacheLineBytes, (lines == 0 ? 1 : lines) * kCacheLineBytes)) {
      return p;
    }
    throw std::bad_alloc();
  }
  const size_t rounded = (bytes + kHugePageBytes - 1) & ~(kHugePageBytes - 1);
  void* p = std::aligned_alloc(kHugePageBytes, rounded);
  if (p == nullptr) throw std::bad_alloc();
  // Advice only: a kernel without transparent huge pages leaves 4 KiB
  // pages, which work the same.
  madvise(p, rounded, MADV_HUGEPAGE);
  return p;
}

void FreeMaybeHuge(void* block) { std::free(block); }

}  // namespace ps
