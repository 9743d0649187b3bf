// HugePageAllocator: large blocks start on a huge-page boundary (where the
// kernel can back them with 2 MiB pages), every block on a cache line, and
// a hash map built on it holds what it is given.
#include "ps/table/huge_page_allocator.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace ps {
namespace {

TEST(HugePageAllocatorTest, LargeBlocksStartOnAHugePage) {
  std::vector<float, HugePageAllocator<float>> big(3 << 20);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(big.data()) % kHugePageBytes, 0u);
  for (size_t i = 0; i < big.size(); i += 4096) big[i] = i;
  for (size_t i = 0; i < big.size(); i += 4096) ASSERT_EQ(big[i], i);
  std::vector<char, HugePageAllocator<char>> small(100, 'x');
  EXPECT_EQ(small[99], 'x');
}

TEST(HugePageAllocatorTest, EveryBlockStartsOnACacheLine) {
  // Sizes malloc would place 16 bytes into a line (a 256 KiB block is a
  // sparse table's block of 4096 rows of 16 floats), and odd ones.
  for (size_t floats :
       {size_t{1}, size_t{13}, size_t{4096 * 16}, size_t{100003}}) {
    std::vector<std::vector<float, HugePageAllocator<float>>> blocks;
    for (int i = 0; i < 8; ++i) {
      blocks.emplace_back(floats, 1.0f);
      EXPECT_EQ(
          reinterpret_cast<uintptr_t>(blocks.back().data()) % kCacheLineBytes,
          0u)
          << floats;
      EXPECT_EQ(blocks.back().back(), 1.0f);
    }
  }
}

TEST(HugePageAllocatorTest, AMapOnItKeepsEveryEntry) {
  absl::flat_hash_map<uint64_t, uint64_t, absl::Hash<uint64_t>,
                      std::equal_to<uint64_t>,
                      HugePageAllocator<std::pair<const uint64_t, uint64_t>>>
      map;
  for (uint64_t i = 0; i < 300000; ++i) map[i * 7919] = i;
  ASSERT_EQ(map.size(), 300000u);
  for (uint64_t i = 0; i < 300000; ++i) ASSERT_EQ(map.at(i * 7919), i);
}

}  // namespace
}  // namespace ps
