#include "ps/wire/wire_codec.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "proto/shardps.pb.h"

namespace ps {
namespace {

// Cuts `bytes` into slices at the given positions, as the transport might.
grpc::ByteBuffer Sliced(const std::string& bytes, std::vector<size_t> cuts) {
  std::vector<grpc::Slice> slices;
  size_t at = 0;
  cuts.push_back(bytes.size());
  for (size_t cut : cuts) {
    slices.emplace_back(bytes.data() + at, cut - at);
    at = cut;
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

std::string Joined(const std::vector<absl::string_view>& pieces) {
  std::string out;
  for (absl::string_view p : pieces) out.append(p.data(), p.size());
  return out;
}

TEST(WireCodecTest, HeaderMatchesProtobufEncodingByteForByte) {
  std::vector<float> values = {1.5f, -2.0f, 3.25f};
  const std::string payload(reinterpret_cast<const char*>(values.data()), 12);
  for (uint64_t version : {uint64_t{0}, uint64_t{7}, uint64_t{1} << 40}) {
    shardps::PullResponse header;
    header.set_version(version);
    std::string buffer(kMaxWireHeaderBytes, '\0');
    buffer += payload;
    const size_t n =
        WriteHeaderBefore(header, shardps::PullResponse::kValuesFieldNumber,
                          payload.size(), buffer.data() + kMaxWireHeaderBytes);
    const std::string ours = buffer.substr(kMaxWireHeaderBytes - n);

    shardps::PullResponse full = header;
    full.set_values(payload);
    EXPECT_EQ(ours, full.SerializeAsString()) << "version " << version;
  }
}

TEST(WireCodecTest, SplitFindsBulkFieldAcrossAnySliceBoundaries) {
  shardps::PushRequest push;
  push.set_job("job-1");
  push.set_table("weights");
  push.set_begin(16);
  push.set_end(1040);
  push.set_worker(3);
  push.set_clock(99);
  std::string gradient(4096, '\0');
  for (size_t i = 0; i < gradient.size(); ++i) gradient[i] = char(i * 7);
  push.set_gradient(gradient);
  const std::string wire = push.SerializeAsString();
  for (std::vector<size_t> cuts : std::vector<std::vector<size_t>>{
           {}, {1}, {5, 6, 7}, {30, 31, 1000, 4000}, {wire.size() - 1}}) {
    SplitMessage split;
    ASSERT_TRUE(SplitBulkField(Sliced(wire, cuts),
                               shardps::PushRequest::kGradientFieldNumber,
                               &split)
                    .ok());
    EXPECT_EQ(Joined(split.bulk), gradient);
    shardps::PushRequest rest;
    ASSERT_TRUE(rest.ParseFromString(split.rest));
    EXPECT_EQ(rest.job(), "job-1");
    EXPECT_EQ(rest.table(), "weights");
    EXPECT_EQ(rest.begin(), 16u);
    EXPECT_EQ(rest.end(), 1040u);
    EXPECT_EQ(rest.worker(), 3u);
    EXPECT_EQ(rest.clock(), 99u);
    EXPECT_TRUE(rest.gradient().empty());
  }
}

TEST(WireCodecTest, MalformedMessagesNameTheOffset) {
  shardps::PushRequest push;
  push.set_table("t");
  push.set_gradient(std::string(100, 'g'));
  const std::string wire = push.SerializeAsString();
  SplitMessage split;
  // Truncated in the middle of the gradient.
  absl::Status s =
      SplitBulkField(Sliced(wire.substr(0, 50), {20}),
                     shardps::PushRequest::kGradientFieldNumber, &split);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("at byte"), std::string::npos) << s;
  // A tag with wire type 7 does not exist.
  s = SplitBulkField(Sliced(std::string("\x0f\x01", 2), {}),
                     shardps::PushRequest::kGradientFieldNumber, &split);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("wire type"), std::string::npos) << s;
  // The bulk field sent as a varint: tag (15 << 3) | 0, value 1.
  static_assert(shardps::PushRequest::kGradientFieldNumber == 15);
  s = SplitBulkField(Sliced(std::string("\x78\x01", 2), {}),
                     shardps::PushRequest::kGradientFieldNumber, &split);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  // An unterminated varint.
  s = SplitBulkField(Sliced(std::string("\x08\xff\xff", 3), {}),
                     shardps::PushRequest::kGradientFieldNumber, &split);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ps
