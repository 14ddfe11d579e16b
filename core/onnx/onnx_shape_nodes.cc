// ONNX nodes that move a batch's values without computing with them:
// transposes, reshapes (Reshape, Unsqueeze, Squeeze), Expand, Concat,
// Split and Slice (the Importer of onnx_importer.h; op nodes of
// core/onnx/ops/ shape_ops and reduce_ops).
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "core/onnx/onnx_importer.h"
#include "core/onnx/ops/op_util.h"

namespace lockstep {
namespace onnx_internal {
namespace {

// The axis of a sample as held of its logical axis `a`: a feature map's
// logical [C, H, W] is held [H, W, C].
int64_t HeldAxis(bool channels_last, int64_t a) {
  if (!channels_last) return a;
  return a == 0 ? 2 : a - 1;
}

}  // namespace

absl::Status Importer::Transpose(const onnx::NodeProto& n) {
  const std::string base = LayerName(n.name().empty() ? n.output(0) : n.name());
  const onnx::TensorProto* w = Init(n, 0);
  std::vector<int64_t> perm = IntsAttr(n, "perm", {});
  if (w != nullptr) {
    if (w->dims_size() != 2 ||
        (perm != std::vector<int64_t>{1, 0} && !perm.empty())) {
      return Bad(absl::StrCat(NodeName(n), ": a transpose of parameter \"",
                              w->name(), "\" other than a matrix's"));
    }
    transposed_[n.output(0)] = w;
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(Value x, In(n, 0));
  if (x.channels_last) {
    return Bad(absl::StrCat(NodeName(n),
                            ": Transpose of a feature map is "
                            "not imported yet"));
  }
  if (perm.empty()) {
    for (size_t i = x.shape.size() + 1; i-- > 0;) perm.push_back(i);
  }
  if (perm.size() != x.shape.size() + 1 || perm[0] != 0) {
    return Bad(absl::StrCat(NodeName(n),
                            ": a transpose that moves the "
                            "batch axis (perm ",
                            absl::StrJoin(perm, ", "), ")"));
  }
  Json fields = Json::object();
  std::vector<int64_t> p;
  Shape out;
  std::vector<bool> taken(perm.size(), false);
  for (size_t i = 1; i < perm.size(); ++i) {
    if (perm[i] < 1 || perm[i] > static_cast<int64_t>(x.shape.size()) ||
        taken[perm[i]]) {
      return Bad(absl::StrCat(
          NodeName(n), ": perm [", absl::StrJoin(perm, ", "),
          "] is no permutation of the ", perm.size(), " axes of its input"));
    }
    taken[perm[i]] = true;
    p.push_back(perm[i] - 1);
    out.push_back(x.shape[perm[i] - 1]);
  }
  fields["perm"] = p;
  AddLayer("onnx_transpose", UniqueName(base), {x.node}, fields, n.output(0),
           out, false);
  return absl::OkStatus();
}

absl::Status Importer::Reshape(const onnx::NodeProto& n) {
  const std::string& op = n.op_type();
  ASSIGN_OR_RETURN(Value x, In(n, 0));
  ASSIGN_OR_RETURN(const Folded* arg, IntsIn(n, 1));
  if (n.input_size() > 1 && !n.input(1).empty() && arg == nullptr) {
    return Bad(absl::StrCat(NodeName(n), ": its ",
                            op == "Reshape" ? "shape" : "axes",
                            " must be known at import (a constant or a "
                            "shape sub-graph)"));
  }
  Shape full = {-1};
  full.insert(full.end(), x.shape.begin(), x.shape.end());
  Shape shape;
  if (op == "Reshape") {
    if (arg == nullptr) return Bad(absl::StrCat(NodeName(n), ": no shape"));
    std::vector<double> s = arg->v;
    int infer = -1;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] == kBatchSize || (i == 0 && s[i] == 0)) {
        if (i != 0) {
          return Bad(absl::StrCat(NodeName(n),
                                  ": a reshape that moves the "
                                  "batch size off the first axis"));
        }
        continue;
      }
      if (s[i] == 0 && IntAttr(n, "allowzero", 0) == 0) {
        if (i >= full.size())
          return Bad(absl::StrCat(NodeName(n), ": 0 past the input's axes"));
        s[i] = full[i];
      }
      if (s[i] == -1) {
        if (infer >= 0)
          return Bad(absl::StrCat(NodeName(n), ": two -1 in its shape"));
        infer = static_cast<int>(i);
      }
    }
    if (s.empty())
      return Bad(absl::StrCat(NodeName(n), ": a reshape to a scalar"));
    // The first axis is the batch's: kBatchSize, 0, or -1 with the rest
    // known.
    if (s[0] != kBatchSize && s[0] != 0 && !(s[0] == -1 && infer == 0)) {
      return Bad(absl::StrCat(NodeName(n), ": a reshape whose first axis is ",
                              s[0],
                              ", not the batch's; a shape that cannot "
                              "be made static is not imported"));
    }
    std::vector<int64_t> known_dims;
    for (size_t i = 1; i < s.size(); ++i) {
      if (s[i] != -1) known_dims.push_back(FoldedInt(s[i]));
    }
    absl::StatusOr<int64_t> known = BoundedCount(known_dims, int64_t{1} << 40,
                                                 "its shape (a sample's part)");
    if (!known.ok()) {
      return Bad(absl::StrCat(NodeName(n), ": ", known.status().message()));
    }
    for (size_t i = 1; i < s.size(); ++i) {
      shape.push_back(s[i] == -1 && *known > 0 ? NumElements(x.shape) / *known
                                               : FoldedInt(s[i]));
    }
  } else {
    std::vector<int64_t> axes;
    if (arg != nullptr) {
      for (double a : arg->v) axes.push_back(FoldedInt(a));
    }
    if (op == "Unsqueeze") {
      const int64_t rank = static_cast<int64_t>(full.size() + axes.size());
      for (int64_t& a : axes) a = a < 0 ? a + rank : a;
      std::sort(axes.begin(), axes.end());
      shape = full;
      for (int64_t a : axes) {
        if (a <= 0 || a > static_cast<int64_t>(shape.size())) {
          return Bad(absl::StrCat(NodeName(n), ": unsqueezes axis ", a,
                                  " (the batch's is 0)"));
        }
        shape.insert(shape.begin() + a, 1);
      }
    } else {
      const int64_t rank = static_cast<int64_t>(full.size());
      for (int64_t& a : axes) {
        const int64_t given = a;
        a = a < 0 ? a + rank : a;
        // ONNX: each axis names one of the input's, of size 1.
        if (a < 0 || a >= rank) {
          return Bad(absl::StrCat(NodeName(n), ": squeezes axis ", given,
                                  " of an input of ", rank, " axes"));
        }
        if (a > 0 && full[a] != 1) {
          return Bad(absl::StrCat(NodeName(n), ": squeezes axis ", a,
                                  ", of size ", full[a], " (not 1)"));
        }
      }
      for (int64_t i = 0; i < rank; ++i) {
        const bool drop = axes.empty()
                              ? (i > 0 && full[i] == 1)
                              : std::count(axes.begin(), axes.end(), i) > 0;
        if (drop && i == 0) {
          return Bad(absl::StrCat(NodeName(n), ": squeezes the batch axis"));
        }
        if (!drop) shape.push_back(full[i]);
      }
    }
    shape.erase(shape.begin());
  }
  return ReshapeTo(n, x, shape);
}

