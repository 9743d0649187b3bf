#include "model/dlrm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "gradient_check.h"

namespace model {
namespace {

TEST(DlrmSpecTest, ParsesAndNamesWhatIsWrong) {
  absl::StatusOr<DlrmSpec> spec = ParseDlrmSpec("dlrm:16-64-32");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->dim, 16);
  EXPECT_EQ(spec->hidden, (std::vector<int>{64, 32}));
  EXPECT_TRUE(IsDlrmSpec("dlrm:16-64"));
  EXPECT_FALSE(IsDlrmSpec("mlp:16-64-2"));
  for (const char* bad : {"dlrm:16", "dlrm:", "dlrm:16-0", "dlrm:16-x",
                          "dlrm:5000-8", "mlp:16-64"}) {
    absl::Status s = ParseDlrmSpec(bad).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find(bad), std::string::npos) << s;
  }
}

TEST(EmbeddingBagTest, SumsEachFieldsBagAndSpreadsItsGradient) {
  const EmbeddingBag bags(/*fields=*/2, /*bag=*/2, /*dim=*/3);
  // 1 sample: field 0 rows {1,2,3}, {10,20,30}; field 1 rows {0,0,1}, {5,5,5}.
  const std::vector<float> rows = {1, 2, 3, 10, 20, 30, 0, 0, 1, 5, 5, 5};
  std::vector<float> out(6);
  bags.Forward(rows.data(), 1, out.data());
  EXPECT_EQ(out, (std::vector<float>{11, 22, 33, 5, 5, 6}));
  const std::vector<float> dout = {1, 2, 3, 4, 5, 6};
  std::vector<float> drows(12);
  bags.Backward(dout.data(), 1, drows.data());
  EXPECT_EQ(drows, (std::vector<float>{1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6}));
}

// The loss as TrainStep computes it, from Predict's probabilities.
double MeanLoss(const Dlrm& dlrm, const std::vector<float>& params,
                const std::vector<float>& dense, const std::vector<float>& rows,
                const std::vector<int32_t>& labels, Dlrm::Workspace* ws) {
  const int batch = static_cast<int>(labels.size());
  std::vector<float> click(batch);
  dlrm.Predict(params.data(), dense.data(), rows.data(), batch, ws,
               click.data());
  double loss = 0;
  for (int i = 0; i < batch; ++i) {
    loss -= std::log(labels[i] == 1 ? click[i] : 1 - click[i]);
  }
  return loss / batch;
}

// Every row gradient and MLP gradient TrainStep writes matches central
// differences of the loss Predict implies.
TEST(DlrmTest, GradientsOfRowsAndMlpMatchFiniteDifferences) {
  absl::StatusOr<Dlrm> dlrm = Dlrm::Create(*ParseDlrmSpec("dlrm:3-5"),
                                           /*dense_features=*/2,
                                           /*fields=*/2, /*bag=*/2);
  ASSERT_TRUE(dlrm.ok()) << dlrm.status();
  EXPECT_EQ(dlrm->mlp().input_width(), 2 * 3 + 2);
  EXPECT_EQ(dlrm->mlp().num_classes(), 2);
  const int batch = 3;
  std::vector<float> params(dlrm->mlp().num_params());
  dlrm->mlp().Initialize(5, params.data());
  std::vector<float> dense = RandomVector(batch * 2, 1);
  std::vector<float> rows = RandomVector(batch * 2 * 2 * 3, 2);
  const std::vector<int32_t> labels = {1, 0, 1};
  Dlrm::Workspace ws = dlrm->MakeWorkspace(batch);
  std::vector<float> grad(params.size()), row_grads(rows.size());
  const float loss =
      dlrm->TrainStep(params.data(), dense.data(), rows.data(), labels.data(),
                      batch, grad.data(), row_grads.data(), &ws);
  EXPECT_NEAR(loss, MeanLoss(*dlrm, params, dense, rows, labels, &ws), 1e-5);
  const float eps = 1e-2f;
  auto numeric = [&](std::vector<float>* v, size_t i) {
    const float keep = (*v)[i];
    (*v)[i] = keep + eps;
    const double plus = MeanLoss(*dlrm, params, dense, rows, labels, &ws);
    (*v)[i] = keep - eps;
    const double minus = MeanLoss(*dlrm, params, dense, rows, labels, &ws);
    (*v)[i] = keep;
    return (plus - minus) / (2 * eps);
  };
  for (size_t i = 0; i < rows.size(); ++i) {
    const double want = numeric(&rows, i);
    EXPECT_NEAR(row_grads[i], want, 1e-3 + 0.02 * std::abs(want))
        << "row " << i;
  }
  for (size_t i = 0; i < params.size(); ++i) {
    const double want = numeric(&params, i);
    EXPECT_NEAR(grad[i], want, 1e-3 + 0.02 * std::abs(want)) << "param " << i;
  }
}

TEST(DlrmTest, ShapesNoModelCanTakeAreRefused) {
  const DlrmSpec spec = *ParseDlrmSpec("dlrm:8-4");
  EXPECT_FALSE(Dlrm::Create(spec, 13, 0, 1).ok());
  EXPECT_FALSE(Dlrm::Create(spec, 13, 26, 0).ok());
  EXPECT_FALSE(Dlrm::Create(spec, -1, 26, 1).ok());
}

}  // namespace
}  // namespace model
