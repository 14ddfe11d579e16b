// Model: the graph's forward, the loss and the planned backward over host
// buffers. Pass-through layers (flatten, inactive dropout) alias their
// input's activation and gradient; a gradient that several layers feed is
// written by the first and added to by the rest, in the plan's fixed order.
#include "core/model.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/cpu/bce.h"
#include "kernels/cpu/dropout.h"
#include "kernels/cpu/elementwise.h"
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
  std::unique_ptr<Model> m(new Model());
  absl::StatusOr<std::unique_ptr<Graph>> graph = Graph::Build(spec, seed);
  if (!graph.ok()) return graph.status();
  m->graph_ = std::move(*graph);
  const Graph& g = *m->graph_;
  m->input_shape_ =
      g.num_inputs() == 1 ? g.node(0).shape : Shape{g.input_floats()};
  const Shape& out = g.nodes().back().shape;
  m->classes_ = out.back();
  m->labels_per_sample_ = NumElements(out) / std::max<int64_t>(out.back(), 1);
  const size_t nodes = g.nodes().size();
  m->io_.resize(nodes);
  m->ctx_.resize(nodes);
  m->outs_.resize(nodes);
  m->acts_.resize(nodes);
  m->inputs_.resize(g.num_inputs());
  m->grads_.resize(g.num_slots());
  size_t max_inputs = 1;
  for (size_t i = g.num_inputs(); i < nodes; ++i) {
    const GraphNode& node = g.node(static_cast<int>(i));
    LayerIO& io = m->io_[i];
    io.x.resize(node.inputs.size());
    io.dx.resize(node.inputs.size());
    for (int p : node.params) {
      io.w.push_back(g.params()[p]->value.data());
      io.dw.push_back(g.params()[p]->grad.data());
    }
    max_inputs = std::max(max_inputs, node.inputs.size());
  }
  m->temps_.resize(max_inputs);
  std::vector<bool> used(g.num_slots(), false);
  used[g.grad_slot(g.output())] = true;  // the loss writes it
  for (const BackwardStep& step : g.backward_plan()) {
    used[g.grad_slot(step.node)] = true;
    for (int s : step.dx_slot) {
      if (s >= 0) used[s] = true;
    }
  }
  for (int s = 0; s < g.num_slots(); ++s) {
    if (used[s]) m->backward_slots_.push_back(s);
  }
  return m;
}

int64_t Model::BatchSize(const Tensor& x) const {
  const int64_t n = x.rank() == 0 ? 0 : x.dim(0);
  if (x.size() != n * graph_->input_floats()) {
    // A caller bug (the trainer checks data against the model at start-up).
    std::fprintf(stderr, "Model: input %s does not hold %lld samples of %s\n",
                 ShapeToString(x.shape()).c_str(), static_cast<long long>(n),
                 ShapeToString(input_shape_).c_str());
    std::abort();
  }
  return n;
}

const float* Model::Forward(int64_t n, const float* x, bool training,
                            bool fuse_output, uint64_t dropout_seed) {
  const Graph& g = *graph_;
  const int inputs = g.num_inputs();
  if (inputs == 1) {
    outs_[0] = x;
  } else {
    // A sample holds every input's values in turn: give each input its own
    // [n, size] buffer.
    const int64_t per = g.input_floats();
    for (int i = 0; i < inputs; ++i) {
      const int64_t size = g.node(i).size, offset = g.input_offset(i);
      float* dst = Grow(&inputs_[i], n * size);
      for (int64_t s = 0; s < n; ++s) {
        std::memcpy(dst + s * size, x + s * per + offset, sizeof(float) * size);
      }
      outs_[i] = dst;
    }
  }
  const int output = g.output();
  for (int i = inputs; i <= output; ++i) {
    const GraphNode& node = g.node(i);
    PassContext& ctx = ctx_[i];
    ctx.training = training && !node.frozen;
    ctx.dropout_seed =
        Mix64(dropout_seed ^ Mix64(static_cast<uint64_t>(node.layer_index)));
    ctx.skip_output_activation = fuse_output && i == output;
    if (node.layer->PassesThrough(ctx)) {
      outs_[i] = outs_[node.inputs[0]];
      continue;
    }
    LayerIO& io = io_[i];
    io.n = n;
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      io.x[k] = outs_[node.inputs[k]];
    }
    io.y = Grow(&acts_[i], n * node.size);
    node.layer->Forward(io, ctx);
    outs_[i] = io.y;
  }
  return outs_[output];
}