absl::Status Importer::Expand(const onnx::NodeProto& n) {
  const std::string base = LayerName(n.name().empty() ? n.output(0) : n.name());
  ASSIGN_OR_RETURN(Value x, In(n, 0));
  ASSIGN_OR_RETURN(const Folded* arg, IntsIn(n, 1));
  if (arg == nullptr) {
    return Bad(absl::StrCat(NodeName(n),
                            ": its shape must be known at "
                            "import"));
  }
  Shape to;
  for (size_t i = 0; i < arg->v.size(); ++i) {
    const double v = arg->v[i];
    if (v == kBatchSize) {
      if (i + x.shape.size() + 1 != arg->v.size()) {
        return Bad(absl::StrCat(NodeName(n), ": expands along the batch"));
      }
      continue;
    }
    if (i + x.shape.size() + 1 == arg->v.size() && v == 1) continue;
    to.push_back(FoldedInt(v));
  }
  // The target as a shape of zeros the input broadcasts against.
  Json fields = Json::object();
  fields["op"] = "add";
  Json a = Json::object();
  a["input"] = 0;
  Json b = Json::object();
  b["zeros"] = to;
  fields["a"] = a;
  fields["b"] = b;
  std::optional<Shape> expanded = onnx_ops::Broadcast(x.shape, to);
  if (!expanded) {
    return Bad(absl::StrCat(NodeName(n), ": cannot expand ",
                            ShapeToString(x.shape), " to ", ShapeToString(to)));
  }
  const Shape out = *expanded;
  if (out == x.shape) {
    values_[n.output(0)] = x;
    return absl::OkStatus();
  }
  AddLayer("onnx_binary", UniqueName(base), {x.node}, fields, n.output(0), out,
           false);
  return absl::OkStatus();
}

