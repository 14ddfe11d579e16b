// What the op-level nodes of an imported ONNX graph share
// (core/onnx/ops/*_ops.h): their registration as internal layer types (the
// importer builds them; a job file cannot name them), numpy broadcasting
// over per-sample shapes, and the parameters an op reads, its own or a
// tied one another layer owns.
#ifndef LOCKSTEP_CORE_ONNX_OPS_OP_UTIL_H_
#define LOCKSTEP_CORE_ONNX_OPS_OP_UTIL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/layers/layer.h"
#include "core/layers/registry.h"
#include "core/spec_reader.h"
#include "core/tensor.h"

namespace lockstep {
namespace onnx_ops {

using Json = spec_reader::Json;
using OpCreate = std::function<absl::StatusOr<std::unique_ptr<Layer>>(
    const Json& config, const LayerBuildContext& ctx)>;

// Registers an op-level node type ("onnx_matmul"): internal, any config
// (the importer writes it), inputs from min to max (-1: any).
bool RegisterOp(const std::string& type, int min_inputs, int max_inputs,
                OpCreate create);
#define LOCKSTEP_REGISTER_ONNX_OP(id, ...)                              \
  static const bool lockstep_onnx_op_registered_##id [[maybe_unused]] = \
      ::lockstep::onnx_ops::RegisterOp(__VA_ARGS__)

// A config field as a shape / a list of numbers; InvalidArgument naming
// the layer when it is missing or not one.
absl::StatusOr<Shape> ShapeField(const Json& config, const char* key,
                                 const LayerBuildContext& ctx);
absl::StatusOr<std::vector<double>> NumbersField(const Json& config,
                                                 const char* key,
                                                 const LayerBuildContext& ctx);

// numpy's broadcast of two shapes (aligned at their last axes); nullopt
// when an axis differs and neither is 1.
std::optional<Shape> Broadcast(const Shape& a, const Shape& b);
// The same, or an error naming both.
absl::StatusOr<Shape> BroadcastShapes(const Shape& a, const Shape& b,
                                      const LayerBuildContext& ctx);
// The strides of `in` (row-major) over the axes of `out` it broadcasts to:
// 0 along an axis it lacks or holds once.
std::vector<int64_t> BroadcastStrides(const Shape& in, const Shape& out);

// Calls f(o, a, b) for every element o of `out` in row-major order, with
// a and b its offsets in two inputs of strides sa and sb (BroadcastStrides).
template <typename F>
void ForEachBroadcast(const Shape& out, const std::vector<int64_t>& sa,
                      const std::vector<int64_t>& sb, F&& f) {
  const int r = static_cast<int>(out.size());
  if (r == 0) {
    f(int64_t{0}, int64_t{0}, int64_t{0});
    return;
  }
  const int64_t inner = out[r - 1];
  if (inner == 0) return;
  const int64_t ia = sa[r - 1], ib = sb[r - 1];
  const int64_t outer = NumElements(out) / inner;
  std::vector<int64_t> idx(r, 0);
  int64_t oa = 0, ob = 0, o = 0;
  for (int64_t q = 0; q < outer; ++q, o += inner) {
    for (int64_t j = 0; j < inner; ++j) f(o + j, oa + j * ia, ob + j * ib);
    for (int d = r - 2; d >= 0; --d) {
      ++idx[d];
      oa += sa[d];
      ob += sb[d];
      if (idx[d] < out[d]) break;
      oa -= sa[d] * out[d];
      ob -= sb[d] * out[d];
      idx[d] = 0;
    }
  }
}

// The same walk by runs along the last axis: f(o, a, b, count, ia, ib)
// for each run of `count` output elements from o, the inputs from a and b
// with steps ia and ib (0 where one is broadcast along the axis). Axes
// both inputs hold contiguously are merged first, so a same-shape walk is
// one run.
template <typename F>
void ForEachRun(const Shape& out, const std::vector<int64_t>& sa,
                const std::vector<int64_t>& sb, F&& f) {
  // Merge trailing axes while both inputs are contiguous (or both fixed)
  // across them.
  Shape dims = out;
  std::vector<int64_t> a = sa, b = sb;
  while (dims.size() >= 2) {
    const size_t r = dims.size();
    const bool a_joins = a[r - 2] == a[r - 1] * dims[r - 1];
    const bool b_joins = b[r - 2] == b[r - 1] * dims[r - 1];
    if (!a_joins || !b_joins) break;
    dims[r - 2] *= dims[r - 1];
    a[r - 2] = a[r - 1];
    b[r - 2] = b[r - 1];
    dims.pop_back();
    a.pop_back();
    b.pop_back();
  }
  const int r = static_cast<int>(dims.size());
  if (r == 0) {
    f(int64_t{0}, int64_t{0}, int64_t{0}, int64_t{1}, int64_t{0}, int64_t{0});
    return;
  }
  const int64_t inner = dims[r - 1];
  if (inner == 0) return;
  const int64_t outer = NumElements(dims) / inner;
  std::vector<int64_t> idx(r, 0);
  int64_t oa = 0, ob = 0, o = 0;
  for (int64_t q = 0; q < outer; ++q, o += inner) {
    f(o, oa, ob, inner, a[r - 1], b[r - 1]);
    for (int d = r - 2; d >= 0; --d) {
      ++idx[d];
      oa += a[d];
      ob += b[d];
      if (idx[d] < dims[d]) break;
      oa -= a[d] * dims[d];
      ob -= b[d] * dims[d];
      idx[d] = 0;
    }
  }
}

// A parameter an op reads, from its config object {"param": NAME,
// "shape": [...], "owner": LAYER}: with an owner, that earlier layer's
// parameter of the name (a tied weight); without, *own, made here (the
// importer sets every parameter's initial value by name).
absl::StatusOr<Param*> ResolveParam(const Json& ref,
                                    const LayerBuildContext& ctx, Param* own);

}  // namespace onnx_ops
}  // namespace lockstep

#endif  // LOCKSTEP_CORE_ONNX_OPS_OP_UTIL_H_
