#include "model/dlrm.h"

#include <algorithm>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace model {
namespace {

constexpr char kPrefix[] = "dlrm:";
constexpr int kMaxWidth = 4096;

}  // namespace

bool IsDlrmSpec(absl::string_view spec) {
  return absl::StartsWith(spec, kPrefix);
}

absl::StatusOr<DlrmSpec> ParseDlrmSpec(absl::string_view spec) {
  absl::string_view rest = spec;
  std::vector<int> numbers;
  bool ok = absl::ConsumePrefix(&rest, kPrefix);
  for (absl::string_view part : absl::StrSplit(rest, '-')) {
    int n = 0;
    ok = ok && absl::SimpleAtoi(part, &n) && n >= 1 && n <= kMaxWidth;
    numbers.push_back(n);
  }
  if (!ok || numbers.size() < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model spec '", spec,
        "': a click model is dlrm:D-H1-H2... (embedding width D, at least "
        "one hidden layer width; each in [1, ",
        kMaxWidth, "])"));
  }
  DlrmSpec out;
  out.text = std::string(spec);
  out.dim = numbers[0];
  out.hidden.assign(numbers.begin() + 1, numbers.end());
  return out;
}

absl::StatusOr<Dlrm> Dlrm::Create(const DlrmSpec& spec, int dense_features,
                                  int fields, int bag) {
  if (dense_features < 0 || fields < 1 || bag < 1 ||
      int64_t{fields} * bag * spec.dim + dense_features > (1 << 20)) {
    return absl::InvalidArgumentError(
        absl::StrCat("model spec '", spec.text, "' cannot take ", fields,
                     " categorical fields of ", bag, " ids and ",
                     dense_features, " dense features"));
  }
  ModelSpec mlp;
  mlp.text = spec.text;
  mlp.input = Shape{1, 1, fields * spec.dim + dense_features};
  for (int units : spec.hidden) {
    mlp.layers.push_back({LayerSpec::Kind::kDense, units, 0, /*relu=*/true});
  }
  mlp.layers.push_back({LayerSpec::Kind::kDense, 2, 0, /*relu=*/false});
  absl::StatusOr<Network> net = Network::Create(mlp, std::nullopt);
  if (!net.ok()) return net.status();
  return Dlrm(spec, dense_features, EmbeddingBag(fields, bag, spec.dim),
              *std::move(net));
}

Dlrm::Workspace Dlrm::MakeWorkspace(int max_batch) const {
  Workspace ws{mlp_.MakeWorkspace(max_batch)};
  const int64_t n = max_batch;
  ws.pooled.resize(n * bags_.output_width());
  ws.dpooled.resize(n * bags_.output_width());
  ws.x.resize(n * mlp_.input_width());
  ws.dx.resize(n * mlp_.input_width());
  return ws;
}

void Dlrm::Assemble(const float* dense, const float* rows, int batch,
                    Workspace* ws) const {
  bags_.Forward(rows, batch, ws->pooled.data());
  const int64_t width = mlp_.input_width(), pooled = bags_.output_width();
  for (int b = 0; b < batch; ++b) {
    float* x = ws->x.data() + b * width;
    std::copy_n(ws->pooled.data() + b * pooled, pooled, x);
    std::copy_n(dense + int64_t{b} * dense_, dense_, x + pooled);
  }
}

float Dlrm::TrainStep(const float* mlp_params, const float* dense,
                      const float* rows, const int32_t* labels, int batch,
                      float* mlp_grad, float* row_grads, Workspace* ws) const {
  Assemble(dense, rows, batch, ws);
  const float loss =
      mlp_.TrainStep(mlp_params, ws->x.data(), labels, batch, mlp_grad,
                     &ws->mlp, /*observer=*/nullptr, ws->dx.data());
  const int64_t width = mlp_.input_width(), pooled = bags_.output_width();
  for (int b = 0; b < batch; ++b) {
    std::copy_n(ws->dx.data() + b * width, pooled,
                ws->dpooled.data() + b * pooled);
  }
  bags_.Backward(ws->dpooled.data(), batch, row_grads);
  return loss;
}

void Dlrm::Predict(const float* mlp_params, const float* dense,
                   const float* rows, int batch, Workspace* ws,
                   float* click) const {
  std::vector<float> probs(2);
  for (int first = 0; first < batch; first += ws->max_batch()) {
    const int n = std::min(ws->max_batch(), batch - first);
    Assemble(dense + int64_t{first} * dense_,
             rows + first * bags_.ids_per_sample() * bags_.dim(), n, ws);
    probs.resize(2 * n);
    mlp_.Probabilities(mlp_params, ws->x.data(), n, &ws->mlp, probs.data());
    for (int r = 0; r < n; ++r) click[first + r] = probs[2 * r + 1];
  }
}

}  // namespace model
