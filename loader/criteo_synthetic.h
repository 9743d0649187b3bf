// shardps-data criteo-synthetic: click-through data in Criteo's schema
// (13 dense features, 26 categorical fields, a 0/1 click label) drawn from
// a hidden seeded model, so that the best AUC a model can reach on it is
// known and written into each split's manifest (generator_auc).
//
// The hidden model is logistic: the logit of a click is a bias, plus a
// weighted sum of the dense features (each standard normal), plus one
// weight per (field, id); a field's ids follow a Zipf law of exponent
// `zipf` over `vocabulary` values (the field's id 0 the most common), as
// real categorical features do. Ids are global: field f's value v is
// f * vocabulary + v, so one embedding table holds every field
// (manifest categorical_ids = 26 * vocabulary).
//
// Thread-safety: call from one thread.
#ifndef SHARDPS_LOADER_CRITEO_SYNTHETIC_H_
#define SHARDPS_LOADER_CRITEO_SYNTHETIC_H_

#include "absl/status/status.h"
#include "loader/data_tool.h"

namespace loader {

constexpr int kCriteoDenseFeatures = 13;
constexpr int kCriteoCategoricalFields = 26;

// Writes o.out/train and o.out/test (o.samples in all, o.test_fraction of
// them to test) from o.seed, o.vocabulary and o.zipf; a seed always gives
// the same bytes.
absl::Status WriteCriteoSynthetic(const DataToolOptions& o);

}  // namespace loader

#endif  // SHARDPS_LOADER_CRITEO_SYNTHETIC_H_
