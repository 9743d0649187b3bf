// MappedSegments: attached segments are found by id, slices are checked
// against their segment, the limits hold, and a view outlives a Detach.
#include "ps/server/mapped_segments.h"

#include <gtest/gtest.h>

#include <cstring>
#include <limits>

namespace ps {
namespace {

constexpr size_t kBytes = SharedSegment::kHeaderBytes + 64 * 16;

shardps::AttachMemoryRequest Describe(const SharedSegment& segment) {
  shardps::AttachMemoryRequest request;
  request.set_job("j");
  request.set_name(segment.name());
  request.set_bytes(segment.size());
  request.set_nonce(std::string(segment.nonce()));
  return request;
}

shardps::MemorySlice Slice(uint64_t segment, uint64_t offset) {
  shardps::MemorySlice slice;
  slice.set_segment(segment);
  slice.set_offset(offset);
  return slice;
}

TEST(MappedSegmentsTest, FindsSlicesOfAttachedSegmentsOnly) {
  MappedSegments segments(MappedSegmentLimits{});
  absl::StatusOr<std::unique_ptr<SharedSegment>> client =
      SharedSegment::Create(kBytes);
  ASSERT_TRUE(client.ok()) << client.status();
  absl::StatusOr<uint64_t> id = segments.Attach(Describe(**client));
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_NE(*id, 0u);
  EXPECT_EQ(segments.size(), 1);

  std::memcpy((*client)->data() + 128, "abcd", 4);
  absl::StatusOr<MemoryView> view = segments.Find(Slice(*id, 128), 4);
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(std::string(view->data, 4), "abcd");
  // The last byte of the segment is a slice's last byte.
  EXPECT_TRUE(segments.Find(Slice(*id, 64), kBytes - 64).ok());

  EXPECT_EQ(segments.Find(Slice(*id + 1, 128), 4).status().code(),
            absl::StatusCode::kNotFound);
  for (auto [offset, bytes] :
       std::initializer_list<std::pair<uint64_t, uint64_t>>{
           {0, 4},             // the header
           {100, 4},           // not a multiple of 64
           {64, kBytes - 63},  // past the end
           {kBytes + 64, 0},   // starts past the end
           {128, std::numeric_limits<uint64_t>::max()},
           {std::numeric_limits<uint64_t>::max() - 63, 64}}) {
    absl::Status s = segments.Find(Slice(*id, offset), bytes).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument)
        << offset << " " << bytes;
  }

  // A view keeps the mapping after a Detach; the id is gone.
  ASSERT_TRUE(segments.Detach(*id).ok());
  EXPECT_EQ(segments.size(), 0);
  EXPECT_EQ(std::string(view->data, 4), "abcd");
  EXPECT_EQ(segments.Find(Slice(*id, 128), 4).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(segments.Detach(*id).code(), absl::StatusCode::kNotFound);
}

TEST(MappedSegmentsTest, RefusesPastItsLimitsAndLeavesTheNameToTheClient) {
  MappedSegments segments(MappedSegmentLimits{1, uint64_t{1} << 30});
  absl::StatusOr<std::unique_ptr<SharedSegment>> a =
      SharedSegment::Create(kBytes);
  absl::StatusOr<std::unique_ptr<SharedSegment>> b =
      SharedSegment::Create(kBytes);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(segments.Attach(Describe(**a)).ok());
  absl::Status full = segments.Attach(Describe(**b)).status();
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted) << full;
  // Refused before it was opened: the name is still there.
  EXPECT_TRUE(SharedSegment::Open((*b)->name(), kBytes, (*b)->nonce()).ok());

  MappedSegments small(MappedSegmentLimits{8, kBytes - 1});
  absl::StatusOr<std::unique_ptr<SharedSegment>> c =
      SharedSegment::Create(kBytes);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(small.Attach(Describe(**c)).status().code(),
            absl::StatusCode::kResourceExhausted);
  (*c)->Unlink();
}

TEST(MappedSegmentsTest, AnUnknownNameIsNotFound) {
  MappedSegments segments(MappedSegmentLimits{});
  shardps::AttachMemoryRequest request;
  request.set_name("/shardps-0123456789abcdef0123456789abcdef");
  request.set_bytes(kBytes);
  request.set_nonce(std::string(SharedSegment::kNonceBytes, 'n'));
  EXPECT_EQ(segments.Attach(request).status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace ps
