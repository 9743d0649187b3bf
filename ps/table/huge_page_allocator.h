// HugePageAllocator: a standard allocator of cache-line aligned blocks
// whose large blocks ask the kernel for transparent huge pages (madvise
// MADV_HUGEPAGE, which works where
// /sys/kernel/mm/transparent_hugepage/enabled is "always" or "madvise").
// A sparse table's id index is tens of MiB read at random ids: on 4 KiB
// pages nearly every lookup also misses the TLB, on 2 MiB pages few do.
// Small blocks, and kernels that refuse, get ordinary memory.
//
// Thread-safety: stateless; as safe as malloc.
#ifndef SHARDPS_PS_TABLE_HUGE_PAGE_ALLOCATOR_H_
#define SHARDPS_PS_TABLE_HUGE_PAGE_ALLOCATOR_H_

#include <cstddef>
#include <new>

namespace ps {

// Bytes from which a block is placed on huge-page boundaries and advised.
inline constexpr size_t kHugePageBytes = size_t{2} << 20;
// Every block starts on a cache line: a sparse table's row of 16 floats
// then fills one line, where malloc's 16-byte alignment would spread most
// rows over two, and each random row read would miss twice.
inline constexpr size_t kCacheLineBytes = 64;

// A block of `bytes`, cache-line aligned, huge-page backed when it is at
// least kHugePageBytes; throws std::bad_alloc as operator new does.
void* AllocateMaybeHuge(size_t bytes);
void FreeMaybeHuge(void* block);

template <typename T>
struct HugePageAllocator {
  using value_type = T;

  HugePageAllocator() = default;
  template <typename U>
  HugePageAllocator(const HugePageAllocator<U>&) {}  // NOLINT: rebinding

  T* allocate(size_t n) {
    if (n > static_cast<size_t>(-1) / sizeof(T)) throw std::bad_alloc();
    return static_cast<T*>(AllocateMaybeHuge(n * sizeof(T)));
  }
  void deallocate(T* p, size_t) { FreeMaybeHuge(p); }

  template <typename U>
  bool operator==(const HugePageAllocator<U>&) const {
    return true;
  }
  template <typename U>
  bool operator!=(const HugePageAllocator<U>&) const {
    return false;
  }
};

}  // namespace ps

#endif  // SHARDPS_PS_TABLE_HUGE_PAGE_ALLOCATOR_H_
