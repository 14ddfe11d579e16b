#include "core/onnx/ops/gather_ops.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "core/onnx/ops/op_util.h"

namespace lockstep {
namespace onnx_ops {
namespace {

absl::StatusOr<std::unique_ptr<Layer>> CreateGatherElements(
    const Json& c, const LayerBuildContext& ctx) {
  const Shape& data = ctx.inputs[0];
  const Shape& idx = ctx.inputs[1];
  const int axis = c.value("axis", 0);
  if (data.size() != idx.size() || axis < 0 ||
      axis >= static_cast<int>(data.size())) {
    return ctx.Error(absl::StrCat("gathers ", ShapeToString(idx), " from ",
                                  ShapeToString(data), " along axis ", axis));
  }
  for (size_t d = 0; d < data.size(); ++d) {
    if (static_cast<int>(d) != axis && idx[d] > data[d]) {
      return ctx.Error(absl::StrCat("indices ", ShapeToString(idx),
                                    " exceed the data ", ShapeToString(data),
                                    " off the gathered axis"));
    }
  }
  return std::unique_ptr<Layer>(
      new GatherElementsOp(ctx.name, data, idx, axis));
}

absl::StatusOr<std::unique_ptr<Layer>> CreateGatherRows(
    const Json& c, const LayerBuildContext& ctx) {
  Param own;
  ASSIGN_OR_RETURN(Param * table, ResolveParam(c, ctx, &own));
  const Shape& t = table->value.shape();
  ASSIGN_OR_RETURN(std::vector<double> idx, NumbersField(c, "indices", ctx));
  ASSIGN_OR_RETURN(Shape out, ShapeField(c, "indices_shape", ctx));
  if (t.size() != 2 || NumElements(out) != static_cast<int64_t>(idx.size())) {
    return ctx.Error("gathers rows of a table [rows, width] at indices");
  }
  std::vector<int64_t> rows;
  for (double v : idx) {
    int64_t r = static_cast<int64_t>(v);
    if (r < 0) r += t[0];
    if (r < 0 || r >= t[0]) {
      return ctx.Error(absl::StrCat("index ", v, " is outside the ", t[0],
                                    " rows of \"", table->name, "\""));
    }
    rows.push_back(r);
  }
  out.push_back(t[1]);
  const bool owned = table == &own;
  auto layer = std::make_unique<GatherRowsOp>(
      ctx.name, ctx.inputs[0], out, std::move(own), owned ? nullptr : table,
      std::move(rows));
  return std::unique_ptr<Layer>(std::move(layer));
}

LOCKSTEP_REGISTER_ONNX_OP(gather_elements, "onnx_gather_elements", 2, 2,
                          &CreateGatherElements);
LOCKSTEP_REGISTER_ONNX_OP(gather_rows, "onnx_gather_rows", 1, 1,
                          &CreateGatherRows);

}  // namespace

GatherElementsOp::GatherElementsOp(const std::string& name, const Shape& data,
                                   const Shape& indices, int axis)
    : Layer("onnx_gather_elements", name, {data, indices}, indices) {
  std::vector<int64_t> data_stride(data.size(), 1);
  for (size_t i = data.size(); i-- > 1;) {
    data_stride[i - 1] = data_stride[i] * data[i];
  }
  stride_ = data_stride[axis];
  size_ = data[axis];
  std::vector<int64_t> s = data_stride;
  s[axis] = 0;
  std::vector<int64_t> zero(indices.size(), 0);
  base_.resize(NumElements(indices));
  ForEachBroadcast(indices, s, zero,
                   [&](int64_t o, int64_t a, int64_t) { base_[o] = a; });
}

void GatherElementsOp::Forward(const LayerIO& io, const PassContext&) {
  const int64_t sd = input_size(0), size = output_size();
  for (int64_t s = 0; s < io.n; ++s) {
    const float* data = io.x[0] + s * sd;
    const float* idx = io.x[1] + s * size;
    float* y = io.y + s * size;
    for (int64_t o = 0; o < size; ++o) {
      int64_t i = static_cast<int64_t>(std::llround(idx[o]));
      if (i < 0) i += size_;
      y[o] = i >= 0 && i < size_ ? data[base_[o] + i * stride_] : 0.0f;
    }
  }
}

void GatherElementsOp::Backward(const LayerIO& io, const PassContext&) {
  const int64_t sd = input_size(0), size = output_size();
  if (io.dx.size() > 1 && io.dx[1] != nullptr) {
    std::fill(io.dx[1], io.dx[1] + io.n * size, 0.0f);
  }
  float* dd = io.dx[0];
  if (dd == nullptr) return;
  std::fill(dd, dd + io.n * sd, 0.0f);
  for (int64_t s = 0; s < io.n; ++s) {
    const float* idx = io.x[1] + s * size;
    const float* dy = io.dy + s * size;
    for (int64_t o = 0; o < size; ++o) {
      int64_t i = static_cast<int64_t>(std::llround(idx[o]));
      if (i < 0) i += size_;
      if (i >= 0 && i < size_) dd[s * sd + base_[o] + i * stride_] += dy[o];
    }
  }
}

GatherRowsOp::GatherRowsOp(const std::string& name, const Shape& input,
                           Shape out, Param own, Param* table,
                           std::vector<int64_t> rows)
    : Layer("onnx_gather_rows", name, {input}, std::move(out)),
      own_(std::move(own)),
      table_(table == nullptr ? &own_ : table),
      rows_(std::move(rows)) {}

void GatherRowsOp::Forward(const LayerIO& io, const PassContext&) {
  const int64_t width = output_shape().back(), size = output_size();
  for (int64_t s = 0; s < io.n; ++s) {
    for (size_t r = 0; r < rows_.size(); ++r) {
      std::copy(io.w[0] + rows_[r] * width, io.w[0] + (rows_[r] + 1) * width,
                io.y + s * size + r * width);
    }
  }
}

void GatherRowsOp::Backward(const LayerIO& io, const PassContext&) {
  if (!io.dx.empty() && io.dx[0] != nullptr) {
    std::fill(io.dx[0], io.dx[0] + io.n * input_size(0), 0.0f);
  }
  if (io.dw.empty() || io.dw[0] == nullptr) return;
  const int64_t width = output_shape().back(), size = output_size();
  for (int64_t s = 0; s < io.n; ++s) {
    for (size_t r = 0; r < rows_.size(); ++r) {
      const float* dy = io.dy + s * size + r * width;
      float* dw = io.dw[0] + rows_[r] * width;
      for (int64_t j = 0; j < width; ++j) dw[j] += dy[j];
    }
  }
}

}  // namespace onnx_ops
}  // namespace lockstep
