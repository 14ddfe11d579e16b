#include "core/onnx/onnx_fold.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "core/onnx/ops/op_util.h"

namespace lockstep {
namespace {

absl::Status Unfoldable(const std::string& why) {
  return absl::InvalidArgumentError(why);
}

const onnx::AttributeProto* Attr(const onnx::NodeProto& n, const char* name) {
  for (const auto& a : n.attribute()) {
    if (a.name() == name) return &a;
  }
  return nullptr;
}

int64_t IntAttr(const onnx::NodeProto& n, const char* name, int64_t fallback) {
  const onnx::AttributeProto* a = Attr(n, name);
  return a == nullptr ? fallback : a->i();
}

bool IsBatch(double v) { return v == kBatchSize; }

// A folded value's entries as sizes (for shapes, axes, indices).
absl::StatusOr<std::vector<int64_t>> Ints(const Folded& f, const char* what) {
  std::vector<int64_t> out;
  for (double v : f.v) {
    if (IsBatch(v)) {
      return Unfoldable(absl::StrCat(what, " depends on the batch size"));
    }
    if (!IsFoldedInt(v)) {
      return Unfoldable(absl::StrCat(what, " holds ", v, ", not an integer"));
    }
    out.push_back(FoldedInt(v));
  }
  return out;
}

int64_t Axis(int64_t axis, size_t rank) {
  return axis < 0 ? axis + static_cast<int64_t>(rank) : axis;
}

template <typename T>
void Append(const std::string& raw, std::vector<double>* v) {
  const size_t count = raw.size() / sizeof(T);
  for (size_t i = 0; i < count; ++i) {
    T x;
    std::memcpy(&x, raw.data() + i * sizeof(T), sizeof(T));
    v->push_back(static_cast<double>(x));
  }
}

absl::StatusOr<Shape> BroadcastDims(const Shape& a, const Shape& b,
                                    const std::string& op) {
  std::optional<Shape> out = onnx_ops::Broadcast(a, b);
  if (!out) {
    return Unfoldable(absl::StrCat(op, " of ", ShapeToString(a), " and ",
                                   ShapeToString(b),
                                   ": shapes do not broadcast"));
  }
  return *out;
}

absl::StatusOr<Folded> Elementwise(const std::string& op, const Folded& a,
                                   const Folded& b) {
  ASSIGN_OR_RETURN(const Shape out, BroadcastDims(a.dims, b.dims, op));
  RETURN_IF_ERROR(BoundedCount(out, kMaxFoldedValues,
                               absl::StrCat(op, " of ", ShapeToString(a.dims),
                                            " and ", ShapeToString(b.dims)))
                      .status());
  Folded f;
  f.dims = out;
  const bool compare = op == "Equal" || op == "Less" || op == "Greater" ||
                       op == "LessOrEqual" || op == "GreaterOrEqual";
  f.integer = compare || (a.integer && b.integer);
  f.v.resize(NumElements(out));
  absl::Status status;
  onnx_ops::ForEachBroadcast(
      out, onnx_ops::BroadcastStrides(a.dims, out),
      onnx_ops::BroadcastStrides(b.dims, out),
      [&](int64_t o, int64_t ia, int64_t ib) {
        const double x = a.v[ia], y = b.v[ib];
        if (op == "Equal" && (IsBatch(x) || IsBatch(y))) {
          // The batch size is a positive number: it equals itself and no
          // number below 1 (-1 is how torch's shapes say "infer").
          const double other = IsBatch(x) ? y : x;
          if (IsBatch(other)) {
            f.v[o] = 1;
          } else if (other < 1) {
            f.v[o] = 0;
          } else {
            status = Unfoldable("compares the batch size with a number");
          }
          return;
        }
        if (IsBatch(x) || IsBatch(y)) {
          status =
              Unfoldable(absl::StrCat(op, " computes with the batch size"));
          return;
        }
        double r = 0;
        if (op == "Add") r = x + y;
        if (op == "Sub") r = x - y;
        if (op == "Mul") r = x * y;
        if (op == "Div") r = f.integer ? std::trunc(x / y) : x / y;
        if (op == "Pow") r = std::pow(x, y);
        if (op == "Equal") r = x == y;
        if (op == "Less") r = x < y;
        if (op == "Greater") r = x > y;
        if (op == "LessOrEqual") r = x <= y;
        if (op == "GreaterOrEqual") r = x >= y;
        f.v[o] = r;
      });
  if (!status.ok()) return status;
  return f;
}

}  // namespace

absl::StatusOr<int64_t> BoundedCount(const std::vector<int64_t>& dims,
                                     int64_t limit, const std::string& what) {
  int64_t count = 1;
  for (int64_t d : dims) {
    if (d < 0) return Unfoldable(absl::StrCat(what, " has a size of ", d));
    if (d > 0 && count > limit / d) {
      return Unfoldable(absl::StrCat(what, " holds over ", limit, " values"));
    }
    count *= d;
  }
  return count;
}

absl::StatusOr<Folded> FoldTensor(const onnx::TensorProto& t) {
  Folded f;
  f.dims.assign(t.dims().begin(), t.dims().end());
  const std::string& raw = t.raw_data();
  switch (t.data_type()) {
    case onnx::TensorProto::FLOAT:
      Append<float>(raw, &f.v);
      f.v.insert(f.v.end(), t.float_data().begin(), t.float_data().end());
      break;
    case onnx::TensorProto::DOUBLE:
      Append<double>(raw, &f.v);
      f.v.insert(f.v.end(), t.double_data().begin(), t.double_data().end());
      break;
    case onnx::TensorProto::INT64:
      f.integer = true;
      Append<int64_t>(raw, &f.v);
      f.v.insert(f.v.end(), t.int64_data().begin(), t.int64_data().end());
      break;
    case onnx::TensorProto::INT32:
      f.integer = true;
      Append<int32_t>(raw, &f.v);
      f.v.insert(f.v.end(), t.int32_data().begin(), t.int32_data().end());
      break;
    case onnx::TensorProto::BOOL:
      f.integer = true;
      Append<uint8_t>(raw, &f.v);
      f.v.insert(f.v.end(), t.int32_data().begin(), t.int32_data().end());
      break;
    default:
      return Unfoldable(absl::StrCat("tensor \"", t.name(), "\" of type ",
                                     t.data_type(),
                                     " (float, double, int64, int32 and "
                                     "bool are read)"));
  }
  // Sizes from the file: each at least 0, and a product that cannot
  // overflow before it is compared with the values there are.
  ASSIGN_OR_RETURN(const int64_t count,
                   BoundedCount(f.dims, std::numeric_limits<int64_t>::max(),
                                absl::StrCat("tensor \"", t.name(), "\"")));
  if (static_cast<int64_t>(f.v.size()) != count) {
    return Unfoldable(absl::StrCat("tensor \"", t.name(), "\" holds ",
                                   f.v.size(), " values for ",
                                   ShapeToString(f.dims)));
  }
  return f;
}

bool Foldable(const std::string& op) {
  static const auto* ops = new std::set<std::string>{
      "Identity", "Cast",      "Gather",      "Unsqueeze",
      "Squeeze",  "Concat",    "Range",       "ConstantOfShape",
      "Reshape",  "Expand",    "Add",         "Sub",
      "Mul",      "Div",       "Pow",         "Equal",
      "Less",     "Greater",   "LessOrEqual", "GreaterOrEqual",
      "Where",    "Not",       "Neg",         "Sqrt",
      "Shape",    "Transpose", "Trilu",       "Slice"};
  return ops->count(op) > 0;
}

Folded ShapeOf(const onnx::NodeProto& n, const Shape& full) {
  const int64_t rank = static_cast<int64_t>(full.size());
  int64_t start = IntAttr(n, "start", 0), end = IntAttr(n, "end", rank);
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, start, rank);
  Folded f;
  f.integer = true;
  for (int64_t i = start; i < end; ++i) {
    f.v.push_back(full[i] < 0 ? kBatchSize : static_cast<double>(full[i]));
  }
  f.dims = {static_cast<int64_t>(f.v.size())};
  return f;
}

