// The loader over http://: the same data set served by nginx must give the
// same bytes, indexes and batches as the local files, and every failure must
// name the URL (and the offset for bad data).
#include <gtest/gtest.h>

#include <random>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "loader/loader.h"
#include "loader/random_access_file.h"
#include "util/data.h"
#include "util/files.h"
#include "util/nginx_server.h"
#include "util/processes.h"

namespace loader {
namespace {

class HttpFileTest : public testing::Test {
 protected:
  static constexpr int kSamples = 901;

  void SetUp() override {
    if (!testutil::HaveNginx()) {
      GTEST_SKIP() << "nginx is not installed (deploy/install-deps.sh "
                      "installs it); the http:// reader is not tested";
    }
    data_ = dir_.path() + "/data";
    ASSERT_EQ(::mkdir(data_.c_str(), 0755), 0);
    ASSERT_NO_FATAL_FAILURE(testutil::WriteIdDataset(
        data_, {0.5f, 1, 2, 3}, /*classes=*/3, /*shards=*/3, kSamples));
    nginx_ = std::make_unique<testutil::NginxServer>(dir_.path());
    ASSERT_TRUE(nginx_->started()) << nginx_->error_log();
    url_ = nginx_->url() + "/data";
  }

  // Every id of one epoch of worker `rank` of `world`, in delivery order.
  static std::vector<int> Ids(const Dataset& ds, const char* kind, int rank,
                              int world) {
    LoaderOptions o;
    o.batch_size = 16;
    o.rank = rank;
    o.world = world;
    o.reader_threads = 3;
    o.prefetch_batches = 4;
    auto loader = *MakeLoader(kind, ds, o);
    EXPECT_TRUE(loader->StartEpoch(0).ok());
    std::vector<int> ids;
    while (true) {
      absl::StatusOr<const Batch*> b = loader->Next();
      EXPECT_TRUE(b.ok()) << b.status();
      if (!b.ok() || *b == nullptr) break;
      for (int i = 0; i < (*b)->size; ++i) {
        ids.push_back(static_cast<int>((*b)->features[i * 5]));
        EXPECT_EQ((*b)->labels[i], ids.back() % 3);
      }
    }
    return ids;
  }

  testutil::ScopedTempDir dir_;
  std::string data_, url_;
  std::unique_ptr<testutil::NginxServer> nginx_;
};

TEST_F(HttpFileTest, RangeReadsMatchTheLocalBytesFromManyThreads) {
  const std::string name = "/shard-00001.rec";
  const std::string local = testutil::ReadFile(data_ + name);
  auto file = *OpenFile(url_ + name);
  ASSERT_EQ(file->size(), local.size());
  EXPECT_EQ(file->name(), url_ + name);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 gen(t);
      std::string got;
      for (int i = 0; i < 50; ++i) {
        const uint64_t off = gen() % local.size();
        const uint64_t n = 1 + gen() % (local.size() - off);
        got.assign(n, '\0');
        ASSERT_TRUE(file->ReadExactly(off, got.data(), n, "bytes").ok());
        ASSERT_EQ(got, local.substr(off, n)) << "offset " << off;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(*ReadWholeFile(url_ + name), local);
}

TEST_F(HttpFileTest, FilesSharingConnectionsKeepTheirOwnSizesAndBytes) {
  // One handle serves both files in turn: a range read of the first must
  // not leak into the second's size request or reads.
  std::shared_ptr<HttpConnections> connections = NewHttpConnections();
  const std::string a = testutil::ReadFile(data_ + "/shard-00000.rec");
  const std::string b = testutil::ReadFile(data_ + "/shard-00001.idx");
  auto fa = *OpenFile(url_ + "/shard-00000.rec", connections);
  std::string got(10, '\0');
  ASSERT_TRUE(fa->ReadExactly(100, got.data(), 10, "bytes").ok());
  EXPECT_EQ(got, a.substr(100, 10));
  auto fb = *OpenFile(url_ + "/shard-00001.idx", connections);
  EXPECT_EQ(fb->size(), b.size());
  EXPECT_EQ(*ReadWholeFile(url_ + "/shard-00001.idx", connections), b);
  got.assign(a.size(), '\0');
  ASSERT_TRUE(fa->ReadExactly(0, got.data(), a.size(), "file").ok());
  EXPECT_EQ(got, a);
}

TEST_F(HttpFileTest, DatasetAndBothLoadersAgreeWithLocalFiles) {
  absl::StatusOr<Dataset> remote = OpenDataset(url_);
  ASSERT_TRUE(remote.ok()) << remote.status();
  const Dataset local = *OpenDataset(data_);
  EXPECT_EQ(remote->manifest.SerializeAsString(),
            local.manifest.SerializeAsString());
  ASSERT_EQ(remote->indexes.size(), local.indexes.size());
  for (size_t k = 0; k < local.indexes.size(); ++k) {
    EXPECT_EQ(remote->indexes[k].offsets, local.indexes[k].offsets);
  }
  for (const char* kind : {"sequential", "parallel"}) {
    for (int rank = 0; rank < 3; ++rank) {
      const std::vector<int> want = Ids(local, kind, rank, 3);
      EXPECT_EQ(Ids(*remote, kind, rank, 3), want) << kind << " rank " << rank;
      EXPECT_EQ(want.size(), PartitionFor(kSamples, rank, 3).end -
                                 PartitionFor(kSamples, rank, 3).begin);
    }
  }
}

TEST_F(HttpFileTest, CorruptServedRecordNamesTheUrlAndOffset) {
  const Dataset local = *OpenDataset(data_);
  const uint64_t offset = local.indexes[2].offsets[7];
  std::string bytes = testutil::ReadFile(data_ + "/shard-00002.rec");
  bytes[offset + 20] ^= 0x40;  // inside the payload
  testutil::WriteFile(data_ + "/shard-00002.rec", bytes);
  const Dataset remote = *OpenDataset(url_);
  for (const char* kind : {"sequential", "parallel"}) {
    LoaderOptions o;
    o.batch_size = 1000;
    o.reader_threads = 2;
    o.prefetch_batches = 2;
    auto loader = *MakeLoader(kind, remote, o);
    absl::Status s = loader->StartEpoch(0);
    if (s.ok()) s = loader->Next().status();
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << kind << ": " << s;
    EXPECT_NE(s.message().find(url_ + "/shard-00002.rec"), std::string::npos)
        << s;
    EXPECT_NE(s.message().find(absl::StrCat("byte offset ", offset)),
              std::string::npos)
        << s;
  }
}

TEST_F(HttpFileTest, MissingFileAndUnreachableHostAreNamedErrors) {
  absl::Status s = OpenFile(url_ + "/nope.rec").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_NE(s.message().find(url_ + "/nope.rec"), std::string::npos) << s;
  s = OpenDataset(nginx_->url() + "/elsewhere").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_NE(s.message().find("manifest"), std::string::npos) << s;

  const std::string closed = absl::StrCat(
      "http://127.0.0.1:", testutil::FreeLoopbackPort(), "/data/x.rec");
  s = OpenFile(closed).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_NE(s.message().find(closed), std::string::npos) << s;
}

}  // namespace
}  // namespace loader