bool LossFusesOutputActivation(const Graph& graph, LossType loss) {
  switch (loss) {
    case LossType::kSparseCategoricalCrossentropy:
      return graph.output_has_softmax();
    case LossType::kBinaryCrossentropy:
      return graph.output_has_sigmoid();
    case LossType::kMse:
      break;
  }
  return false;
}

BatchLoss Model::Loss(int64_t n, const float* out, const int32_t* labels,
                      LossType loss, float grad_scale, float* grad) const {
  const int64_t rows = n * labels_per_sample_;
  LossSums s;
  switch (loss) {
    case LossType::kMse:
      s = MeanSquaredError(rows, classes_, out, labels, grad_scale, grad);
      break;
    case LossType::kBinaryCrossentropy:  // one logit per label (the trainer
                                         // checks)
      s = BinaryCrossEntropy(rows, out, labels, grad_scale, grad);
      break;
    case LossType::kSparseCategoricalCrossentropy:
      s = SoftmaxCrossEntropy(rows, classes_, out, labels, grad_scale, grad,
                              nullptr);
      break;
  }
  BatchLoss b;
  b.loss_sum = s.loss_sum;
  b.correct = s.correct;
  b.count = s.count;
  return b;
}

BatchLoss Model::TrainStep(const Tensor& x, const int32_t* labels,
                           LossType loss, float grad_scale,
                           uint64_t dropout_seed) {
  const Graph& g = *graph_;
  const int64_t n = BatchSize(x);
  // Layers add their parameter gradients (a tied weight gets two).
  for (Param* p : g.params()) p->grad.SetZero();
  for (int p : g.untouched_params()) Ready(p);
  if (n == 0) {
    for (const BackwardStep& step : g.backward_plan()) {
      for (int p : step.ready_params) Ready(p);
    }
    return BatchLoss();
  }
  // Cross-entropy on a softmax (sigmoid) output is computed from the
  // logits: the gradient is then softmax - onehot (sigmoid - label), with no
  // Jacobian and no log(0).
  const bool fuse = LossFusesOutputActivation(g, loss);
  const float* out =
      Forward(n, x.data(), /*training=*/true, fuse, dropout_seed);
  // Only the slots backward uses: none for a frozen base's layers.
  for (int s : backward_slots_) Grow(&grads_[s], n * g.slot_size(s));
  const BatchLoss result = Loss(n, out, labels, loss, grad_scale,
                                grads_[g.grad_slot(g.output())].data());
  for (const BackwardStep& step : g.backward_plan()) {
    const GraphNode& node = g.node(step.node);
    LayerIO& io = io_[step.node];
    io.dy = grads_[g.grad_slot(step.node)].data();
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      io.x[k] = outs_[node.inputs[k]];
      const int slot = step.dx_slot[k];
      if (slot < 0) {
        io.dx[k] = nullptr;
      } else if (step.dx_add[k]) {
        io.dx[k] = Grow(&temps_[k], n * g.slot_size(slot));
      } else {
        io.dx[k] = grads_[slot].data();
      }
    }
    io.y = const_cast<float*>(outs_[step.node]);
    node.layer->Backward(io, ctx_[step.node]);
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      if (step.dx_slot[k] >= 0 && step.dx_add[k]) {
        Axpy(n * g.slot_size(step.dx_slot[k]), 1.0f, io.dx[k],
             grads_[step.dx_slot[k]].data());
      }
    }
    for (int p : step.ready_params) Ready(p);
  }
  return result;
}

BatchLoss Model::Evaluate(const Tensor& x, const int32_t* labels,
                          LossType loss) {
  const int64_t n = BatchSize(x);
  if (n == 0) return BatchLoss();
  const bool fuse = LossFusesOutputActivation(*graph_, loss);
  const float* out = Forward(n, x.data(), /*training=*/false, fuse, 0);
  return Loss(n, out, labels, loss, 0.0f, nullptr);
}

const float* Model::Predict(const Tensor& x) {
  const int64_t n = BatchSize(x);
  if (n == 0) return nullptr;
  return Forward(n, x.data(), /*training=*/false, /*fuse_output=*/false, 0);
}

const float* Model::Logits(const Tensor& x) {
  const int64_t n = BatchSize(x);
  if (n == 0) return nullptr;
  return Forward(n, x.data(), /*training=*/false, /*fuse_output=*/true, 0);
}

}  // namespace lockstep
