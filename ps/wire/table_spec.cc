#include "ps/wire/table_spec.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/util/message_differencer.h"
#include "ps/wire/range_partition.h"

namespace ps {
namespace {

// Barriers wider than this are refused (one WorkerProgress each).
constexpr uint32_t kMaxBarrierWorkers = 1 << 16;
// Longer than any sensible straggler wait; keeps deadlines finite.
constexpr double kMaxStragglerTimeoutSeconds = 7 * 24 * 3600;

absl::Status OutOfRange(absl::string_view optimizer, absl::string_view field,
                        float value, absl::string_view range) {
  return absl::InvalidArgumentError(absl::StrCat("optimizer '", optimizer,
                                                 "': ", field, " must be ",
                                                 range, ", got ", value));
}

// Fields the optimizer does not use must be unset, so that a mistyped
// configuration is an error rather than silently ignored.
absl::Status CheckUnused(const shardps::OptimizerConfig& c,
                         std::initializer_list<absl::string_view> used) {
  const std::pair<absl::string_view, bool> set[] = {
      {"momentum", c.momentum() != 0},
      {"nesterov", c.nesterov()},
      {"beta1", c.beta1() != 0},
      {"beta2", c.beta2() != 0},
      {"epsilon", c.epsilon() != 0},
      {"initial_accumulator", c.initial_accumulator() != 0},
  };
  for (const auto& [field, is_set] : set) {
    if (is_set && std::find(used.begin(), used.end(), field) == used.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "optimizer '", c.name(), "' does not use ", field, " (it is set)"));
    }
  }
  return absl::OkStatus();
}

bool InOpenUnit(float x) { return x > 0 && x < 1; }
bool InHalfOpenUnit(float x) { return x >= 0 && x < 1; }
bool PositiveFinite(float x) { return std::isfinite(x) && x > 0; }

absl::Status ValidateAdagrad(const shardps::OptimizerConfig& c) {
  if (!PositiveFinite(c.epsilon())) {
    return OutOfRange(c.name(), "epsilon", c.epsilon(), "finite and > 0");
  }
  if (!std::isfinite(c.initial_accumulator()) || c.initial_accumulator() < 0) {
    return OutOfRange(c.name(), "initial_accumulator", c.initial_accumulator(),
                      "finite and >= 0");
  }
  return CheckUnused(c, {"epsilon", "initial_accumulator"});
}

absl::Status ValidateAdam(const shardps::OptimizerConfig& c) {
  if (!InHalfOpenUnit(c.beta1())) {
    return OutOfRange(c.name(), "beta1", c.beta1(), "in [0, 1)");
  }
  if (!InHalfOpenUnit(c.beta2())) {
    return OutOfRange(c.name(), "beta2", c.beta2(), "in [0, 1)");
  }
  if (!PositiveFinite(c.epsilon())) {
    return OutOfRange(c.name(), "epsilon", c.epsilon(), "finite and > 0");
  }
  return CheckUnused(c, {"beta1", "beta2", "epsilon"});
}

absl::Status InvalidConsistency(absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat("consistency: ", message));
}

// `where` names `message` when it carries fields this build does not know.
absl::Status CheckKnownFields(const google::protobuf::Message& message,
                              absl::string_view where) {
  const google::protobuf::UnknownFieldSet& unknown =
      message.GetReflection()->GetUnknownFields(message);
  if (unknown.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      where, " has field number ", unknown.field(0).number(),
      ", which this server does not know (a client of another shardps "
      "version?)"));
}

