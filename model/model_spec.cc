#include "model/model_spec.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace model {

absl::StatusOr<MlpSpec> ParseModelSpec(absl::string_view spec) {
  auto bad = [spec](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model spec '", spec, "': ", why,
        " (expected mlp:IN-HIDDEN...-CLASSES, e.g. mlp:784-256-256-10)"));
  };
  absl::string_view rest = spec;
  if (!absl::ConsumePrefix(&rest, "mlp:")) return bad("unknown model kind");
  MlpSpec out;
  for (absl::string_view part : absl::StrSplit(rest, '-')) {
    int width = 0;
    if (!absl::SimpleAtoi(part, &width) || width < 1 || width > (1 << 20)) {
      return bad(absl::StrCat("width '", part, "' is not in 1..1048576"));
    }
    out.widths.push_back(width);
  }
  if (out.widths.size() < 2) return bad("needs an input and a class count");
  if (out.widths.back() < 2) return bad("needs at least 2 classes");
  return out;
}

}  // namespace model
