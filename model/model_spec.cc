#include "model/model_spec.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace model {
namespace {

constexpr int kMaxWidth = 1 << 20;
constexpr int kMaxKernel = 64;

bool ParseInt(absl::string_view text, int low, int high, int* out) {
  return absl::SimpleAtoi(text, out) && *out >= low && *out <= high;
}

// "28x28" or "28x28x3"; nullopt when `token` is not a shape.
std::optional<Shape> ParseShape(absl::string_view token) {
  std::vector<absl::string_view> dims = absl::StrSplit(token, 'x');
  if (dims.size() < 2 || dims.size() > 3) return std::nullopt;
  Shape s;
  if (!ParseInt(dims[0], 1, kMaxWidth, &s.height) ||
      !ParseInt(dims[1], 1, kMaxWidth, &s.width) ||
      (dims.size() == 3 && !ParseInt(dims[2], 1, kMaxWidth, &s.channels))) {
    return std::nullopt;
  }
  return s;
}

// cFkK, pP or fN; an error says which token is wrong.
absl::StatusOr<LayerSpec> ParseCnnLayer(absl::string_view token) {
  LayerSpec layer;
  absl::string_view rest = token;
  if (absl::ConsumePrefix(&rest, "c")) {
    layer.kind = LayerSpec::Kind::kConv;
    std::vector<absl::string_view> fk = absl::StrSplit(rest, 'k');
    if (fk.size() == 2 && ParseInt(fk[0], 1, kMaxWidth, &layer.units) &&
        ParseInt(fk[1], 1, kMaxKernel, &layer.kernel)) {
      return layer;
    }
  } else if (absl::ConsumePrefix(&rest, "p")) {
    layer.kind = LayerSpec::Kind::kMaxPool;
    layer.relu = false;
    if (ParseInt(rest, 1, kMaxKernel, &layer.kernel)) return layer;
  } else if (absl::ConsumePrefix(&rest, "f")) {
    if (ParseInt(rest, 1, kMaxWidth, &layer.units)) return layer;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "layer '", token,
      "' is not cFkK (F filters of K x K, K <= 64), pP (P x P max pooling) "
      "or fN (N dense units), with F and N in 1..1048576"));
}

absl::Status ParseCnn(absl::string_view rest, ModelSpec* out) {
  std::vector<absl::string_view> tokens = absl::StrSplit(rest, '-');
  size_t first = 0;
  if (std::optional<Shape> input = ParseShape(tokens[0]); input.has_value()) {
    out->input = input;
    first = 1;
  }
  if (tokens.size() < first + 2) {
    return absl::InvalidArgumentError("needs at least one layer and classes");
  }
  bool flat = false;  // after a dense layer there is no image left
  for (size_t i = first; i + 1 < tokens.size(); ++i) {
    absl::StatusOr<LayerSpec> layer = ParseCnnLayer(tokens[i]);
    if (!layer.ok()) return layer.status();
    if (flat && layer->kind != LayerSpec::Kind::kDense) {
      return absl::InvalidArgumentError(absl::StrCat(
          "layer '", tokens[i], "' comes after a dense layer, which flattens"));
    }
    flat = flat || layer->kind == LayerSpec::Kind::kDense;
    out->layers.push_back(*layer);
  }
  LayerSpec classes;
  classes.relu = false;
  if (!ParseInt(tokens.back(), 2, kMaxWidth, &classes.units)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the last entry '", tokens.back(),
                     "' is not a class count in 2..", kMaxWidth));
  }
  out->layers.push_back(classes);
  return absl::OkStatus();
}

absl::Status ParseMlp(absl::string_view rest, ModelSpec* out) {
  std::vector<int> widths;
  for (absl::string_view part : absl::StrSplit(rest, '-')) {
    int width = 0;
    if (!ParseInt(part, 1, kMaxWidth, &width)) {
      return absl::InvalidArgumentError(
          absl::StrCat("width '", part, "' is not in 1..", kMaxWidth));
    }
    widths.push_back(width);
  }
  if (widths.size() < 2) {
    return absl::InvalidArgumentError("needs an input and a class count");
  }
  if (widths.back() < 2) {
    return absl::InvalidArgumentError("needs at least 2 classes");
  }
  out->input = Shape{1, 1, widths.front()};
  for (size_t i = 1; i < widths.size(); ++i) {
    LayerSpec dense;
    dense.units = widths[i];
    dense.relu = i + 1 < widths.size();
    out->layers.push_back(dense);
  }
  return absl::OkStatus();
}

}  // namespace

std::string ShapeString(const Shape& shape) {
  if (shape.height == 1 && shape.width == 1)
    return absl::StrCat(shape.channels);
  return absl::StrCat(shape.height, "x", shape.width, "x", shape.channels);
}

absl::StatusOr<ModelSpec> ParseModelSpec(absl::string_view spec) {
  ModelSpec out;
  out.text = std::string(spec);
  absl::string_view rest = spec;
  absl::Status parsed;
  if (absl::ConsumePrefix(&rest, "mlp:")) {
    parsed = ParseMlp(rest, &out);
  } else if (absl::ConsumePrefix(&rest, "cnn:")) {
    parsed = ParseCnn(rest, &out);
  } else {
    parsed = absl::InvalidArgumentError("unknown model kind");
  }
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model spec '", spec, "': ", parsed.message(),
        " (expected mlp:IN-HIDDEN...-CLASSES, e.g. mlp:784-256-256-10, or "
        "cnn:[HxWxC-]LAYERS...-CLASSES, e.g. cnn:c32k5-p2-c64k5-p2-f1024-10)"));
  }
  return out;
}

}  // namespace model
