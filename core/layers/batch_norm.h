// batch_norm: normalization of each channel (the last axis) over the batch
// and every other axis (Keras BatchNormalization, PyTorch BatchNorm1d/2d),
// y = act((x - mean) / sqrt(var + epsilon) * gamma + beta).
//
// Training uses the replica's own batch statistics (the biased variance),
// as MirroredStrategy and DDP do; inference and a frozen layer use the
// running statistics. The running mean and variance are params of update
// kMovingAverage (core/tensor.h): backward adds the replica's batch mean
// and unbiased variance (PyTorch's choice), each times the replica's
// samples, to their "gradients"; the step sums those over replicas and
// workers with the gradients and moves the running values toward the
// global-batch-weighted average with Keras' momentum (running = running *
// momentum + batch * (1 - momentum); PyTorch's momentum 0.1 is 0.9 here).
// Every replica so holds the same running statistics, which are what
// MirroredStrategy's mean-aggregated moving statistics read as.
//
// `sync: true` (PyTorch's SyncBatchNorm, Keras' SyncBatchNormalization)
// normalizes with the statistics of the whole global batch instead: in
// training, forward sums every replica's rows and both moments around the
// running mean (identical on every replica), and backward sums sum(dy) and
// sum(dy * (x - mean)) before the input gradient, each through
// PassContext::collective. Where the running mean is still far from the
// batch's (d^2 > 16 (var + epsilon)), forward adds a second sum of the
// squared deviations from the mean itself, exact as the local kernel. N
// replicas of b samples then compute what one replica of N*b samples
// would; the running statistics move toward the global batch's mean and
// unbiased variance. Two small all-reduces per layer and step (three early
// on), in the pass: the price is latency, not bytes.
#ifndef LOCKSTEP_CORE_LAYERS_BATCH_NORM_H_
#define LOCKSTEP_CORE_LAYERS_BATCH_NORM_H_

#include <string>
#include <vector>

#include "core/layers/common.h"
#include "core/layers/layer.h"

namespace lockstep {

struct BatchNormConfig {
  double momentum = 0.99;  // Keras' default
  double epsilon = 1e-3;   // Keras' default (PyTorch's is 1e-5)
  // Applied to the normalized output (MobileNetV2's BN + ReLU6 as one
  // layer): linear, relu, relu6, tanh or sigmoid.
  Activation activation = Activation::kLinear;
  bool sync = false;  // statistics over every replica of the job
};

struct BatchNormNames {
  std::string gamma, beta, mean, var;
};

// Sync batch norm's statistics from its first sum over every replica,
// wire = [sum(x - shift) | sum((x - shift)^2) | rows] (2 * channels + 1
// values; shift is the running mean): the mean, the biased variance and
// the rows. True when the second, exact sum of squared deviations from the
// mean is needed (see above); its result over *rows is then the variance.
// The CPU and GPU layers share it, so they decide alike.
bool SyncMoments(int64_t channels, const float* wire, const float* shift,
                 float epsilon, float* mean, float* var, double* rows);

class BatchNormLayer : public Layer {
 public:
  BatchNormLayer(const BatchNormConfig& config, const std::string& name,
                 const Shape& input, const BatchNormNames& names);

  // gamma, beta, running mean, running variance.
  std::vector<Param*> params() override {
    return {&gamma_, &beta_, &mean_, &var_};
  }
  void Forward(const LayerIO& io, const PassContext& ctx) override;
  void Backward(const LayerIO& io, const PassContext& ctx) override;
  bool SumsAcrossReplicas() const override { return sync_; }

  float epsilon() const { return epsilon_; }
  ActivationKind act() const { return act_; }
  int64_t channels() const { return input_shape().back(); }
  int64_t Rows(int64_t n) const { return n * input_size() / channels(); }

 private:
  const float epsilon_;
  const ActivationKind act_;
  const bool sync_;
  Param gamma_, beta_, mean_, var_;
  // From the last Forward: the statistics it normalized with.
  std::vector<float> batch_mean_, batch_var_, rstd_;
  std::vector<double> partials_;
  // Sync: the rows the statistics cover (every replica's), and the
  // collectives' buffer.
  double stat_rows_ = 0;
  std::vector<float> wire_;
  std::vector<double> sums_;
  // The global batch's statistics (sync), or this replica's.
  void SyncStatistics(const LayerIO& io, const PassContext& ctx);
  void AddStatisticsContributions(const LayerIO& io);
};

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_LAYERS_BATCH_NORM_H_
