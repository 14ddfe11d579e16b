// Optimizers with Keras 3 semantics (SGD with momentum/Nesterov, Adam,
// AdamW): one update of every parameter from its accumulated gradient.
#ifndef LOCKSTEP_CORE_TRAIN_OPTIMIZER_H_
#define LOCKSTEP_CORE_TRAIN_OPTIMIZER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
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

// Elements [offset, offset + data->size()) of the optimizer state tensor
// `name` of shape `shape`: a whole tensor (offset 0, data of `shape`), or a
// rank's part of it when the state is sharded.
struct StatePiece {
  std::string name;
  Shape shape;
  int64_t offset = 0;
  Tensor* data = nullptr;
};

// The optimizer state a checkpoint takes from this process: whole tensors,
// or with sharded state (cluster.shard) this rank's parts of the job's
// `tensors` state tensors (the other ranks hold the rest).
struct OptimizerParts {
  bool sharded = false;
  int tensors = 0;
  std::vector<StatePiece> pieces;
  // The whole tensors by name (unsharded).
  std::vector<std::pair<std::string, const Tensor*>> Whole() const {
    std::vector<std::pair<std::string, const Tensor*>> out;
    for (const StatePiece& p : pieces) out.emplace_back(p.name, p.data);
    return out;
  }
};

class Optimizer {
 public:
  // `params` are not owned and must outlive the optimizer; each grad must
  // have as many elements as its value. The optimizer updates (and keeps
  // state for, and clips) only the params whose update is kOptimizer.
  // `owned`: a sharded optimizer (cluster.shard, ZeRO-1) updates and keeps
  // state for these ranges only (of any params; those not kOptimizer are
  // ignored); other ranks own the rest. Error (kInvalidArgument): a bad
  // spec field, a null param, a grad/value size mismatch, a range outside
  // its param.
  static absl::StatusOr<std::unique_ptr<Optimizer>> Create(
      const OptimizerSpec& spec, const std::vector<Param*>& params,
      std::optional<std::vector<ParamRange>> owned = std::nullopt);

  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // Applies one update to every param (every owned range) from its grad
  // with learning rate `lr` (grads are read, not cleared; with
  // global_clipnorm they are first scaled in place so their global L2 norm
  // is at most the clip norm, as Keras' global_clipnorm), then counts one
  // iteration. Weight decay skips the params whose names contain an
  // exclude_from_weight_decay pattern. Blocks; runs on the calling thread.
  // The result depends only on the inputs, so every replica that applies
  // the same grads gets bitwise the same params. The norm is exact
  // (core/train/square_sum.h): a sharded optimizer sums its ranges' part
  // over the ranks with `over_ranks` (SquareSum::kWireFloats values, in
  // place) and clips with the same bits as an unsharded one; its errors
  // are returned, nothing updated.
  using RankSum = std::function<absl::Status(float* values, int count)>;
  absl::Status Apply(double lr, const RankSum& over_ranks);
  void Apply(double lr) { Apply(lr, nullptr).IgnoreError(); }
  // Apply in two halves: the global gradient norm (over the ranks with
  // `over_ranks` when sharded; 0 without global_clipnorm), then the update
  // with it. The copy of the previous rank's part (cluster.shard copies)
  // is updated with its owner's norm, so with its owner's bits.
  absl::StatusOr<double> GlobalNorm(const RankSum& over_ranks) const;
  void ApplyWithNorm(double lr, double norm);

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
  // Whole tensors: an unsharded optimizer's (StatePieces otherwise).
  std::vector<std::pair<std::string, Tensor*>> StateTensors();
  // The state this optimizer holds, in StateTensors' order: whole tensors,
  // or when sharded the owned parts (a tensor's parts are spread over the
  // ranks; a rank may hold none of one).
  std::vector<StatePiece> StatePieces();
  // Every state tensor of the whole optimizer (over all ranks when sharded).
  int num_state_tensors() const;
  bool sharded() const { return sharded_; }
  // Floats of optimizer state held here.
  int64_t state_elements() const;

 private:
  // A run of one param's elements with its state: a whole param, or an
  // owned range of one (sharded).
  struct Piece {
    Param* param = nullptr;
    int64_t begin = 0, size = 0;
    bool decays = false;
    // Momentum (SGD) or m (Adam); v (Adam): [size], or the param's shape
    // when whole. Never resized, so element addresses are stable.
    Tensor first, second;
  };
  Optimizer(const OptimizerSpec& spec, const std::vector<Param*>& params,
            const std::optional<std::vector<ParamRange>>& owned);
  int slots() const;  // state tensors per param: 0, 1 or 2
  std::string SlotName(int slot, const Param& p) const;
  // Scales the grads so their norm (`norm` now) is the clip norm, then
  // updates, and counts the iteration.
  void Update(double lr, double norm);

  OptimizerSpec spec_;
  bool sharded_ = false;
  int num_params_ = 0;  // kOptimizer params in all
  std::vector<Piece> pieces_;
  int64_t iterations_ = 0;
  double last_grad_norm_ = 0;
};

// The step's update of the kMovingAverage params (core/tensor.h) after
// their "gradients" were summed over every replica of the step:
// value = value * momentum + (1 - momentum) * grad / global_samples.
// Nothing when global_samples is 0.
void UpdateMovingAverages(const std::vector<Param*>& params,
                          int64_t global_samples);

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_TRAIN_OPTIMIZER_H_
