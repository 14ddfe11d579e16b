#include "core/onnx/ops/shape_ops.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "core/onnx/ops/op_util.h"
#include "kernels/cpu/threading.h"

namespace lockstep {
namespace onnx_ops {
namespace {

Shape Permuted(const Shape& in, const std::vector<int64_t>& perm) {
  Shape out;
  for (int64_t p : perm) out.push_back(in[p]);
  return out;
}

absl::StatusOr<std::unique_ptr<Layer>> CreateReshape(
    const Json& c, const LayerBuildContext& ctx) {
  ASSIGN_OR_RETURN(Shape out, ShapeField(c, "shape", ctx));
  if (NumElements(out) != NumElements(ctx.inputs[0])) {
    return ctx.Error(absl::StrCat("cannot reshape ",
                                  ShapeToString(ctx.inputs[0]), " to ",
                                  ShapeToString(out)));
  }
  return std::unique_ptr<Layer>(new ReshapeOp(ctx.name, ctx.inputs[0], out));
}

absl::StatusOr<std::unique_ptr<Layer>> CreateTranspose(
    const Json& c, const LayerBuildContext& ctx) {
  ASSIGN_OR_RETURN(Shape perm, ShapeField(c, "perm", ctx));
  std::vector<int64_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (sorted[i] != static_cast<int64_t>(i) ||
        sorted.size() != ctx.inputs[0].size()) {
      return ctx.Error(absl::StrCat("perm ", ShapeToString(perm),
                                    " is no permutation of the axes of ",
                                    ShapeToString(ctx.inputs[0])));
    }
  }
  return std::unique_ptr<Layer>(
      new TransposeOp(ctx.name, ctx.inputs[0], std::move(perm)));
}

absl::StatusOr<std::unique_ptr<Layer>> CreateSlice(
    const Json& c, const LayerBuildContext& ctx) {
  const Shape& in = ctx.inputs[0];
  const int axis = c.value("axis", -1);
  const int64_t start = c.value("start", int64_t{-1});
  const int64_t end = c.value("end", int64_t{-1});
  if (axis < 0 || axis >= static_cast<int>(in.size()) || start < 0 ||
      end <= start || end > in[axis]) {
    return ctx.Error(absl::StrCat("slice [", start, ", ", end, ") of axis ",
                                  axis, " of ", ShapeToString(in)));
  }
  return std::unique_ptr<Layer>(new SliceOp(ctx.name, in, axis, start, end));
}

LOCKSTEP_REGISTER_ONNX_OP(reshape, "onnx_reshape", 1, 1, &CreateReshape);
LOCKSTEP_REGISTER_ONNX_OP(slice, "onnx_slice", 1, 1, &CreateSlice);
LOCKSTEP_REGISTER_ONNX_OP(transpose, "onnx_transpose", 1, 1, &CreateTranspose);

}  // namespace

ReshapeOp::ReshapeOp(const std::string& name, const Shape& in, const Shape& out)
    : Layer("onnx_reshape", name, {in}, out) {}

void ReshapeOp::Forward(const LayerIO& io, const PassContext&) {
  std::copy(io.x[0], io.x[0] + io.n * output_size(), io.y);
}

void ReshapeOp::Backward(const LayerIO& io, const PassContext&) {
  if (io.dx[0] != nullptr) {
    std::copy(io.dy, io.dy + io.n * output_size(), io.dx[0]);
  }
}

TransposeOp::TransposeOp(const std::string& name, const Shape& in,
                         std::vector<int64_t> perm)
    : Layer("onnx_transpose", name, {in}, Permuted(in, perm)) {
  // The input's strides seen along the output's axes.
  const Shape& out = output_shape();
  std::vector<int64_t> in_stride(in.size(), 1);
  for (size_t i = in.size(); i-- > 1;) in_stride[i - 1] = in_stride[i] * in[i];
  std::vector<int64_t> stride;
  for (int64_t p : perm) stride.push_back(in_stride[p]);
  // Trailing axes the perm keeps in place move as whole runs.
  size_t kept = out.size();
  while (kept > 0 && perm[kept - 1] == static_cast<int64_t>(kept - 1)) {
    run_ *= out[kept - 1];
    --kept;
  }
  Shape runs(out.begin(), out.begin() + kept);
  stride.resize(kept);
  std::vector<int64_t> zero(kept, 0);
  source_.resize(NumElements(runs));
  ForEachBroadcast(runs, stride, zero,
                   [&](int64_t o, int64_t a, int64_t) { source_[o] = a; });
}

void TransposeOp::Forward(const LayerIO& io, const PassContext&) {
  const int64_t size = output_size(), run = run_;
  ParallelFor(io.n, 1, [&](int64_t begin, int64_t end) {
    for (int64_t s = begin; s < end; ++s) {
      const float* x = io.x[0] + s * size;
      float* y = io.y + s * size;
      for (size_t r = 0; r < source_.size(); ++r) {
        std::copy(x + source_[r], x + source_[r] + run, y + r * run);
      }
    }
  });
}

void TransposeOp::Backward(const LayerIO& io, const PassContext&) {
  if (io.dx[0] == nullptr) return;
  const int64_t size = output_size(), run = run_;
  ParallelFor(io.n, 1, [&](int64_t begin, int64_t end) {
    for (int64_t s = begin; s < end; ++s) {
      const float* dy = io.dy + s * size;
      float* dx = io.dx[0] + s * size;
      for (size_t r = 0; r < source_.size(); ++r) {
        std::copy(dy + r * run, dy + (r + 1) * run, dx + source_[r]);
      }
    }
  });
}

namespace {
Shape Sliced(Shape in, int axis, int64_t start, int64_t end) {
  in[axis] = end - start;
  return in;
}
}  // namespace

SliceOp::SliceOp(const std::string& name, const Shape& in, int axis,
                 int64_t start, int64_t end)
    : Layer("onnx_slice", name, {in}, Sliced(in, axis, start, end)),
      size_(in[axis]),
      start_(start),
      count_(end - start) {
  for (int d = 0; d < axis; ++d) outer_ *= in[d];
  for (size_t d = axis + 1; d < in.size(); ++d) inner_ *= in[d];
}

void SliceOp::Forward(const LayerIO& io, const PassContext&) {
  const int64_t rows = io.n * outer_, run = count_ * inner_;
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = io.x[0] + (r * size_ + start_) * inner_;
    std::copy(x, x + run, io.y + r * run);
  }
}

void SliceOp::Backward(const LayerIO& io, const PassContext&) {
  float* dx = io.dx[0];
  if (dx == nullptr) return;
  std::fill(dx, dx + io.n * input_size(), 0.0f);
  const int64_t rows = io.n * outer_, run = count_ * inner_;
  for (int64_t r = 0; r < rows; ++r) {
    std::copy(io.dy + r * run, io.dy + (r + 1) * run,
              dx + (r * size_ + start_) * inner_);
  }
}

}  // namespace onnx_ops
}  // namespace lockstep
