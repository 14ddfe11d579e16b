// Model: the graph's forward, the loss and the planned backward over host
// buffers. Pass-through layers (flatten, inactive dropout) alias their
// input's activation and gradient; a gradient that several layers feed is
// written by the first and added to by the rest, in the plan's fixed order.
#include "core/model/model.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/cpu/dropout.h"
#include "kernels/cpu/elementwise.h"

namespace lockstep {
namespace {

float* Grow(std::vector<float>* v, int64_t n) {
  if (static_cast<int64_t>(v->size()) < n) v->resize(n);
  return v->data();
}

// Buffers shared by values whose lives do not overlap. Take gives a value
// of `floats` per sample the smallest free buffer that holds it, else the
// largest free one (grown), else a new one; Release frees a buffer for the
// values after. floats()[b] is buffer b's size per sample.
class BufferPlan {
 public:
  int Take(int64_t want) {
    int best = -1;
    for (size_t i = 0; i < free_.size(); ++i) {
      if (best < 0) {
        best = static_cast<int>(i);
        continue;
      }
      const int64_t cap = floats_[free_[i]], cur = floats_[free_[best]];
      const bool fits = cap >= want, cur_fits = cur >= want;
      if ((fits && (!cur_fits || cap < cur)) ||
          (!fits && !cur_fits && cap > cur)) {
        best = static_cast<int>(i);
      }
    }
    if (best < 0) {
      floats_.push_back(want);
      return static_cast<int>(floats_.size() - 1);
    }
    const int b = free_[best];
    free_.erase(free_.begin() + best);
    floats_[b] = std::max(floats_[b], want);
    return b;
  }
  void Release(int b) { free_.push_back(b); }
  const std::vector<int64_t>& floats() const { return floats_; }

 private:
  std::vector<int64_t> floats_;
  std::vector<int> free_;
};

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
  m->inputs_.resize(g.num_inputs());
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
  m->AssignGradientBuffers();
  m->AssignActivationBuffers();
  return m;
}

void Model::AssignActivationBuffers() {
  const Graph& g = *graph_;
  const int n = static_cast<int>(g.nodes().size());
  const int inputs = g.num_inputs();
  constexpr int kForever = 1 << 30;
  PassContext training, inference;
  training.training = true;
  auto may_pass = [&](int i) {
    const Layer* l = g.node(i).layer;
    if (l == nullptr) return false;
    PassContext t = training;
    t.training = !g.node(i).frozen;
    return l->PassesThrough(t) || l->PassesThrough(inference);
  };
  auto always_passes = [&](int i) {
    const Layer* l = g.node(i).layer;
    PassContext t = training;
    t.training = !g.node(i).frozen;
    return l != nullptr && l->PassesThrough(t) && l->PassesThrough(inference);
  };
  // The last forward position that reads each node's output; forever for
  // the output (the loss, Predict) and what backward reads (a step's node
  // and its inputs).
  std::vector<int> last(n, -1);
  for (int j = inputs; j < n; ++j) {
    for (int k : g.node(j).inputs) last[k] = std::max(last[k], j);
  }
  last[n - 1] = kForever;
  for (const BackwardStep& step : g.backward_plan()) {
    last[step.node] = kForever;
    for (int k : g.node(step.node).inputs) last[k] = kForever;
  }
  // A node that may pass its input through makes its readers its input's.
  for (int i = n - 1; i >= inputs; --i) {
    if (may_pass(i)) {
      const int k = g.node(i).inputs[0];
      last[k] = std::max(last[k], last[i]);
    }
  }
  // Forward order: a node takes a buffer, then the buffers whose last
  // reader it is are free for the nodes after it (one no node reads at
  // once).
  std::vector<std::vector<int>> release_after(n);
  for (int k = inputs; k < n; ++k) {
    if (last[k] < 0) {
      release_after[k].push_back(k);
    } else if (last[k] < n) {
      release_after[last[k]].push_back(k);
    }
  }
  act_buffer_of_.assign(n, -1);
  BufferPlan plan;
  for (int i = inputs; i < n; ++i) {
    if (!always_passes(i)) act_buffer_of_[i] = plan.Take(g.node(i).size);
    for (int k : release_after[i]) {
      if (act_buffer_of_[k] >= 0) plan.Release(act_buffer_of_[k]);
    }
  }
  act_floats_ = plan.floats();
  acts_.assign(act_floats_.size(), {});
}

void Model::AssignGradientBuffers() {
  const Graph& g = *graph_;
  // A slot is live from its first write (the loss for the output's, before
  // step 0; else the first step whose dx lands there) to the step that
  // reads it as dy; then its buffer serves a later slot. A step's dx never
  // shares the buffer of its own dy, which is freed after the step.
  buffer_of_.assign(g.num_slots(), -1);
  BufferPlan plan;
  auto take = [&](int slot) {
    if (buffer_of_[slot] < 0) buffer_of_[slot] = plan.Take(g.slot_size(slot));
  };
  take(g.grad_slot(g.output()));
  for (const BackwardStep& step : g.backward_plan()) {
    for (int s : step.dx_slot) {
      if (s >= 0) take(s);
    }
    const int dy = g.grad_slot(step.node);
    if (buffer_of_[dy] >= 0) plan.Release(buffer_of_[dy]);
  }
  buffer_floats_ = plan.floats();
  grads_.assign(buffer_floats_.size(), {});
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
    ctx.collective = training ? collective_ : nullptr;
    ctx.collective_key = PassCollectiveKey(i);
    ctx.precision = precision_;
    if (node.layer->PassesThrough(ctx)) {
      outs_[i] = outs_[node.inputs[0]];
      continue;
    }
    LayerIO& io = io_[i];
    io.n = n;
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      io.x[k] = outs_[node.inputs[k]];
    }
    const int b = act_buffer_of_[i];
    io.y = Grow(&acts_[b], n * act_floats_[b]);
    node.layer->Forward(io, ctx);
    outs_[i] = io.y;
  }
  return outs_[output];
}

