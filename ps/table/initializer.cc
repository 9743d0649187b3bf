#include "ps/table/initializer.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "absl/strings/str_cat.h"

namespace ps {
namespace {

// Random values are drawn per block of keys from a generator seeded with
// (seed, block index), so any sub-range can be produced without the rest.
constexpr uint64_t kRandomBlock = 1024;

template <typename Distribution>
void FillRandom(uint64_t seed, KeyRange keys, float* out, Distribution dist) {
  for (uint64_t block = keys.begin / kRandomBlock;
       block * kRandomBlock < keys.end; ++block) {
    std::seed_seq seq{
        static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32),
        static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32)};
    std::mt19937 gen(seq);
    dist.reset();
    const uint64_t first = block * kRandomBlock;
    const uint64_t last = std::min(first + kRandomBlock, keys.end);
    for (uint64_t key = first; key < last; ++key) {
      const float v = dist(gen);
      if (key >= keys.begin) out[key - keys.begin] = v;
    }
  }
}

// A row's values from a small generator seeded with (seed, id): creating a
// row costs about as much as writing it.
template <typename Distribution>
void FillRandomRow(uint64_t seed, uint64_t id, uint32_t dim, float* out,
                   Distribution dist) {
  std::seed_seq seq{static_cast<uint32_t>(seed),
                    static_cast<uint32_t>(seed >> 32),
                    static_cast<uint32_t>(id), static_cast<uint32_t>(id >> 32)};
  std::minstd_rand gen(seq);
  for (uint32_t j = 0; j < dim; ++j) out[j] = dist(gen);
}

}  // namespace

void FillInitialRow(const shardps::InitConfig& config, uint64_t id,
                    uint32_t dim, float* out) {
  const std::string& kind = config.kind();
  if (kind == "constant") {
    std::fill(out, out + dim, config.value());
  } else if (kind == "uniform") {
    FillRandomRow(
        config.seed(), id, dim, out,
        std::uniform_real_distribution<float>(-config.scale(), config.scale()));
  } else if (kind == "normal") {
    FillRandomRow(config.seed(), id, dim, out,
                  std::normal_distribution<float>(0.0f, config.scale()));
  } else {
    std::fill(out, out + dim, 0.0f);
  }
}

void FillInitialValues(const shardps::InitConfig& config, KeyRange keys,
                       float* out) {
  const std::string& kind = config.kind();
  if (kind == "constant") {
    std::fill(out, out + keys.size(), config.value());
  } else if (kind == "uniform") {
    FillRandom(
        config.seed(), keys, out,
        std::uniform_real_distribution<float>(-config.scale(), config.scale()));
  } else if (kind == "normal") {
    FillRandom(config.seed(), keys, out,
               std::normal_distribution<float>(0.0f, config.scale()));
  } else {
    std::fill(out, out + keys.size(), 0.0f);
  }
}

}  // namespace ps