absl::StatusOr<Folded> FoldNode(const onnx::NodeProto& n,
                                const std::vector<const Folded*>& in) {
  const std::string& op = n.op_type();
  auto input = [&](size_t i) -> const Folded* {
    return i < in.size() ? in[i] : nullptr;
  };
  if (input(0) == nullptr && op != "Range") {
    return Unfoldable("its first input is missing");
  }
  const Folded& x = *in[0];
  if (op == "Identity") return x;
  if (op == "Shape") {
    Shape full = x.dims;
    return ShapeOf(n, full);
  }
  if (op == "Cast") {
    Folded f = x;
    const int64_t to = IntAttr(n, "to", onnx::TensorProto::FLOAT);
    f.integer =
        to != onnx::TensorProto::FLOAT && to != onnx::TensorProto::DOUBLE &&
        to != onnx::TensorProto::FLOAT16 && to != onnx::TensorProto::BFLOAT16;
    for (double& v : f.v) {
      if (IsBatch(v)) continue;
      if (to == onnx::TensorProto::BOOL)
        v = v != 0;
      else if (f.integer)
        v = std::trunc(v);
      else if (to == onnx::TensorProto::FLOAT)
        v = static_cast<float>(v);
    }
    return f;
  }
  if (op == "Not" || op == "Neg" || op == "Sqrt") {
    Folded f = x;
    for (double& v : f.v) {
      if (IsBatch(v)) return Unfoldable(op + " of the batch size");
      v = op == "Not" ? v == 0 : op == "Neg" ? -v : std::sqrt(v);
    }
    return f;
  }
  if (op == "Gather") {
    if (input(1) == nullptr) return Unfoldable("Gather without indices");
    const int64_t axis = Axis(IntAttr(n, "axis", 0), x.dims.size());
    if (axis < 0 || axis >= static_cast<int64_t>(x.dims.size())) {
      return Unfoldable("Gather along an axis the data lacks");
    }
    ASSIGN_OR_RETURN(std::vector<int64_t> idx,
                     Ints(*in[1], "a Gather's index"));
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= x.dims[d];
    for (size_t d = axis + 1; d < x.dims.size(); ++d) inner *= x.dims[d];
    const int64_t size = x.dims[axis];
    Folded f;
    f.integer = x.integer;
    f.dims.assign(x.dims.begin(), x.dims.begin() + axis);
    f.dims.insert(f.dims.end(), in[1]->dims.begin(), in[1]->dims.end());
    f.dims.insert(f.dims.end(), x.dims.begin() + axis + 1, x.dims.end());
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i : idx) {
        if (i < 0) i += size;
        if (i < 0 || i >= size)
          return Unfoldable("a Gather index out of range");
        for (int64_t k = 0; k < inner; ++k) {
          f.v.push_back(x.v[(o * size + i) * inner + k]);
        }
      }
    }
    return f;
  }
  if (op == "Unsqueeze" || op == "Squeeze") {
    Folded f = x;
    if (input(1) == nullptr) {
      if (op == "Unsqueeze") return Unfoldable("Unsqueeze without axes");
      Shape kept;
      for (int64_t d : x.dims) {
        if (d != 1) kept.push_back(d);
      }
      f.dims = kept;
      return f;
    }
    ASSIGN_OR_RETURN(std::vector<int64_t> axes, Ints(*in[1], "axes"));
    if (op == "Unsqueeze") {
      const size_t rank = x.dims.size() + axes.size();
      for (int64_t& a : axes) a = Axis(a, rank);
      std::sort(axes.begin(), axes.end());
      for (int64_t a : axes) {
        if (a < 0 || a > static_cast<int64_t>(f.dims.size())) {
          return Unfoldable("Unsqueeze axis out of range");
        }
        f.dims.insert(f.dims.begin() + a, 1);
      }
    } else {
      for (int64_t& a : axes) a = Axis(a, x.dims.size());
      Shape kept;
      for (size_t d = 0; d < x.dims.size(); ++d) {
        if (std::find(axes.begin(), axes.end(), static_cast<int64_t>(d)) ==
            axes.end()) {
          kept.push_back(x.dims[d]);
        }
      }
      f.dims = kept;
    }
    return f;
  }
  if (op == "Concat") {
    const int64_t axis = Axis(IntAttr(n, "axis", 0), x.dims.size());
    if (x.dims.size() != 1 || axis != 0) {
      return Unfoldable("a Concat of constants other than vectors");
    }
    Folded f;
    f.integer = true;
    for (const Folded* p : in) {
      if (p == nullptr || p->dims.size() != 1) {
        return Unfoldable("a Concat of constants other than vectors");
      }
      f.v.insert(f.v.end(), p->v.begin(), p->v.end());
      f.integer = f.integer && p->integer;
    }
    f.dims = {static_cast<int64_t>(f.v.size())};
    return f;
  }
  if (op == "Range") {
    if (input(0) == nullptr || input(1) == nullptr || input(2) == nullptr ||
        in[0]->v.size() != 1 || in[1]->v.size() != 1 || in[2]->v.size() != 1) {
      return Unfoldable("Range needs start, limit and delta scalars");
    }
    const double start = in[0]->v[0], limit = in[1]->v[0], delta = in[2]->v[0];
    if (IsBatch(start) || IsBatch(limit) || IsBatch(delta)) {
      return Unfoldable("a Range over the batch size");
    }
    if (delta == 0) return Unfoldable("a Range with delta 0");
    const double count = std::max(0.0, std::ceil((limit - start) / delta));
    if (count > kMaxFoldedValues)
      return Unfoldable("a Range of over 2^24 values");
    Folded f;
    f.integer = in[0]->integer;
    for (int64_t i = 0; i < static_cast<int64_t>(count); ++i) {
      f.v.push_back(start + i * delta);
    }
    f.dims = {static_cast<int64_t>(f.v.size())};
    return f;
  }
  if (op == "ConstantOfShape") {
    ASSIGN_OR_RETURN(std::vector<int64_t> dims, Ints(x, "its shape"));
    Folded f;
    f.dims.assign(dims.begin(), dims.end());
    double value = 0;
    f.integer = false;
    if (const onnx::AttributeProto* a = Attr(n, "value")) {
      ASSIGN_OR_RETURN(Folded t, FoldTensor(a->t()));
      if (t.v.size() != 1) return Unfoldable("ConstantOfShape's value");
      value = t.v[0];
      f.integer = t.integer;
    }
    ASSIGN_OR_RETURN(const int64_t count,
                     BoundedCount(dims, kMaxFoldedValues, "a ConstantOfShape"));
    f.v.assign(count, value);
    return f;
  }
  if (op == "Reshape") {
    if (input(1) == nullptr) return Unfoldable("Reshape without a shape");
    ASSIGN_OR_RETURN(std::vector<int64_t> s, Ints(*in[1], "its target shape"));
    Folded f = x;
    int64_t infer = -1;
    std::vector<int64_t> known_dims;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] == 0 && IntAttr(n, "allowzero", 0) == 0 && i < x.dims.size()) {
        s[i] = x.dims[i];
      }
      if (s[i] == -1 && infer < 0) {
        infer = i;
      } else {
        known_dims.push_back(s[i]);
      }
    }
    const int64_t size = NumElements(x.dims);
    ASSIGN_OR_RETURN(const int64_t known,
                     BoundedCount(known_dims, std::max<int64_t>(size, 1),
                                  "a Reshape's target shape"));
    if (infer >= 0 && known == 0) {
      return Unfoldable("a Reshape that infers an axis beside a 0");
    }
    if (infer >= 0) s[infer] = size / known;
    if ((infer >= 0 ? s[infer] * known : known) != size) {
      return Unfoldable("a Reshape to a shape of another size");
    }
    f.dims.assign(s.begin(), s.end());
    return f;
  }
  if (op == "Expand") {
    if (input(1) == nullptr) return Unfoldable("Expand without a shape");
    ASSIGN_OR_RETURN(std::vector<int64_t> s, Ints(*in[1], "its shape"));
    RETURN_IF_ERROR(BoundedCount(s, kMaxFoldedValues, "an Expand").status());
    ASSIGN_OR_RETURN(const Shape dims,
                     BroadcastDims(x.dims, Shape(s.begin(), s.end()), op));
    if (NumElements(dims) > kMaxFoldedValues) {
      return Unfoldable("an Expand to over 2^24 values");
    }
    Folded out;
    out.dims = dims;
    out.integer = x.integer;
    out.v.resize(NumElements(dims));
    const std::vector<int64_t> sx = onnx_ops::BroadcastStrides(x.dims, dims);
    onnx_ops::ForEachBroadcast(
        dims, sx, sx,
        [&](int64_t o, int64_t a, int64_t) { out.v[o] = x.v[a]; });
    return out;
  }
  if (op == "Where") {
    if (input(1) == nullptr || input(2) == nullptr) {
      return Unfoldable("Where needs three inputs");
    }
    ASSIGN_OR_RETURN(const Shape ab,
                     BroadcastDims(in[1]->dims, in[2]->dims, op));
    ASSIGN_OR_RETURN(const Shape out, BroadcastDims(x.dims, ab, op));
    RETURN_IF_ERROR(
        BoundedCount(out, kMaxFoldedValues,
                     absl::StrCat("a Where to ", ShapeToString(out)))
            .status());
    Folded f;
    f.dims = out;
    f.integer = in[1]->integer && in[2]->integer;
    f.v.resize(NumElements(out));
    const std::vector<int64_t> sc = onnx_ops::BroadcastStrides(x.dims, out);
    const std::vector<int64_t> s1 =
        onnx_ops::BroadcastStrides(in[1]->dims, out);
    const std::vector<int64_t> s2 =
        onnx_ops::BroadcastStrides(in[2]->dims, out);
    std::vector<int64_t> pos2(f.v.size());
    onnx_ops::ForEachBroadcast(
        out, s2, s2, [&](int64_t o, int64_t a, int64_t) { pos2[o] = a; });
    onnx_ops::ForEachBroadcast(
        out, sc, s1, [&](int64_t o, int64_t c, int64_t a) {
          f.v[o] = x.v[c] != 0 ? in[1]->v[a] : in[2]->v[pos2[o]];
        });
    return f;
  }
  if (op == "Transpose") {
    std::vector<int64_t> perm;
    if (const onnx::AttributeProto* a = Attr(n, "perm")) {
      perm.assign(a->ints().begin(), a->ints().end());
    } else {
      for (size_t i = x.dims.size(); i-- > 0;) perm.push_back(i);
    }
    if (perm.size() != x.dims.size()) return Unfoldable("Transpose's perm");
    std::vector<int64_t> stride(x.dims.size(), 1);
    for (size_t i = x.dims.size(); i-- > 1;) {
      stride[i - 1] = stride[i] * x.dims[i];
    }
    Folded f;
    f.integer = x.integer;
    std::vector<int64_t> s;
    for (int64_t p : perm) {
      if (p < 0 || p >= static_cast<int64_t>(x.dims.size())) {
        return Unfoldable("Transpose's perm");
      }
      f.dims.push_back(x.dims[p]);
      s.push_back(stride[p]);
    }
    f.v.resize(x.v.size());
    onnx_ops::ForEachBroadcast(
        f.dims, s, s, [&](int64_t o, int64_t a, int64_t) { f.v[o] = x.v[a]; });
    return f;
  }
  if (op == "Trilu") {
    if (x.dims.size() < 2) return Unfoldable("Trilu of fewer than 2 axes");
    int64_t k = 0;
    if (input(1) != nullptr) {
      ASSIGN_OR_RETURN(std::vector<int64_t> kk, Ints(*in[1], "k"));
      if (kk.size() != 1) return Unfoldable("Trilu's k");
      k = kk[0];
    }
    const bool upper = IntAttr(n, "upper", 1) != 0;
    Folded f = x;
    const int64_t rows = x.dims[x.dims.size() - 2], cols = x.dims.back();
    for (size_t i = 0; i < f.v.size(); ++i) {
      const int64_t c = i % cols, r = (i / cols) % rows;
      const bool keep = upper ? c - r >= k : c - r <= k;
      if (!keep) f.v[i] = 0;
    }
    return f;
  }
  if (op == "Slice") {
    if (input(1) == nullptr || input(2) == nullptr) {
      return Unfoldable("Slice needs starts and ends");
    }
    ASSIGN_OR_RETURN(std::vector<int64_t> starts, Ints(*in[1], "starts"));
    ASSIGN_OR_RETURN(std::vector<int64_t> ends, Ints(*in[2], "ends"));
    std::vector<int64_t> axes, steps;
    if (input(3) != nullptr) {
      ASSIGN_OR_RETURN(axes, Ints(*in[3], "axes"));
    } else {
      for (size_t i = 0; i < starts.size(); ++i) axes.push_back(i);
    }
    if (input(4) != nullptr) {
      ASSIGN_OR_RETURN(steps, Ints(*in[4], "steps"));
    } else {
      steps.assign(starts.size(), 1);
    }
    if (axes.size() != starts.size() || ends.size() != starts.size() ||
        steps.size() != starts.size()) {
      return Unfoldable(
          "Slice's starts, ends, axes and steps differ in length");
    }
    const size_t rank = x.dims.size();
    std::vector<int64_t> begin(rank, 0), step(rank, 1);
    Shape out = x.dims;
    for (size_t i = 0; i < axes.size(); ++i) {
      const int64_t a = Axis(axes[i], rank);
      if (a < 0 || a >= static_cast<int64_t>(rank) || steps[i] <= 0) {
        return Unfoldable("Slice's axes or steps (only positive steps)");
      }
      const int64_t d = x.dims[a];
      int64_t s = starts[i] < 0 ? starts[i] + d : starts[i];
      int64_t e = ends[i] < 0 ? ends[i] + d : ends[i];
      s = std::clamp<int64_t>(s, 0, d);
      e = std::clamp<int64_t>(e, 0, d);
      begin[a] = s;
      // A step past the axis takes its first element only, as a step of
      // the axis' size does (which keeps stride * step in range).
      step[a] = std::min<int64_t>(steps[i], std::max<int64_t>(d, 1));
      out[a] = e > s ? 1 + (e - s - 1) / step[a] : 0;
    }
    std::vector<int64_t> stride(rank, 1);
    for (size_t i = rank; i-- > 1;) stride[i - 1] = stride[i] * x.dims[i];
    int64_t base = 0;
    std::vector<int64_t> s(rank);
    for (size_t i = 0; i < rank; ++i) {
      base += begin[i] * stride[i];
      s[i] = stride[i] * step[i];
    }
    Folded f;
    f.dims = out;
    f.integer = x.integer;
    f.v.resize(NumElements(out));
    onnx_ops::ForEachBroadcast(out, s, s, [&](int64_t o, int64_t a, int64_t) {
      f.v[o] = x.v[base + a];
    });
    return f;
  }
  if (input(1) == nullptr) return Unfoldable(op + " needs two inputs");
  return Elementwise(op, x, *in[1]);
}

}  // namespace lockstep
