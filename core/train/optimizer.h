// Optimizers with Keras 3 semantics (SGD with momentum/Nesterov, Adam,
// AdamW): one update of every parameter from its accumulated gradient.
#ifndef LOCKSTEP_CORE_TRAIN_OPTIMIZER_H_
#define LOCKSTEP_CORE_TRAIN_OPTIMIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/job/job_spec.h"
#include "core/tensor.h"

namespace lockstep {

// Whether weight decay applies to the param named `name`: weight_decay > 0
// and no exclude_from_weight_decay pattern is a substring of the name. The
// CPU optimizer and the GPUs' fused update both ask this.
bool DecaysWeights(const OptimizerSpec& spec, const std::string& name);

class Optimizer {
 public:
  // `params` are not owned and must outlive the optimizer; each grad must
  // have as many elements as its value. The optimizer updates (and keeps
  // state for, and clips) only the params whose update is kOptimizer. Error (kInvalidArgument): a bad spec
  // field, a null param, or a grad/value size mismatch.
  static absl::StatusOr<std::unique_ptr<Optimizer>> Create(
      const OptimizerSpec& spec, const std::vector<Param*>& params);

  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // Applies one update to every param from its grad with learning rate `lr`
  // (grads are read, not cleared; with global_clipnorm they are first
  // scaled in place so their global L2 norm is at most the clip norm, as
  // Keras' global_clipnorm), then counts one iteration. Weight decay skips
  // the params whose names contain an exclude_from_weight_decay pattern.
  // Blocks; runs on the calling thread. The result depends only on the inputs,
  // so every replica that applies the same grads gets bitwise the same params.
  void Apply(double lr);

  // Updates applied so far (Keras' optimizer.iterations); Adam's bias
  // correction uses iterations() + 1. Restored from checkpoints.
  int64_t iterations() const { return iterations_; }
  // The global gradient norm the last Apply saw before clipping (0 without
  // global_clipnorm).
  double last_grad_norm() const { return last_grad_norm_; }
  // Whether weight decay applies to the param named `name`.
  bool Decays(const std::string& name) const {
    return DecaysWeights(spec_, name);
  }
  void set_iterations(int64_t n) { iterations_ = n; }

  // Named slot tensors for checkpoints: "sgd/momentum/<param>" (only when
  // momentum > 0), "adam/m/<param>", "adam/v/<param>" ("adamw/..." for
  // AdamW). Owned by the optimizer; the pointers stay valid for its life.
  std::vector<std::pair<std::string, Tensor*>> StateTensors();

 private:
  Optimizer(const OptimizerSpec& spec, const std::vector<Param*>& params);

  OptimizerSpec spec_;
  std::vector<Param*> params_;
  // Per param: momentum (SGD) or m (Adam); v (Adam). Never resized after
  // construction, so element addresses are stable.
  std::vector<Tensor> first_;
  std::vector<Tensor> second_;
  int64_t iterations_ = 0;
  std::vector<bool> decays_;  // per param
  double last_grad_norm_ = 0;

  double ClipGradients();  // returns the norm before clipping
};

// The step's update of the kMovingAverage params (core/tensor.h) after
// their "gradients" were summed over every replica of the step:
// value = value * momentum + (1 - momentum) * grad / global_samples.
// Nothing when global_samples is 0.
void UpdateMovingAverages(const std::vector<Param*>& params,
                          int64_t global_samples);

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_TRAIN_OPTIMIZER_H_
