// Loaders turn a data set (loader/dataset.h) into this worker's batches.
// Both give worker `rank` of `world` the same partition, a contiguous block
// of the data set's records (computed from the manifest and the indexes
// alone), and shuffle it each epoch with (seed, epoch); they differ in how
// they read, which is the experiment:
//
//  SequentialLoader: the baseline, as CNTK did it. Before the first batch it
//    reads every shard of the data set, one after another in one thread,
//    keeping its own partition in memory; training then never overlaps with
//    reading.
//  PrefetchLoader: the fix. It reads only its partition, with reader_threads
//    threads filling a ring of prefetch_batches batches ahead of the
//    consumer, so the first batch is ready after about one batch's read.
//
// Thread-safety: one consumer thread calls StartEpoch and Next.
#ifndef SHARDPS_LOADER_LOADER_H_
#define SHARDPS_LOADER_LOADER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "loader/dataset.h"

namespace loader {

struct Batch {
  int size = 0;                 // rows in use
  std::vector<float> features;  // size x FeatureCount(manifest), row-major
  std::vector<int32_t> labels;  // size
  // size x manifest categorical_fields, row-major (empty without them)
  std::vector<uint64_t> ids;
};

struct LoaderOptions {
  int batch_size = 128;
  int rank = 0;
  int world = 1;
  uint64_t seed = 1;
  int reader_threads = 4;    // PrefetchLoader only
  int prefetch_batches = 8;  // PrefetchLoader only
  // When set, called on the reading thread after each read (a part of a
  // batch for PrefetchLoader, a shard for SequentialLoader) with its start
  // and end: how a worker traces data reads. Must be thread-safe.
  std::function<void(absl::Time start, absl::Time end)> on_read;
};

// Worker `rank`'s share of `records` records: [begin, end).
struct Partition {
  uint64_t begin = 0;
  uint64_t end = 0;
};
Partition PartitionFor(uint64_t records, int rank, int world);

class Loader {
 public:
  virtual ~Loader() = default;

  uint64_t partition_size() const { return partition_.end - partition_.begin; }

  // Begins epoch `epoch` (0, 1, ...): reshuffles the partition. The
  // SequentialLoader does its full read in the first call.
  virtual absl::Status StartEpoch(int epoch) = 0;

  // The next batch of the epoch, valid until the next call; nullptr once the
  // epoch is done. Bad data is an error naming the file and offset.
  virtual absl::StatusOr<const Batch*> Next() = 0;

  // Batches of the epoch read and waiting for Next(): the prefetch queue's
  // depth (for the SequentialLoader, which holds the whole partition in
  // memory, the rest of the epoch).
  virtual size_t ReadyBatches() = 0;

 protected:
  Loader(const Dataset& dataset, const LoaderOptions& options);

  // Record ids of this epoch's order: global ids in [begin, end).
  void Shuffle(int epoch);
  // Where global record `id` lies: its shard and its bytes [offset, end).
  struct Extent {
    size_t shard;
    uint64_t offset;
    uint64_t end;
  };
  Extent Locate(uint64_t id) const;
  // DecodeSample for the record of `file` at `offset`; errors name both.
  absl::Status Decode(const RecordReader& file, uint64_t offset,
                      absl::string_view payload, float* features,
                      int32_t* label, uint64_t* ids) const;

  const Dataset& dataset_;
  const LoaderOptions options_;
  const uint64_t features_;  // per sample
  const uint64_t fields_;    // categorical ids per sample
  Partition partition_;
  std::vector<uint64_t> first_id_;  // per shard: its first global record id
  std::vector<uint64_t> order_;     // this epoch's ids
};

// INVALID_ARGUMENT unless batch_size >= 1 and 0 <= rank < world (and, for the
// PrefetchLoader, reader_threads >= 1 and prefetch_batches >= 2).
absl::Status CheckLoaderOptions(const LoaderOptions& options, bool prefetch);

// The loader named by --loader: "sequential" or "parallel".
absl::StatusOr<std::unique_ptr<Loader>> MakeLoader(
    absl::string_view kind, const Dataset& dataset,
    const LoaderOptions& options);
absl::StatusOr<std::unique_ptr<Loader>> MakeSequentialLoader(
    const Dataset& dataset, const LoaderOptions& options);
absl::StatusOr<std::unique_ptr<Loader>> MakePrefetchLoader(
    const Dataset& dataset, const LoaderOptions& options);

}  // namespace loader

#endif  // SHARDPS_LOADER_LOADER_H_