absl::Status Importer::Concat(const onnx::NodeProto& n) {
  const std::string base = LayerName(n.name().empty() ? n.output(0) : n.name());
  std::vector<std::string> inputs;
  Shape out;
  int64_t axis = IntAttr(n, "axis", 0);
  bool maps = false;
  for (int i = 0; i < n.input_size(); ++i) {
    ASSIGN_OR_RETURN(Value v, In(n, i));
    if (i == 0) maps = v.channels_last;
    if (v.channels_last != maps) {
      return Bad(absl::StrCat(NodeName(n),
                              ": a Concat of a feature map with a tensor "
                              "that is not one"));
    }
    if (std::find(inputs.begin(), inputs.end(), v.node) != inputs.end()) {
      return Bad(absl::StrCat(NodeName(n),
                              ": a Concat of a tensor with "
                              "itself is not imported yet"));
    }
    const int64_t rank = static_cast<int64_t>(v.shape.size()) + 1;
    if (i == 0) {
      if (axis < 0) axis += rank;
      if (axis < 1 || axis >= rank) {
        return Bad(absl::StrCat(NodeName(n),
                                ": a Concat along the batch "
                                "axis"));
      }
      out = v.shape;
      out[axis - 1] = 0;
    }
    Shape a = v.shape;
    if (a.size() != out.size()) {
      return Bad(absl::StrCat(NodeName(n), ": inputs of different ranks"));
    }
    const int64_t size = a[axis - 1];
    a[axis - 1] = out[axis - 1];
    if (a != out) {
      return Bad(absl::StrCat(NodeName(n), ": cannot concatenate ",
                              ShapeToString(v.shape), " along axis ", axis));
    }
    out[axis - 1] += size;
    inputs.push_back(v.node);
  }
  Json fields = Json::object();
  fields["axis"] = HeldAxis(maps, axis - 1);
  AddLayer("onnx_concat", UniqueName(base), inputs, fields, n.output(0), out,
           maps);
  return absl::OkStatus();
}

absl::Status Importer::SplitOrSlice(const onnx::NodeProto& n) {
  const std::string& op = n.op_type();
  ASSIGN_OR_RETURN(Value x, In(n, 0));
  const int64_t rank = static_cast<int64_t>(x.shape.size()) + 1;
  // (per-sample axis, start, end) of each output.
  struct Part {
    int64_t axis, start, end;
  };
  std::vector<Part> parts;
  if (op == "Split") {
    int64_t axis = IntAttr(n, "axis", 0);
    if (axis < 0) axis += rank;
    if (axis < 1 || axis >= rank) {
      return Bad(absl::StrCat(NodeName(n), ": a split along the batch axis"));
    }
    const int64_t dim = x.shape[axis - 1];
    std::vector<int64_t> sizes = IntsAttr(n, "split", {});
    ASSIGN_OR_RETURN(const Folded* split, IntsIn(n, 1));
    if (const Folded* f = split) {
      sizes.clear();
      for (double v : f->v) sizes.push_back(FoldedInt(v));
    } else if (n.input_size() > 1 && !n.input(1).empty()) {
      return Bad(absl::StrCat(NodeName(n),
                              ": its sizes must be known at "
                              "import"));
    }
    if (sizes.empty()) {
      const int64_t k = n.output_size();
      if (k == 0 || dim % k != 0) {
        return Bad(absl::StrCat(NodeName(n), ": ", dim,
                                " does not split "
                                "into ",
                                k, " equal parts"));
      }
      sizes.assign(k, dim / k);
    }
    const absl::Status mismatch = Bad(absl::StrCat(
        NodeName(n), ": sizes ", absl::StrJoin(sizes, ", "), " do not split ",
        dim, " into its ", n.output_size(), " outputs"));
    if (static_cast<int>(sizes.size()) != n.output_size()) return mismatch;
    int64_t at = 0;
    for (int64_t size : sizes) {
      // Each part within what is left of the axis (a negative size, or
      // sizes summing past it, would slice outside the input).
      if (size < 0 || size > dim - at) return mismatch;
      parts.push_back({axis - 1, at, at + size});
      at += size;
    }
    if (at != dim) return mismatch;
  } else {
    ASSIGN_OR_RETURN(const Folded* starts, IntsIn(n, 1));
    ASSIGN_OR_RETURN(const Folded* ends, IntsIn(n, 2));
    ASSIGN_OR_RETURN(const Folded* axes, IntsIn(n, 3));
    ASSIGN_OR_RETURN(const Folded* steps, IntsIn(n, 4));
    const bool unknown =
        starts == nullptr || ends == nullptr ||
        (n.input_size() > 3 && !n.input(3).empty() && axes == nullptr) ||
        (n.input_size() > 4 && !n.input(4).empty() && steps == nullptr);
    if (unknown || starts->v.size() != 1 || ends->v.size() != 1 ||
        (axes != nullptr && axes->v.size() != 1) ||
        (steps != nullptr && (steps->v.size() != 1 || steps->v[0] != 1))) {
      return Bad(absl::StrCat(NodeName(n),
                              ": a slice of a batch is "
                              "imported along one axis with step 1, its "
                              "bounds known at import"));
    }
    int64_t axis = axes == nullptr ? 0 : FoldedInt(axes->v[0]);
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank) {
      return Bad(absl::StrCat(NodeName(n), ": slices axis ", axis));
    }
    double start = starts->v[0], end = ends->v[0];
    if (axis == 0) {
      if (start == 0 && (end == kBatchSize || end >= INT32_MAX)) {
        values_[n.output(0)] = x;
        return absl::OkStatus();
      }
      return Bad(absl::StrCat(NodeName(n), ": slices the batch axis"));
    }
    const double dim = static_cast<double>(x.shape[axis - 1]);
    if (start == kBatchSize || end == kBatchSize) {
      return Bad(absl::StrCat(NodeName(n),
                              ": its bounds depend on the "
                              "batch size"));
    }
    if (start < 0) start += dim;
    if (end < 0) end += dim;
    start = std::clamp(start, 0.0, dim);
    end = std::clamp(end, 0.0, dim);
    if (end <= start) {
      return Bad(absl::StrCat(NodeName(n), ": an empty slice"));
    }
    if (start == 0 && end == dim) {
      values_[n.output(0)] = x;
      return absl::OkStatus();
    }
    parts.push_back(
        {axis - 1, static_cast<int64_t>(start), static_cast<int64_t>(end)});
  }
  for (size_t i = 0; i < parts.size(); ++i) {
    Json fields = Json::object();
    fields["axis"] = HeldAxis(x.channels_last, parts[i].axis);
    fields["start"] = parts[i].start;
    fields["end"] = parts[i].end;
    Shape shape = x.shape;
    shape[parts[i].axis] = parts[i].end - parts[i].start;
    AddLayer("onnx_slice", UniqueName(LayerName(n.output(static_cast<int>(i)))),
             {x.node}, fields, n.output(static_cast<int>(i)), shape,
             x.channels_last);
  }
  return absl::OkStatus();
}