bool LossFusesOutputActivation(const Graph& graph, const Loss& loss) {
  return FusesOutputActivation(loss, graph.output_has_softmax(),
                               graph.output_has_sigmoid());
}

BatchLoss Model::ComputeLoss(int64_t n, const float* out, const int32_t* labels,
                             const Loss& loss, float grad_scale,
                             float* grad) const {
  // Binary cross-entropy reads one logit per label (the trainer checks).
  const LossSums s = loss.compute(n * labels_per_sample_, classes_, out, labels,
                                  grad_scale, grad);
  BatchLoss b;
  b.loss_sum = s.loss_sum;
  b.correct = s.correct;
  b.count = s.count;
  return b;
}

BatchLoss Model::TrainStep(const Tensor& x, const int32_t* labels,
                           const Loss& loss, float grad_scale,
                           uint64_t dropout_seed) {
  const Graph& g = *graph_;
  const int64_t n = BatchSize(x);
  // Layers add their parameter gradients (a tied weight gets two), each
  // zeroed just before the first backward step that adds to it.
  for (int p : g.untouched_params()) {
    g.params()[p]->grad.SetZero();
    Ready(p);
  }
  if (n == 0) {
    for (Param* p : g.params()) p->grad.SetZero();
    // No samples: the layers that sum across replicas still take their
    // part (with nothing to add), so the others are not left waiting.
    const bool join = collective_ != nullptr && g.sums_across_replicas();
    for (int i = g.num_inputs(); join && i <= g.output(); ++i) {
      const GraphNode& node = g.node(i);
      if (node.frozen || !node.layer->SumsAcrossReplicas()) continue;
      PassContext& ctx = ctx_[i];
      ctx.training = true;
      ctx.collective = collective_;
      ctx.collective_key = PassCollectiveKey(i);
      io_[i].n = 0;
      node.layer->Forward(io_[i], ctx);
    }
    for (const BackwardStep& step : g.backward_plan()) {
      const GraphNode& node = g.node(step.node);
      if (join && node.layer->SumsAcrossReplicas()) {
        LayerIO& io = io_[step.node];
        io.n = 0;
        io.dy = nullptr;
        for (float*& dx : io.dx) dx = nullptr;
        node.layer->Backward(io, ctx_[step.node]);
      }
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
  for (size_t b = 0; b < grads_.size(); ++b) {
    Grow(&grads_[b], n * buffer_floats_[b]);
  }
  const BatchLoss result = ComputeLoss(n, out, labels, loss, grad_scale,
                                       SlotBuffer(g.grad_slot(g.output())));
  for (const BackwardStep& step : g.backward_plan()) {
    const GraphNode& node = g.node(step.node);
    LayerIO& io = io_[step.node];
    io.dy = SlotBuffer(g.grad_slot(step.node));
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      io.x[k] = outs_[node.inputs[k]];
      const int slot = step.dx_slot[k];
      if (slot < 0) {
        io.dx[k] = nullptr;
      } else if (step.dx_add[k]) {
        io.dx[k] = Grow(&temps_[k], n * g.slot_size(slot));
      } else {
        io.dx[k] = SlotBuffer(slot);
      }
    }
    io.y = const_cast<float*>(outs_[step.node]);
    for (int p : step.first_params) g.params()[p]->grad.SetZero();
    node.layer->Backward(io, ctx_[step.node]);
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      if (step.dx_slot[k] >= 0 && step.dx_add[k]) {
        Axpy(n * g.slot_size(step.dx_slot[k]), 1.0f, io.dx[k],
             SlotBuffer(step.dx_slot[k]));
      }
    }
    for (int p : step.ready_params) Ready(p);
  }
  return result;
}

BatchLoss Model::Evaluate(const Tensor& x, const int32_t* labels,
                          const Loss& loss) {
  const int64_t n = BatchSize(x);
  if (n == 0) return BatchLoss();
  const bool fuse = LossFusesOutputActivation(*graph_, loss);
  const float* out = Forward(n, x.data(), /*training=*/false, fuse, 0);
  return ComputeLoss(n, out, labels, loss, 0.0f, nullptr);
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