absl::Status CheckAllFieldsKnown(const shardps::CreateTableRequest& spec) {
  const std::pair<const google::protobuf::Message*, const char*> parts[] = {
      {&spec, "CreateTableRequest"},
      {&spec.optimizer(), "optimizer"},
      {&spec.init(), "init"},
      {&spec.consistency(), "consistency"},
  };
  for (const auto& [message, where] : parts) {
    if (absl::Status s = CheckKnownFields(*message, where); !s.ok()) return s;
  }
  for (const shardps::InitSegment& seg : spec.init_segments()) {
    if (absl::Status s = CheckKnownFields(seg, "init segment"); !s.ok()) {
      return s;
    }
    if (absl::Status s = CheckKnownFields(seg.init(), "init segment's init");
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateInitSegments(const shardps::CreateTableRequest& spec) {
  for (const shardps::InitSegment& seg : spec.init_segments()) {
    if (seg.begin() >= seg.end() || seg.end() > spec.num_params()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "init segment [", seg.begin(), ", ", seg.end(),
          ") is empty or outside the table's ", spec.num_params(), " keys"));
    }
    if (absl::Status s = ValidateInit(seg.init()); !s.ok()) return s;
  }
  return absl::OkStatus();
}

// Collects the paths of the fields where two messages differ.
class DifferencePaths
    : public google::protobuf::util::MessageDifferencer::Reporter {
 public:
  using Path =
      std::vector<google::protobuf::util::MessageDifferencer::SpecificField>;
  static constexpr int kMaxPaths = 3;

  void ReportAdded(const google::protobuf::Message&,
                   const google::protobuf::Message&,
                   const Path& path) override {
    Add(path, " (only in the request)");
  }
  void ReportDeleted(const google::protobuf::Message&,
                     const google::protobuf::Message&,
                     const Path& path) override {
    Add(path, " (only in the existing table)");
  }
  void ReportModified(const google::protobuf::Message&,
                      const google::protobuf::Message&,
                      const Path& path) override {
    Add(path, "");
  }

  std::string Summary() const {
    std::string out = absl::StrJoin(paths_, ", ");
    if (count_ > kMaxPaths) {
      absl::StrAppend(&out, " and ", count_ - kMaxPaths, " more");
    }
    return out;
  }

 private:
  void Add(const Path& path, absl::string_view note) {
    if (++count_ > kMaxPaths) return;
    std::string joined;
    for (const auto& field : path) {
      if (!joined.empty()) joined += '.';
      if (field.field != nullptr) {
        joined += field.field->name();
        if (field.field->is_repeated() && field.index >= 0) {
          absl::StrAppend(&joined, "[", field.index, "]");
        }
      } else {
        absl::StrAppend(&joined, "field ", field.unknown_field_number);
      }
    }
    paths_.push_back(absl::StrCat(joined, note));
  }

  int count_ = 0;
  std::vector<std::string> paths_;
};

}  // namespace

absl::Status CheckName(absl::string_view what, absl::string_view name) {
  if (name.empty() || name.size() > kMaxNameLength) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " name must have 1 to ", kMaxNameLength,
                     " characters, got ", name.size()));
  }
  for (char c : name) {
    if (c <= ' ' || c > '~') {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " name must be printable ASCII without spaces"));
    }
  }
  return absl::OkStatus();
}

std::string SpecDifference(const shardps::CreateTableRequest& a,
                           const shardps::CreateTableRequest& b) {
  DifferencePaths paths;
  google::protobuf::util::MessageDifferencer differ;
  differ.ReportDifferencesTo(&paths);
  differ.Compare(a, b);
  return paths.Summary();
}

absl::Status ValidateOptimizer(const shardps::OptimizerConfig& c) {
  const std::string& name = c.name();
  if (!PositiveFinite(c.learning_rate())) {
    return OutOfRange(name, "learning_rate", c.learning_rate(),
                      "finite and > 0");
  }
  if (name == "sgd") return CheckUnused(c, {});
  if (name == "momentum") {
    if (!InOpenUnit(c.momentum())) {
      return OutOfRange(name, "momentum", c.momentum(), "in (0, 1)");
    }
    return CheckUnused(c, {"momentum", "nesterov"});
  }
  if (name == "adagrad") return ValidateAdagrad(c);
  if (name == "adam") return ValidateAdam(c);
  return absl::InvalidArgumentError(
      absl::StrCat("unknown optimizer '", name,
                   "' (supported: sgd, momentum, adagrad, adam)"));
}

absl::Status ValidateInit(const shardps::InitConfig& config) {
  const std::string& kind = config.kind();
  if (kind != "" && kind != "zeros" && kind != "constant" &&
      kind != "uniform" && kind != "normal") {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown init kind '", kind,
                     "' (supported: zeros, constant, uniform, normal)"));
  }
  if (!std::isfinite(config.value()) || !std::isfinite(config.scale()) ||
      config.scale() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("init value and scale must be finite and scale >= 0, got "
                     "value=",
                     config.value(), " scale=", config.scale()));
  }
  return absl::OkStatus();
}

absl::Status ValidateConsistency(const shardps::ConsistencyConfig& c) {
  if (!shardps::ConsistencyMode_IsValid(c.mode())) {
    return InvalidConsistency(absl::StrCat("unknown mode ",
                                           static_cast<int>(c.mode()),
                                           " (supported: async, sync, ssp)"));
  }
  if (!shardps::StragglerPolicy_IsValid(c.straggler_policy())) {
    return InvalidConsistency(absl::StrCat(
        "unknown straggler_policy ", static_cast<int>(c.straggler_policy()),
        " (supported: fail, drop)"));
  }
  if (c.mode() == shardps::CONSISTENCY_ASYNC) {
    if (c.staleness() != 0 || c.num_workers() != 0 ||
        c.straggler_timeout_seconds() != 0 ||
        c.straggler_policy() != shardps::STRAGGLER_FAIL) {
      return InvalidConsistency(
          "mode async uses none of staleness, num_workers, "
          "straggler_timeout_seconds, straggler_policy");
    }
    return absl::OkStatus();
  }
  if (c.mode() == shardps::CONSISTENCY_SSP && c.staleness() < 1) {
    return InvalidConsistency("ssp needs staleness >= 1");
  }
  if (c.mode() == shardps::CONSISTENCY_SYNC && c.staleness() != 0) {
    return InvalidConsistency("mode sync does not use staleness");
  }
  if (c.num_workers() < 1 || c.num_workers() > kMaxBarrierWorkers) {
    return InvalidConsistency(absl::StrCat("num_workers must be in [1, ",
                                           kMaxBarrierWorkers, "], got ",
                                           c.num_workers()));
  }
  const double timeout = c.straggler_timeout_seconds();
  if (!std::isfinite(timeout) || timeout <= 0 ||
      timeout > kMaxStragglerTimeoutSeconds) {
    return InvalidConsistency(
        absl::StrCat("straggler_timeout_seconds must be in (0, ",
                     kMaxStragglerTimeoutSeconds, "], got ", timeout));
  }
  return absl::OkStatus();
}

