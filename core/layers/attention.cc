// multi_head_attention on the CPU: the projections as single GEMMs over all
// positions, then every (sample, head) pair in parallel with its own small
// GEMMs (OpenBLAS single-threaded inside the pool), the masked softmax in
// between with a vectorized exp.
#include "core/layers/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "core/layers/registry.h"
#include "kernels/cpu/dropout.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/threading.h"

namespace lockstep {
namespace {

using spec_reader::Json;
using spec_reader::Reader;

absl::Status ReadAttention(const Reader& r, AttentionConfig* c) {
  RETURN_IF_ERROR(r.Require("num_heads", "a multi_head_attention layer"));
  RETURN_IF_ERROR(r.Int("num_heads", 1, &c->num_heads));
  RETURN_IF_ERROR(r.Int("key_dim", 1, &c->key_dim));
  RETURN_IF_ERROR(r.Number("dropout", spec_reader::kUnitOpen, &c->dropout));
  RETURN_IF_ERROR(r.Bool("use_bias", &c->use_bias));
  return ReadInitializer(r, "kernel_initializer", &c->kernel_initializer);
}

Json AttentionToJson(const AttentionConfig& c) {
  Json j;
  j["num_heads"] = c.num_heads;
  if (c.key_dim > 0) j["key_dim"] = c.key_dim;
  j["dropout"] = c.dropout;
  j["use_bias"] = c.use_bias;
  j["kernel_initializer"] = InitializerToJson(c.kernel_initializer);
  return j;
}

absl::StatusOr<std::unique_ptr<Layer>> CreateAttention(
    const AttentionConfig& c, const LayerBuildContext& ctx) {
  const Shape& x = ctx.inputs[0];
  if (x.size() != 2) {
    return ctx.Error(absl::StrCat("expects a sequence [length, width], got ",
                                  ShapeToString(x)));
  }
  if (ctx.inputs.size() == 2 && ctx.inputs[1] != Shape{x[0]}) {
    return ctx.Error(absl::StrCat("the padding mask ", ctx.input_names[1],
                                  " must be [", x[0],
                                  "] (one per position), "
                                  "got ",
                                  ShapeToString(ctx.inputs[1])));
  }
  if (c.key_dim == 0 && x[1] % c.num_heads != 0) {
    return ctx.Error(absl::StrCat("the width ", x[1],
                                  " is not a multiple of num_heads ",
                                  c.num_heads, "; give key_dim"));
  }
  return std::unique_ptr<Layer>(std::make_unique<MultiHeadAttentionLayer>(
      c, ctx.name, ctx.inputs, ctx.naming, ctx.init_seed));
}

LOCKSTEP_REGISTER_LAYER(
    multi_head_attention,
    MakeLayerType<AttentionConfig>(
        "multi_head_attention", "multi_head_attention",
        {"num_heads", "key_dim", "dropout", "use_bias", "kernel_initializer"},
        1, 2, &ReadAttention, &AttentionToJson, &CreateAttention));

std::string Name(const std::string& layer, ParamNaming naming,
                 const char* keras, const char* torch) {
  return naming == ParamNaming::kTorch ? absl::StrCat(layer, ".", torch)
                                       : absl::StrCat(layer, "/", keras);
}

// Inverted dropout of (sample, head) `sh`'s [l, l] probabilities (or their
// gradient: the same mask), element indices running over every head.
void DropProbabilities(uint64_t seed, int64_t sh, int64_t l, float rate,
                       const float* in, float* out) {
  DropoutRange(sh * l * l, l * l, rate, seed, in, out);
}

float* Grow(std::vector<float>* v, int64_t n) {
  if (static_cast<int64_t>(v->size()) < n) v->resize(n);
  return v->data();
}

}  // namespace

MultiHeadAttentionLayer::MultiHeadAttentionLayer(
    const AttentionConfig& config, const std::string& name,
    const std::vector<Shape>& inputs, ParamNaming naming, uint64_t seed)
    : Layer("multi_head_attention", name, inputs, inputs[0]),
      config_(config),
      key_dim_(config.key_dim > 0 ? config.key_dim
                                  : inputs[0][1] / config.num_heads),
      out_in_(naming == ParamNaming::kTorch) {
  const int64_t w = inputs[0][1], in = inner();
  const Shape proj = out_in_ ? Shape{in, w} : Shape{w, in};
  const Shape back = out_in_ ? Shape{w, in} : Shape{in, w};
  struct Spec {
    Param* weight;
    Param* bias;
    const char *keras, *torch;
    Shape shape;
    int64_t fan_in, fan_out;  // the bias has fan_out values
  };
  const Spec specs[] = {
      {&wq_, &bq_, "query", "self.query", proj, w, in},
      {&wk_, &bk_, "key", "self.key", proj, w, in},
      {&wv_, &bv_, "value", "self.value", proj, w, in},
      {&wo_, &bo_, "attention_output", "output.dense", back, in, w}};
  uint64_t s = seed;
  for (const Spec& p : specs) {
    MakeParam(Name(name, naming, (std::string(p.keras) + "/kernel").c_str(),
                   (std::string(p.torch) + ".weight").c_str()),
              p.shape, p.weight);
    Initialize(config.kernel_initializer, s++, p.fan_in, p.fan_out,
               &p.weight->value);
    if (config.use_bias) {
      MakeParam(Name(name, naming, (std::string(p.keras) + "/bias").c_str(),
                     (std::string(p.torch) + ".bias").c_str()),
                {p.fan_out}, p.bias);
    }
  }
}

std::vector<Param*> MultiHeadAttentionLayer::params() {
  if (!config_.use_bias) return {&wq_, &wk_, &wv_, &wo_};
  return {&wq_, &bq_, &wk_, &bk_, &wv_, &bv_, &wo_, &bo_};
}

float MultiHeadAttentionLayer::scale() const {
  return 1.0f / std::sqrt(static_cast<float>(key_dim_));
}

void MultiHeadAttentionLayer::Project(GemmPrecision precision, int64_t rows,
                                      int64_t in, int64_t out, const float* x,
                                      const float* w, const float* b,
                                      float* y) const {
  float beta = 0.0f;
  if (b != nullptr) {
    for (int64_t r = 0; r < rows; ++r) std::copy(b, b + out, y + r * out);
    beta = 1.0f;
  }
  Gemm(precision, false, out_in_, rows, out, in, 1.0f, x, in, w,
       out_in_ ? in : out, beta, y, out);
}

void MultiHeadAttentionLayer::Forward(const LayerIO& io,
                                      const PassContext& ctx) {
  const int64_t n = io.n, l = length(), w = width(), h = heads(), d = key_dim_,
                in = inner(), rows = n * l;
  const bool bias = config_.use_bias;
  // io.w: q, [bq,] k, [bk,] v, [bv,] o, [bo].
  const int step = bias ? 2 : 1;
  auto weight = [&](int i) { return io.w[i * step]; };
  auto b = [&](int i) { return bias ? io.w[i * step + 1] : nullptr; };
  float* q = Grow(&q_, rows * in);
  float* k = Grow(&k_, rows * in);
  float* v = Grow(&v_, rows * in);
  float* probs = Grow(&probs_, n * h * l * l);
  float* context = Grow(&context_, rows * in);
  Project(ctx.precision, rows, w, in, io.x[0], weight(0), b(0), q);
  Project(ctx.precision, rows, w, in, io.x[0], weight(1), b(1), k);
  Project(ctx.precision, rows, w, in, io.x[0], weight(2), b(2), v);
  const float sc = scale(), rate = this->rate();
  const bool drop = ctx.training && rate > 0.0f;
  const float* mask = masked() ? io.x[1] : nullptr;
  ParallelFor(n * h, 1, [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> dropped;
    for (int64_t sh = begin; sh < end; ++sh) {
      const int64_t s = sh / h, head = sh % h;
      const float* qh = q + s * l * in + head * d;
      const float* kh = k + s * l * in + head * d;
      const float* vh = v + s * l * in + head * d;
      float* p = probs + sh * l * l;
      Gemm(ctx.precision, false, true, l, l, d, sc, qh, in, kh, in, 0.0f, p, l);
      const float* m = mask != nullptr ? mask + s * l : nullptr;
      for (int64_t i = 0; i < l; ++i) MaskedSoftmaxRow(l, m, p + i * l);
      const float* use = p;
      if (drop) {
        dropped.resize(l * l);
        DropProbabilities(ctx.dropout_seed, sh, l, rate, p, dropped.data());
        use = dropped.data();
      }
      Gemm(ctx.precision, false, false, l, d, l, 1.0f, use, l, vh, in, 0.0f,
           context + s * l * in + head * d, in);
    }
  });
  Project(ctx.precision, rows, in, w, context, weight(3), b(3), io.y);
}

void MultiHeadAttentionLayer::Backward(const LayerIO& io,
                                       const PassContext& ctx) {
  const int64_t n = io.n, l = length(), w = width(), h = heads(), d = key_dim_,
                in = inner(), rows = n * l;
  const bool bias = config_.use_bias;
  const int step = bias ? 2 : 1;
  auto weight = [&](int i) { return io.w[i * step]; };
  auto dweight = [&](int i) { return io.dw[i * step]; };
  auto dbias = [&](int i) { return bias ? io.dw[i * step + 1] : nullptr; };
  const float* dout = io.dy;
  float* dcontext = Grow(&dcontext_, rows * in);
  float* dq = Grow(&dq_, rows * in);
  float* dk = Grow(&dk_, rows * in);
  float* dv = Grow(&dv_, rows * in);
  // The output projection.
  Gemm(ctx.precision, false, !out_in_, rows, in, w, 1.0f, dout, w, weight(3),
       out_in_ ? in : w, 0.0f, dcontext, in);
  if (out_in_) {
    Gemm(ctx.precision, true, false, w, in, rows, 1.0f, dout, w,
         context_.data(), in, 1.0f, dweight(3), in);
  } else {
    Gemm(ctx.precision, true, false, in, w, rows, 1.0f, context_.data(), in,
         dout, w, 1.0f, dweight(3), w);
  }
  if (bias) BiasGrad(rows, w, dout, dbias(3));
  const float sc = scale(), rate = this->rate();
  const bool drop = ctx.training && rate > 0.0f;
  const float* q = q_.data();
  const float* k = k_.data();
  const float* v = v_.data();
  ParallelFor(n * h, 1, [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> dropped, dp;
    for (int64_t sh = begin; sh < end; ++sh) {
      const int64_t s = sh / h, head = sh % h;
      const int64_t off = s * l * in + head * d;
      const float* p = probs_.data() + sh * l * l;
      const float* use = p;
      if (drop) {
        dropped.resize(l * l);
        DropProbabilities(ctx.dropout_seed, sh, l, rate, p, dropped.data());
        use = dropped.data();
      }
      // dV = P'^T dC; dP' = dC V^T.
      Gemm(ctx.precision, true, false, l, d, l, 1.0f, use, l, dcontext + off,
           in, 0.0f, dv + off, in);
      dp.resize(l * l);
      Gemm(ctx.precision, false, true, l, l, d, 1.0f, dcontext + off, in,
           v + off, in, 0.0f, dp.data(), l);
      // Through the dropout (the same mask), then the softmax:
      // dS = P (dP - <dP, P>) times the score scale.
      if (drop) {
        DropProbabilities(ctx.dropout_seed, sh, l, rate, dp.data(), dp.data());
      }
      for (int64_t i = 0; i < l; ++i) {
        SoftmaxBackwardRow(l, p + i * l, sc, dp.data() + i * l);
      }
      // dQ = dS K; dK = dS^T Q.
      Gemm(ctx.precision, false, false, l, d, l, 1.0f, dp.data(), l, k + off,
           in, 0.0f, dq + off, in);
      Gemm(ctx.precision, true, false, l, d, l, 1.0f, dp.data(), l, q + off, in,
           0.0f, dk + off, in);
    }
  });
  // The input projections: weight and bias gradients, and dx summed over
  // the three.
  const float* x = io.x[0];
  const float* grads[] = {dq, dk, dv};
  for (int i = 0; i < 3; ++i) {
    if (out_in_) {
      Gemm(ctx.precision, true, false, in, w, rows, 1.0f, grads[i], in, x, w,
           1.0f, dweight(i), w);
    } else {
      Gemm(ctx.precision, true, false, w, in, rows, 1.0f, x, w, grads[i], in,
           1.0f, dweight(i), in);
    }
    if (bias) BiasGrad(rows, in, grads[i], dbias(i));
  }
  if (io.dx[0] != nullptr) {
    for (int i = 0; i < 3; ++i) {
      Gemm(ctx.precision, false, !out_in_, rows, w, in, 1.0f, grads[i], in,
           weight(i), out_in_ ? w : in, i == 0 ? 0.0f : 1.0f, io.dx[0], w);
    }
  }
  if (masked() && io.dx[1] != nullptr) {
    std::fill(io.dx[1], io.dx[1] + n * l, 0.0f);
  }
}

}  // namespace lockstep
