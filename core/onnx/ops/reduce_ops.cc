#include "core/onnx/ops/reduce_ops.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "core/onnx/ops/op_util.h"
#include "kernels/cpu/threading.h"

namespace lockstep {
namespace onnx_ops {
namespace {

absl::StatusOr<std::unique_ptr<Layer>> CreateReduce(
    const Json& c, const LayerBuildContext& ctx) {
  const Shape& in = ctx.inputs[0];
  const std::string op = c.value("op", std::string());
  if (op != "sum" && op != "mean") return ctx.Error("unknown reduce op");
  ASSIGN_OR_RETURN(Shape axes, ShapeField(c, "axes", ctx));
  const bool keep = c.value("keepdims", true);
  std::vector<bool> reduced(in.size(), false);
  for (int64_t a : axes) {
    if (a >= static_cast<int64_t>(in.size())) {
      return ctx.Error(
          absl::StrCat("reduces axis ", a, " of ", ShapeToString(in)));
    }
    reduced[a] = true;
  }
  // Each input element's output element: the strides of the output over
  // the input's axes, 0 along a reduced one.
  Shape out, kept_dims;
  for (size_t d = 0; d < in.size(); ++d) {
    if (!reduced[d]) kept_dims.push_back(in[d]);
    if (!reduced[d] || keep) out.push_back(reduced[d] ? 1 : in[d]);
  }
  std::vector<int64_t> stride(in.size(), 0);
  int64_t s = 1;
  for (size_t d = in.size(); d-- > 0;) {
    if (reduced[d]) continue;
    stride[d] = s;
    s *= in[d];
  }
  std::vector<int64_t> target(NumElements(in));
  ForEachBroadcast(in, stride, stride,
                   [&](int64_t i, int64_t o, int64_t) { target[i] = o; });
  return std::unique_ptr<Layer>(
      new ReduceOp(ctx.name, in, out, op == "mean", std::move(target)));
}

absl::StatusOr<std::unique_ptr<Layer>> CreateSoftmax(
    const Json& c, const LayerBuildContext& ctx) {
  const int axis = c.value("axis", -1);
  if (axis < 0 || axis >= static_cast<int>(ctx.inputs[0].size())) {
    return ctx.Error(absl::StrCat("softmax along axis ", axis, " of ",
                                  ShapeToString(ctx.inputs[0])));
  }
  return std::unique_ptr<Layer>(
      new SoftmaxOp(ctx.name, ctx.inputs[0], axis, c.value("log", false)));
}

absl::StatusOr<std::unique_ptr<Layer>> CreateConcat(
    const Json& c, const LayerBuildContext& ctx) {
  const int axis = c.value("axis", -1);
  const Shape& first = ctx.inputs[0];
  if (axis < 0 || axis >= static_cast<int>(first.size())) {
    return ctx.Error(absl::StrCat("concatenates along axis ", axis, " of ",
                                  ShapeToString(first)));
  }
  Shape out = first;
  out[axis] = 0;
  for (const Shape& s : ctx.inputs) {
    Shape a = s, b = first;
    if (a.size() != b.size()) return ctx.Error("inputs of different ranks");
    a[axis] = b[axis] = 0;
    if (a != b) {
      return ctx.Error(absl::StrCat("cannot concatenate ", ShapeToString(s),
                                    " with ", ShapeToString(first),
                                    " along axis ", axis));
    }
    out[axis] += s[axis];
  }
  return std::unique_ptr<Layer>(new ConcatOp(ctx.name, ctx.inputs, out, axis));
}

LOCKSTEP_REGISTER_ONNX_OP(reduce, "onnx_reduce", 1, 1, &CreateReduce);
LOCKSTEP_REGISTER_ONNX_OP(softmax, "onnx_softmax", 1, 1, &CreateSoftmax);
LOCKSTEP_REGISTER_ONNX_OP(concat, "onnx_concat", 1, -1, &CreateConcat);

}  // namespace

ReduceOp::ReduceOp(const std::string& name, const Shape& in, Shape out,
                   bool mean, std::vector<int64_t> target)
    : Layer("onnx_reduce", name, {in}, std::move(out)),
      mean_(mean),
      target_(std::move(target)) {
  if (mean_ && output_size() > 0) {
    scale_ = static_cast<float>(static_cast<double>(output_size()) /
                                static_cast<double>(input_size()));
  }
}

void ReduceOp::Forward(const LayerIO& io, const PassContext&) {
  const int64_t in = input_size(), out = output_size();
  ParallelFor(io.n, 1, [&](int64_t begin, int64_t end) {
    for (int64_t s = begin; s < end; ++s) {
      const float* x = io.x[0] + s * in;
      float* y = io.y + s * out;
      std::fill(y, y + out, 0.0f);
      for (int64_t i = 0; i < in; ++i) y[target_[i]] += x[i];
      if (mean_) {
        for (int64_t o = 0; o < out; ++o) y[o] *= scale_;
      }
    }
  });
}

void ReduceOp::Backward(const LayerIO& io, const PassContext&) {
  if (io.dx[0] == nullptr) return;
  const int64_t in = input_size(), out = output_size();
  const float k = mean_ ? scale_ : 1.0f;
  ParallelFor(io.n, 1, [&](int64_t begin, int64_t end) {
    for (int64_t s = begin; s < end; ++s) {
      const float* dy = io.dy + s * out;
      float* dx = io.dx[0] + s * in;
      for (int64_t i = 0; i < in; ++i) dx[i] = dy[target_[i]] * k;
    }
  });
}

SoftmaxOp::SoftmaxOp(const std::string& name, const Shape& in, int axis,
                     bool log)
    : Layer("onnx_softmax", name, {in}, in), log_(log) {
  for (int d = 0; d < axis; ++d) outer_ *= in[d];
  size_ = in[axis];
  for (size_t d = axis + 1; d < in.size(); ++d) inner_ *= in[d];
}

void SoftmaxOp::Forward(const LayerIO& io, const PassContext&) {
  const int64_t per = input_size();
  ParallelFor(io.n * outer_, 1, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* x =
          io.x[0] + (r / outer_) * per + (r % outer_) * size_ * inner_;
      float* y = io.y + (x - io.x[0]);
      for (int64_t j = 0; j < inner_; ++j) {
        float top = -INFINITY;
        for (int64_t k = 0; k < size_; ++k)
          top = std::max(top, x[k * inner_ + j]);
        double sum = 0;
        for (int64_t k = 0; k < size_; ++k) {
          sum += std::exp(static_cast<double>(x[k * inner_ + j] - top));
        }
        const float log_sum = static_cast<float>(std::log(sum));
        for (int64_t k = 0; k < size_; ++k) {
          const float v = x[k * inner_ + j] - top - log_sum;
          y[k * inner_ + j] = log_ ? v : std::exp(v);
        }
      }
    }
  });
}

