// Model: builds the layer stack, then runs forward, the loss and backward
// over raw buffers. Activations live in per-layer buffers (flatten and
// inactive dropout alias their input); gradients ping-pong between two.
#include "core/model.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/param_init.h"
#include "kernels/cpu/dropout.h"
#include "kernels/cpu/mse.h"
#include "kernels/cpu/softmax_xent.h"

namespace lockstep {
namespace {

float* Grow(std::vector<float>* v, int64_t n) {
  if (static_cast<int64_t>(v->size()) < n) v->resize(n);
  return v->data();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> Model::Build(const ModelSpec& spec,
                                                    uint64_t seed) {
  const Shape& in = spec.input_shape;
  if (in.empty() ||
      std::any_of(in.begin(), in.end(), [](int64_t d) { return d <= 0; })) {
    return absl::InvalidArgumentError(
        absl::StrCat("model.input_shape: every dimension must be > 0, got ",
                     ShapeToString(in)));
  }
  if (spec.layers.empty()) {
    return absl::InvalidArgumentError("model.layers: must not be empty");
  }
  std::unique_ptr<Model> m(new Model());
  m->input_shape_ = in;
  m->max_width_ = NumElements(in);
  int counts[5] = {0, 0, 0, 0, 0};  // unnamed layers per type, as Keras
  std::set<std::string> names;
  Shape shape = in;
  bool any_params = false;
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    const LayerSpec& ls = spec.layers[i];
    std::string name = ls.name;
    if (name.empty()) {
      int& k = counts[static_cast<int>(ls.type)];
      name = DefaultLayerStem(ls.type);
      if (k > 0) absl::StrAppend(&name, "_", k);
      ++k;
    }
    if (!names.insert(name).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "model.layers[", i, "] (", name, "): the name \"", name,
          "\" is already used by an earlier layer; layer names must be "
          "unique"));
    }
    absl::StatusOr<std::unique_ptr<Layer>> layer =
        CreateLayer(ls, static_cast<int>(i), name, shape, LayerSeed(seed, i));
    if (!layer.ok()) return layer.status();
    Layer* l = layer->get();
    shape = l->output_shape();
    m->max_width_ = std::max(m->max_width_, l->output_size());
    m->first_param_.push_back(static_cast<int>(m->params_.size()));
    m->needs_dx_.push_back(any_params);
    for (Param* p : l->params()) {
      m->params_.push_back(p);
      m->num_parameters_ += p->value.size();
      any_params = true;
    }
    m->layers_.push_back(std::move(*layer));
  }
  m->output_shape_ = shape;
  const LayerSpec& last = spec.layers.back();
  m->last_is_softmax_ =
      (last.type == LayerType::kDense || last.type == LayerType::kConv2D) &&
      last.activation == Activation::kSoftmax;
  m->acts_.resize(m->layers_.size());
  m->outs_.resize(m->layers_.size());
  m->ctx_.resize(m->layers_.size());
  return m;
}

int64_t Model::BatchSize(const Tensor& x) const {
  const int64_t n = x.rank() == 0 ? 0 : x.dim(0);
  if (x.size() != n * NumElements(input_shape_)) {
    // A caller bug (the trainer checks data against the model at start-up).
    std::fprintf(stderr, "Model: input %s does not hold %lld samples of %s\n",
                 ShapeToString(x.shape()).c_str(), static_cast<long long>(n),
                 ShapeToString(input_shape_).c_str());
    std::abort();
  }
  return n;
}

const float* Model::Forward(int64_t n, const float* x, bool training,
                            bool fuse_softmax, uint64_t dropout_seed) {
  const float* in = x;
  const int last = static_cast<int>(layers_.size()) - 1;
  for (int i = 0; i <= last; ++i) {
    Layer& l = *layers_[i];
    PassContext& ctx = ctx_[i];
    ctx.training = training;
    ctx.dropout_seed = Mix64(dropout_seed ^ Mix64(static_cast<uint64_t>(i)));
    ctx.skip_softmax = fuse_softmax && i == last;
    if (l.PassesThrough(ctx)) {
      outs_[i] = in;
    } else {
      float* out = Grow(&acts_[i], n * l.output_size());
      l.Forward(n, in, out, ctx);
      outs_[i] = out;
    }
    in = outs_[i];
  }
  return in;
}

BatchLoss Model::Loss(int64_t n, const float* out, const int32_t* labels,
                      LossType loss, float grad_scale, float* grad) const {
  const int64_t classes = NumElements(output_shape_);
  LossSums s = loss == LossType::kMse
                   ? MeanSquaredError(n, classes, out, labels, grad_scale, grad)
                   : SoftmaxCrossEntropy(n, classes, out, labels, grad_scale,
                                         grad, nullptr);
  BatchLoss b;
  b.loss_sum = s.loss_sum;
  b.correct = s.correct;
  b.count = n;
  return b;
}

void Model::NotifyLayer(int layer) {
  if (!grad_ready_) return;
  const int end = layer + 1 < static_cast<int>(layers_.size())
                      ? first_param_[layer + 1]
                      : static_cast<int>(params_.size());
  for (int p = first_param_[layer]; p < end; ++p) grad_ready_(p);
}

BatchLoss Model::TrainStep(const Tensor& x, const int32_t* labels,
                           LossType loss, float grad_scale,
                           uint64_t dropout_seed) {
  const int64_t n = BatchSize(x);
  const int last = static_cast<int>(layers_.size()) - 1;
  if (n == 0) {
    for (Param* p : params_) p->grad.SetZero();
    for (int i = last; i >= 0; --i) NotifyLayer(i);
    return BatchLoss();
  }
  // Cross-entropy on a softmax output is computed from the logits: the
  // gradient is then softmax - onehot, with no Jacobian and no log(0).
  const bool fuse =
      last_is_softmax_ && loss == LossType::kSparseCategoricalCrossentropy;
  const float* out =
      Forward(n, x.data(), /*training=*/true, fuse, dropout_seed);
  float* dy = Grow(&grad_a_, n * max_width_);
  float* spare = Grow(&grad_b_, n * max_width_);
  const BatchLoss result = Loss(n, out, labels, loss, grad_scale, dy);
  for (int i = last; i >= 0; --i) {
    Layer& l = *layers_[i];
    const float* in = i == 0 ? x.data() : outs_[i - 1];
    if (!l.PassesThrough(ctx_[i])) {
      float* dx = needs_dx_[i] ? spare : nullptr;
      l.Backward(n, in, outs_[i], dy, dx, ctx_[i]);
      std::swap(dy, spare);
    }
    NotifyLayer(i);
    if (!needs_dx_[i]) break;  // nothing below has parameters
  }
  return result;
}

BatchLoss Model::Evaluate(const Tensor& x, const int32_t* labels,
                          LossType loss) {
  const int64_t n = BatchSize(x);
  if (n == 0) return BatchLoss();
  const bool fuse =
      last_is_softmax_ && loss == LossType::kSparseCategoricalCrossentropy;
  const float* out = Forward(n, x.data(), /*training=*/false, fuse, 0);
  return Loss(n, out, labels, loss, 0.0f, nullptr);
}

}  // namespace lockstep
