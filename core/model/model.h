// A model built from a ModelSpec (core/model/graph.h) and one replica's training
// step over its slice of the batch on the CPU: forward, loss, backward.
// Owns its graph, parameters and every activation and gradient buffer
// (reused across steps, so a steady-state step allocates nothing).
// Not thread-safe: one thread per Model at a time; replicas are separate
// Models.
#ifndef LOCKSTEP_CORE_MODEL_MODEL_H_
#define LOCKSTEP_CORE_MODEL_MODEL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "core/job/job_spec.h"
#include "core/model/graph.h"
#include "core/tensor.h"

namespace lockstep {

struct BatchLoss {
  double loss_sum = 0;  // sum of the per-label losses over the slice
  int64_t correct = 0;  // labels argmax(output) got right
  int64_t count = 0;    // labels in the slice (a sample's masked tokens, or
                        // one per sample for classification)

  BatchLoss& operator+=(const BatchLoss& o) {
    loss_sum += o.loss_sum;
    correct += o.correct;
    count += o.count;
    return *this;
  }
  double mean_loss() const { return count ? loss_sum / count : 0.0; }
  double accuracy() const {
    return count ? static_cast<double>(correct) / count : 0.0;
  }
};

// True when `loss` is computed from the logits under the output layer's
// activation, which the forward pass then leaves out: a softmax with sparse
// categorical cross-entropy, a sigmoid with binary cross-entropy.
bool LossFusesOutputActivation(const Graph& graph, const Loss& loss);

class Model {
 public:
  // Builds the graph, initialising parameters from `seed` (the same seed
  // gives the same bytes on every machine). Errors are kInvalidArgument
  // naming the layer: "model.layers[3] (add): inputs [8] and [4] differ in
  // shape". Whether the output fits the data is the caller's check
  // (CheckDataFitsModel).
  static absl::StatusOr<std::unique_ptr<Model>> Build(const ModelSpec& spec,
                                                      uint64_t seed);

  // A sample of the batch tensor: the single input's shape, or with several
  // inputs [their values concatenated] (Graph::input_offset).
  const Shape& input_shape() const { return input_shape_; }
  const Shape& output_shape() const { return graph_->nodes().back().shape; }
  const Graph& graph() const { return *graph_; }
  // Graph order, kernel before bias. Pointers stay valid for the Model's
  // life.
  const std::vector<Param*>& params() const { return graph_->params(); }
  int64_t num_parameters() const { return graph_->num_parameters(); }
  // The loss sees [labels_per_sample x classes] per sample: the output's
  // leading axes are positions with a label each ([20, 8192] for 20 masked
  // tokens), its last axis the classes.
  int64_t labels_per_sample() const { return labels_per_sample_; }
  int64_t classes() const { return classes_; }

  // One replica's slice: forward, loss, backward. `x` is [n, input_shape]
  // (n may be 0: then every grad is zero and the result empty); labels
  // has n * labels_per_sample() entries in [0, classes), or negative for
  // "no label here". Gradients are OVERWRITTEN with d(grad_scale * sum of
  // per-label losses)/dparam. Dropout masks derive from dropout_seed.
  BatchLoss TrainStep(const Tensor& x, const int32_t* labels, const Loss& loss,
                      float grad_scale, uint64_t dropout_seed);
  // Forward in inference mode (no dropout), loss and accuracy; no gradients
  // touched.
  BatchLoss Evaluate(const Tensor& x, const int32_t* labels, const Loss& loss);
  // Forward in inference mode: the output [n, output_shape] (softmax or
  // sigmoid applied where the last layer has it), valid until the next call.
  const float* Predict(const Tensor& x);
  // The same without the last layer's softmax or sigmoid: the logits a
  // cross-entropy reads ([n, output_shape]), valid until the next call.
  const float* Logits(const Tensor& x);

  // Called during TrainStep's backward, once per param index, as soon as
  // that param's grad is final (last layer first), on the TrainStep thread.
  void SetGradReadyCallback(std::function<void(int param_index)> cb) {
    grad_ready_ = std::move(cb);
  }
  // What the training passes of layers that sum across replicas (sync
  // batch norm) sum with; null (the default): each uses its own batch.
  // With one set, TrainStep with n == 0 still runs those layers' part.
  void SetPassCollective(PassCollective* collective) {
    collective_ = collective;
  }
  // What every pass's matrix products and convolutions round their inputs
  // to (PassContext::precision): the job's "precision"; kFp32 by default.
  void SetPrecision(GemmPrecision precision) { precision_ = precision; }

 private:
  Model() = default;
  int64_t BatchSize(const Tensor& x) const;  // checks x's element count
  // Runs every layer; returns the output [n, output size].
  const float* Forward(int64_t n, const float* x, bool training,
                       bool fuse_output, uint64_t dropout_seed);
  BatchLoss ComputeLoss(int64_t n, const float* out, const int32_t* labels,
                        const Loss& loss, float grad_scale, float* grad) const;
  void Ready(int param) const {
    if (grad_ready_) grad_ready_(param);
  }

  std::unique_ptr<Graph> graph_;
  Shape input_shape_;
  int64_t labels_per_sample_ = 1, classes_ = 1;
  std::function<void(int)> grad_ready_;
  PassCollective* collective_ = nullptr;
  GemmPrecision precision_ = GemmPrecision::kFp32;

  // Per node: its LayerIO (pointer vectors sized once), pass context and
  // this pass's output. Buffers grow to the largest batch seen.
  std::vector<LayerIO> io_;
  std::vector<PassContext> ctx_;
  std::vector<const float*> outs_;
  // Node outputs share buffers where their lives do not overlap
  // (AssignActivationBuffers): what backward, the loss or Predict reads
  // keeps its own; a frozen base's intermediate outputs are recycled.
  std::vector<std::vector<float>> acts_;
  std::vector<int> act_buffer_of_;  // per node; -1: passes through always
  std::vector<int64_t> act_floats_;  // per buffer, per sample
  void AssignActivationBuffers();
  std::vector<std::vector<float>> inputs_;  // per model input (several)
  // Gradient slots share buffers where their lives in the backward plan do
  // not overlap (AssignGradientBuffers): slot s uses grads_[buffer_of_[s]]
  // (-1: a slot backward never touches), buffer b holds buffer_floats_[b]
  // floats per sample.
  std::vector<std::vector<float>> grads_;
  std::vector<int> buffer_of_;
  std::vector<int64_t> buffer_floats_;
  void AssignGradientBuffers();
  float* SlotBuffer(int slot) { return grads_[buffer_of_[slot]].data(); }
  std::vector<std::vector<float>> temps_;   // per input position: dx to add
};

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_MODEL_MODEL_H_