void SoftmaxOp::Backward(const LayerIO& io, const PassContext&) {
  if (io.dx[0] == nullptr) return;
  const int64_t per = input_size();
  ParallelFor(io.n * outer_, 1, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t at = (r / outer_) * per + (r % outer_) * size_ * inner_;
      const float* y = io.y + at;
      const float* dy = io.dy + at;
      float* dx = io.dx[0] + at;
      for (int64_t j = 0; j < inner_; ++j) {
        double dot = 0;
        for (int64_t k = 0; k < size_; ++k) {
          const int64_t e = k * inner_ + j;
          dot += log_ ? dy[e] : static_cast<double>(dy[e]) * y[e];
        }
        for (int64_t k = 0; k < size_; ++k) {
          const int64_t e = k * inner_ + j;
          // softmax: y (dy - sum dy y); log_softmax: dy - exp(y) sum dy.
          dx[e] = log_ ? static_cast<float>(dy[e] - std::exp(y[e]) * dot)
                       : static_cast<float>(y[e] * (dy[e] - dot));
        }
      }
    }
  });
}

ConcatOp::ConcatOp(const std::string& name, std::vector<Shape> inputs,
                   Shape out, int axis)
    : Layer("onnx_concat", name, std::move(inputs), std::move(out)) {
  const Shape& o = output_shape();
  for (int d = 0; d < axis; ++d) outer_ *= o[d];
  row_ = outer_ > 0 ? output_size() / outer_ : 0;
  int64_t at = 0;
  for (int k = 0; k < num_inputs(); ++k) {
    const int64_t run = outer_ > 0 ? input_size(k) / outer_ : 0;
    run_.push_back(run);
    at_.push_back(at);
    at += run;
  }
}

void ConcatOp::Forward(const LayerIO& io, const PassContext&) {
  const int64_t size = output_size();
  for (int64_t s = 0; s < io.n; ++s) {
    for (int64_t r = 0; r < outer_; ++r) {
      float* y = io.y + s * size + r * row_;
      for (int k = 0; k < num_inputs(); ++k) {
        const float* x = io.x[k] + s * input_size(k) + r * run_[k];
        std::copy(x, x + run_[k], y + at_[k]);
      }
    }
  }
}

void ConcatOp::Backward(const LayerIO& io, const PassContext&) {
  const int64_t size = output_size();
  for (int k = 0; k < num_inputs(); ++k) {
    float* dx = io.dx[k];
    if (dx == nullptr) continue;
    for (int64_t s = 0; s < io.n; ++s) {
      for (int64_t r = 0; r < outer_; ++r) {
        const float* dy = io.dy + s * size + r * row_ + at_[k];
        std::copy(dy, dy + run_[k], dx + s * input_size(k) + r * run_[k]);
      }
    }
  }
}

}  // namespace onnx_ops
}  // namespace lockstep
