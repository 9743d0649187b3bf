// Dlrm: a small DLRM-style click model (Naumov et al., 2019). Each
// categorical field's ids go through an EmbeddingBag; the bags and the
// dense features, side by side, go through an MLP (a Network of dense ReLU
// layers) into two classes, no click and click. The embedding rows live in
// a sparse table and the MLP's weights in a dense one: a worker pulls both,
// runs TrainStep, and pushes the MLP's gradient and the rows' gradients.
//
// Spec strings: dlrm:D-H1-H2... (embedding width D, hidden layer widths);
// the fields, their bag size and the dense features are the data set's.
//
// Thread-safety: a Dlrm is immutable and may be shared; a Workspace
// belongs to one thread at a time.
#ifndef SHARDPS_MODEL_DLRM_H_
#define SHARDPS_MODEL_DLRM_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/embedding_bag.h"
#include "model/network.h"

namespace model {

struct DlrmSpec {
  std::string text;  // as given
  int dim = 0;
  std::vector<int> hidden;
};

bool IsDlrmSpec(absl::string_view spec);
// INVALID_ARGUMENT naming the spec unless it is dlrm:D-H... with every
// number in [1, 4096].
absl::StatusOr<DlrmSpec> ParseDlrmSpec(absl::string_view spec);

class Dlrm {
 public:
  // INVALID_ARGUMENT for fields, bag or dense_features out of range.
  static absl::StatusOr<Dlrm> Create(const DlrmSpec& spec, int dense_features,
                                     int fields, int bag);
  Dlrm(Dlrm&&) = default;

  const DlrmSpec& spec() const { return spec_; }
  const EmbeddingBag& embeddings() const { return bags_; }
  // Over [bags of every field, dense features] per sample; 2 classes.
  const Network& mlp() const { return mlp_; }
  int dense_features() const { return dense_; }

  struct Workspace {
    Network::Workspace mlp;
    std::vector<float> pooled, x, dx, dpooled;
    int max_batch() const { return mlp.max_batch(); }
  };
  Workspace MakeWorkspace(int max_batch) const;

  // One step on `batch` samples (<= ws->max_batch()): dense[batch x
  // dense_features()], rows[batch x ids_per_sample x dim] (the row of each
  // id position), labels 0 or 1. Writes the MLP's gradient of the mean
  // loss into mlp_grad[0, mlp().num_params()) and each id position's row
  // gradient into row_grads (shaped like rows); returns the mean loss.
  float TrainStep(const float* mlp_params, const float* dense,
                  const float* rows, const int32_t* labels, int batch,
                  float* mlp_grad, float* row_grads, Workspace* ws) const;
  // Each sample's click probability into click[batch].
  void Predict(const float* mlp_params, const float* dense, const float* rows,
               int batch, Workspace* ws, float* click) const;

 private:
  Dlrm(DlrmSpec spec, int dense, EmbeddingBag bags, Network mlp)
      : spec_(std::move(spec)),
        dense_(dense),
        bags_(bags),
        mlp_(std::move(mlp)) {}
  // ws->x from the rows' bags and the dense features.
  void Assemble(const float* dense, const float* rows, int batch,
                Workspace* ws) const;

  DlrmSpec spec_;
  int dense_;
  EmbeddingBag bags_;
  Network mlp_;
};

}  // namespace model

#endif  // SHARDPS_MODEL_DLRM_H_
