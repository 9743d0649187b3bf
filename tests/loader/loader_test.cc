#include "loader/loader.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "util/data.h"
#include "util/files.h"

namespace loader {
namespace {

using Factory = absl::StatusOr<std::unique_ptr<Loader>> (*)(
    const Dataset&, const LoaderOptions&);

struct Kind {
  const char* name;
  Factory make;
};

class LoaderTest : public testing::TestWithParam<Kind> {
 protected:
  static constexpr int kSamples = 1003;

  void SetUp() override {
    // Sample i carries its id in feature 0 and i % 7 as its label.
    ASSERT_NO_FATAL_FAILURE(testutil::WriteIdDataset(
        dir_, {1.0f, -1.0f}, /*classes=*/7, /*shards=*/4, kSamples));
    dataset_ = *OpenDataset(dir_);
  }

  std::unique_ptr<Loader> Make(int rank, int world, uint64_t seed = 1) {
    LoaderOptions o;
    o.batch_size = 10;
    o.rank = rank;
    o.world = world;
    o.seed = seed;
    o.reader_threads = 3;
    o.prefetch_batches = 4;
    absl::StatusOr<std::unique_ptr<Loader>> l = GetParam().make(dataset_, o);
    EXPECT_TRUE(l.ok()) << l.status();
    return *std::move(l);
  }

  // The ids of one epoch, in delivery order.
  std::vector<int> Epoch(Loader& loader, int epoch) {
    std::vector<int> ids;
    EXPECT_TRUE(loader.StartEpoch(epoch).ok());
    while (true) {
      absl::StatusOr<const Batch*> b = loader.Next();
      EXPECT_TRUE(b.ok()) << b.status();
      if (!b.ok() || *b == nullptr) break;
      EXPECT_LE((*b)->size, 10);
      for (int i = 0; i < (*b)->size; ++i) {
        const int id = static_cast<int>((*b)->features[i * 3]);
        EXPECT_EQ((*b)->labels[i], id % 7);
        EXPECT_EQ((*b)->features[i * 3 + 2], -1.0f);
        ids.push_back(id);
      }
    }
    return ids;
  }

  testutil::ScopedTempDir tmp_{"shardps-loader"};
  const std::string dir_ = tmp_.path();
  Dataset dataset_;
};

TEST_P(LoaderTest, EverySampleExactlyOncePerEpochAcrossWorkers) {
  const int world = 3;
  std::vector<std::unique_ptr<Loader>> loaders;
  for (int r = 0; r < world; ++r) loaders.push_back(Make(r, world));
  for (int epoch = 0; epoch < 3; ++epoch) {
    std::vector<int> all;
    for (int r = 0; r < world; ++r) {
      std::vector<int> ids = Epoch(*loaders[r], epoch);
      EXPECT_EQ(ids.size(), loaders[r]->partition_size());
      all.insert(all.end(), ids.begin(), ids.end());
    }
    std::sort(all.begin(), all.end());
    ASSERT_EQ(all.size(), static_cast<size_t>(kSamples)) << "epoch " << epoch;
    for (int i = 0; i < kSamples; ++i)
      ASSERT_EQ(all[i], i) << "epoch " << epoch;
  }
}

TEST_P(LoaderTest, ShufflingIsSeededAndChangesEachEpoch) {
  std::unique_ptr<Loader> a = Make(0, 1, 5), b = Make(0, 1, 5),
                          c = Make(0, 1, 6);
  const std::vector<int> a0 = Epoch(*a, 0), a1 = Epoch(*a, 1);
  EXPECT_EQ(a0, Epoch(*b, 0));
  EXPECT_NE(a0, a1);
  EXPECT_NE(a0, Epoch(*c, 0));
  std::vector<int> sorted = a0;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_NE(a0, sorted);
}

TEST_P(LoaderTest, AnEpochMayBeLeftEarly) {
  std::unique_ptr<Loader> loader = Make(0, 2);
  ASSERT_TRUE(loader->StartEpoch(0).ok());
  ASSERT_TRUE(loader->Next().ok());
  ASSERT_TRUE(loader->Next().ok());
  EXPECT_EQ(Epoch(*loader, 1).size(), loader->partition_size());
}

TEST_P(LoaderTest, ReportsItsReadsForTraces) {
  absl::Mutex mu;
  int reads = 0;
  absl::Duration total;
  LoaderOptions o;
  o.batch_size = 10;
  o.reader_threads = 3;
  o.on_read = [&](absl::Time start, absl::Time end) {
    absl::MutexLock lock(&mu);
    ++reads;
    EXPECT_LE(start, end);
    total += end - start;
  };
  absl::StatusOr<std::unique_ptr<Loader>> loader = GetParam().make(dataset_, o);
  ASSERT_TRUE(loader.ok()) << loader.status();
  EXPECT_EQ(Epoch(**loader, 0).size(), static_cast<size_t>(kSamples));
  loader->reset();  // joins the reader threads
  absl::MutexLock lock(&mu);
  // The sequential loader reads each of the 4 shards once; the parallel one
  // reads every batch, in up to 3 parts.
  if (std::string(GetParam().name) == "sequential") {
    EXPECT_EQ(reads, 4);
  } else {
    EXPECT_GE(reads, (kSamples + 9) / 10);
  }
  EXPECT_GT(total, absl::ZeroDuration());
}

TEST_P(LoaderTest, ReportsTheBatchesReadAhead) {
  std::unique_ptr<Loader> loader = Make(0, 1);
  ASSERT_TRUE(loader->StartEpoch(0).ok());
  const size_t batches = (kSamples + 9) / 10;
  // The parallel loader's readers fill its ring of 4; the sequential one
  // holds the whole epoch once StartEpoch returns.
  const bool prefetch = std::string(GetParam().name) == "parallel";
  const size_t full = prefetch ? 4 : batches;
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (loader->ReadyBatches() < full && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_EQ(loader->ReadyBatches(), full);
  size_t taken = 0;
  while (true) {
    absl::StatusOr<const Batch*> b = loader->Next();
    ASSERT_TRUE(b.ok()) << b.status();
    if (*b == nullptr) break;
    ++taken;
    const size_t ready = loader->ReadyBatches();
    EXPECT_LE(ready, std::min(full, batches - taken));
    if (!prefetch) EXPECT_EQ(ready, batches - taken);
  }
  EXPECT_EQ(taken, batches);
  EXPECT_EQ(loader->ReadyBatches(), 0u);
}

TEST_P(LoaderTest, CorruptRecordIsAnErrorNamingFileAndOffset) {
  // Flip a byte inside the payload of shard 2's fifth record.
  const std::string shard = dataset_.ShardPath(2);
  const uint64_t offset = dataset_.indexes[2].offsets[4];
  std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(offset + 12 + 6);
  f.put('\x7f');
  f.close();
  std::unique_ptr<Loader> loader = Make(0, 1);
  absl::Status status = loader->StartEpoch(0);
  while (status.ok()) {
    absl::StatusOr<const Batch*> b = loader->Next();
    if (!b.ok()) {
      status = b.status();
    } else if (*b == nullptr) {
      break;
    }
  }
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  EXPECT_NE(status.message().find(absl::StrCat(
                shard, ": corrupt record payload at byte offset ", offset)),
            std::string::npos)
      << status;
}

INSTANTIATE_TEST_SUITE_P(
    BothLoaders, LoaderTest,
    testing::Values(Kind{"sequential", &MakeSequentialLoader},
                    Kind{"parallel", &MakePrefetchLoader}),
    [](const testing::TestParamInfo<Kind>& info) { return info.param.name; });

}  // namespace
}  // namespace loader