namespace {

// The fields that make a table sparse, all or none of them.
absl::Status ValidateSparseFields(const shardps::CreateTableRequest& spec) {
  if (!IsSparse(spec)) {
    if (spec.max_rows() != 0 || spec.row_sharding() != shardps::ROW_HASH ||
        spec.id_space() != 0) {
      return absl::InvalidArgumentError(
          "max_rows, row_sharding and id_space are for sparse tables (dim "
          "> 0)");
    }
    return absl::OkStatus();
  }
  if (spec.dim() > kMaxRowDim) {
    return absl::InvalidArgumentError(
        absl::StrCat("dim ", spec.dim(), " is not in [1, ", kMaxRowDim, "]"));
  }
  if (spec.max_rows() < 1 || spec.max_rows() > kMaxRowsPerShard) {
    return absl::InvalidArgumentError(absl::StrCat("max_rows ", spec.max_rows(),
                                                   " is not in [1, ",
                                                   kMaxRowsPerShard, "]"));
  }
  if (spec.row_sharding() != shardps::ROW_HASH &&
      spec.row_sharding() != shardps::ROW_RANGE) {
    return absl::InvalidArgumentError(absl::StrCat("row_sharding ",
                                                   spec.row_sharding(),
                                                   " is neither ROW_HASH nor "
                                                   "ROW_RANGE"));
  }
  if (spec.num_params() != 0) {
    return absl::InvalidArgumentError(
        "a sparse table (dim > 0) has rows, not num_params keys");
  }
  if (spec.consistency().mode() != shardps::CONSISTENCY_ASYNC) {
    return absl::InvalidArgumentError(
        "sparse tables take async consistency only");
  }
  if (spec.init_segments_size() > 0) {
    return absl::InvalidArgumentError(
        "sparse tables take one init for every row, no init_segments");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateTableSpec(const shardps::CreateTableRequest& spec) {
  if (absl::Status s = CheckAllFieldsKnown(spec); !s.ok()) return s;
  if (absl::Status s = CheckName("table", spec.table()); !s.ok()) return s;
  if (spec.num_shards() < 1 || spec.num_shards() > kMaxShards) {
    return absl::InvalidArgumentError(absl::StrCat(
        "num_shards ", spec.num_shards(), " is not in [1, ", kMaxShards, "]"));
  }
  if (spec.shard_index() >= spec.num_shards()) {
    return absl::InvalidArgumentError(
        absl::StrCat("shard_index ", spec.shard_index(), " is not in [0, ",
                     spec.num_shards(), ")"));
  }
  if (absl::Status s = ValidateOptimizer(spec.optimizer()); !s.ok()) return s;
  if (absl::Status s = ValidateConsistency(spec.consistency()); !s.ok()) {
    return s;
  }
  if (absl::Status s = ValidateInit(spec.init()); !s.ok()) return s;
  if (absl::Status s = ValidateSparseFields(spec); !s.ok()) return s;
  return ValidateInitSegments(spec);
}

absl::string_view ConsistencyModeName(shardps::ConsistencyMode mode) {
  switch (mode) {
    case shardps::CONSISTENCY_SYNC:
      return "sync";
    case shardps::CONSISTENCY_SSP:
      return "ssp";
    default:
      return "async";
  }
}

absl::string_view StragglerPolicyName(shardps::StragglerPolicy policy) {
  return policy == shardps::STRAGGLER_DROP ? "drop" : "fail";
}

absl::StatusOr<shardps::StragglerPolicy> ParseStragglerPolicy(
    absl::string_view name) {
  if (name == "fail") return shardps::STRAGGLER_FAIL;
  if (name == "drop") return shardps::STRAGGLER_DROP;
  return absl::InvalidArgumentError(
      absl::StrCat("straggler policy must be fail or drop, got '", name, "'"));
}

}  // namespace ps
