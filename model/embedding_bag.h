// EmbeddingBag turns a batch's categorical fields into vectors: every field
// of a sample holds a bag of `bag` ids, each id's embedding row (`dim`
// floats) is looked up, and a field's rows are summed into one vector.
// The rows come from outside, one per id position (what a worker pulled
// from a sparse table, ps::Client::PullRows), so the layer owns no
// parameters; its backward gives each position's row gradient, which a
// push of the same ids sums per row (ps::Client::PushRows).
//
// Thread-safety: immutable; the buffers belong to the caller's thread.
#ifndef SHARDPS_MODEL_EMBEDDING_BAG_H_
#define SHARDPS_MODEL_EMBEDDING_BAG_H_

#include <cstdint>

namespace model {

class EmbeddingBag {
 public:
  EmbeddingBag(int fields, int bag, int dim)
      : fields_(fields), bag_(bag), dim_(dim) {}

  int fields() const { return fields_; }
  int bag() const { return bag_; }
  int dim() const { return dim_; }
  // Id positions per sample, and output floats per sample.
  int64_t ids_per_sample() const { return int64_t{fields_} * bag_; }
  int64_t output_width() const { return int64_t{fields_} * dim_; }

  // out[batch x fields x dim]: field f of sample b is the sum of rows
  // [(b * fields + f) * bag, + bag) of rows[batch x fields x bag x dim].
  void Forward(const float* rows, int batch, float* out) const;
  // drows[batch x fields x bag x dim]: every row of a bag gets its field's
  // gradient dout[b, f].
  void Backward(const float* dout, int batch, float* drows) const;

 private:
  const int fields_, bag_, dim_;
};

}  // namespace model

#endif  // SHARDPS_MODEL_EMBEDDING_BAG_H_
