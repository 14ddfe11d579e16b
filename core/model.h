// A sequential model built from a ModelSpec, and one replica's training
// step over its slice of the batch: forward, loss, backward. Owns its layers,
// parameters and every activation and gradient buffer (reused across steps,
// so a steady-state step allocates nothing). Not thread-safe: one thread per
// Model at a time; replicas are separate Models.
#ifndef LOCKSTEP_CORE_MODEL_H_
#define LOCKSTEP_CORE_MODEL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "core/job_spec.h"
#include "core/layer.h"
#include "core/tensor.h"

namespace lockstep {

struct BatchLoss {
  double loss_sum = 0;  // sum of per-sample losses over the slice
  int64_t correct = 0;  // argmax(output) == label count
  int64_t count = 0;    // samples in the slice

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

class Model {
 public:
  // Validates shapes layer by layer and builds, initialising parameters from
  // `seed` (the same seed gives the same bytes on every machine). Errors are
  // kInvalidArgument naming the layer: "model.layers[3] (dense): expects a
  // flat input, got [13, 13, 32]; add a flatten layer before it". Whether the
  // output matches the number of classes is the caller's check.
  static absl::StatusOr<std::unique_ptr<Model>> Build(const ModelSpec& spec,
                                                      uint64_t seed);

  const Shape& input_shape() const { return input_shape_; }    // per sample
  const Shape& output_shape() const { return output_shape_; }  // per sample
  // Layer order, kernel before bias. Pointers stay valid for the Model's life.
  const std::vector<Param*>& params() { return params_; }
  const std::vector<Param*>& params() const { return params_; }
  int64_t num_parameters() const { return num_parameters_; }
  int num_layers() const { return static_cast<int>(layers_.size()); }
  const Layer& layer(int i) const { return *layers_[i]; }

  // One replica's slice: forward, loss, backward. `x` is [n, ...] with
  // prod(input_shape) values per sample (n may be 0: then every grad is zero
  // and the result empty); labels has n entries in [0, classes). Gradients
  // are OVERWRITTEN with d(grad_scale * sum of per-sample losses)/dparam.
  // Dropout masks derive from dropout_seed.
  BatchLoss TrainStep(const Tensor& x, const int32_t* labels, LossType loss,
                      float grad_scale, uint64_t dropout_seed);
  // Forward in inference mode (no dropout), loss and accuracy; no gradients
  // touched.
  BatchLoss Evaluate(const Tensor& x, const int32_t* labels, LossType loss);

  // Called during TrainStep's backward, once per param index, as soon as that
  // param's grad is final (last layer first), on the TrainStep thread.
  void SetGradReadyCallback(std::function<void(int param_index)> cb) {
    grad_ready_ = std::move(cb);
  }

 private:
  Model() = default;
  int64_t BatchSize(const Tensor& x) const;  // checks x's element count
  // Runs every layer; returns the final output [n, output size].
  const float* Forward(int64_t n, const float* x, bool training,
                       bool fuse_softmax, uint64_t dropout_seed);
  BatchLoss Loss(int64_t n, const float* out, const int32_t* labels,
                 LossType loss, float grad_scale, float* grad) const;
  void NotifyLayer(int layer);

  Shape input_shape_, output_shape_;
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<Param*> params_;
  std::vector<int> first_param_;  // per layer: its first index in params_
  std::vector<bool> needs_dx_;    // some earlier layer has params
  int64_t num_parameters_ = 0;
  int64_t max_width_ = 0;         // largest per-sample activation size
  bool last_is_softmax_ = false;  // the last layer's activation is softmax
  std::function<void(int)> grad_ready_;

  // Buffers grown to the largest batch seen, never shrunk.
  std::vector<std::vector<float>> acts_;  // per layer output
  std::vector<const float*> outs_;        // per layer, this pass
  std::vector<PassContext> ctx_;          // per layer, this pass
  std::vector<float> grad_a_, grad_b_;    // ping-pong d(loss)/d(activation)
};

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_MODEL_H_