absl::Status Importer::Trilu(const onnx::NodeProto& n) {
  ASSIGN_OR_RETURN(Value x, In(n, 0));
  if (x.channels_last || x.shape.size() < 2) {
    return Bad(absl::StrCat(NodeName(n),
                            ": a Trilu of a batch is imported on matrices "
                            "(2 axes or more a sample, not a feature map)"));
  }
  int64_t k = 0;
  if (n.input_size() > 1 && !n.input(1).empty()) {
    ASSIGN_OR_RETURN(const Folded* f, IntsIn(n, 1));
    if (f == nullptr || f->v.size() != 1 || f->v[0] == kBatchSize) {
      return Bad(absl::StrCat(NodeName(n),
                              ": its k must be known at import (a "
                              "constant)"));
    }
    k = FoldedInt(f->v[0]);
  }
  // torch.triu(x, k) / tril(x, k): the entries kept are 1 in a mask of
  // the last two axes, the rest 0; the product's gradient is the mask's.
  const bool upper = IntAttr(n, "upper", 1) != 0;
  const int64_t rows = x.shape[x.shape.size() - 2], cols = x.shape.back();
  // The mask is written out in the layer's config: bounded as a folded
  // tensor is (a 4096 x 4096 causal mask at most).
  if (cols > 0 && rows > kMaxFoldedValues / cols) {
    return Bad(absl::StrCat(NodeName(n), ": a Trilu of ", rows, " x ", cols,
                            " matrices (its mask holds at most 2^24 values)"));
  }
  Json mask = Json::array();
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      mask.push_back((upper ? c - r >= k : c - r <= k) ? 1 : 0);
    }
  }
  Json a = Json::object();
  a["input"] = 0;
  Json b = Json::object();
  b["shape"] = Shape{rows, cols};
  b["const"] = std::move(mask);
  Json fields = Json::object();
  fields["op"] = "mul";
  fields["a"] = std::move(a);
  fields["b"] = std::move(b);
  AddLayer("onnx_binary",
           UniqueName(LayerName(n.name().empty() ? n.output(0) : n.name())),
           {x.node}, fields, n.output(0), x.shape, false);
  return absl::OkStatus();
}

}  // namespace onnx_internal
}  // namespace lockstep
