// ONNX nodes that become op-level nodes (core/onnx/ops/): element-wise
// ops with their operands, reshapes and transposes, slices, gathers,
// reductions, softmaxes and concatenations (the Importer of
// onnx_importer.h).
#include <algorithm>
#include <cmath>
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

absl::StatusOr<Json> Importer::Operand(const onnx::NodeProto& n, int i,
                                       const std::string& layer, size_t rank,
                                       std::vector<std::string>* inputs) {
  Json o = Json::object();
  auto v = values_.find(n.input(i));
  if (v != values_.end()) {
    if (v->second.channels_last) {
      return Bad(absl::StrCat(NodeName(n), ": ", n.op_type(),
                              " of a feature map is not imported yet"));
    }
    auto at = std::find(inputs->begin(), inputs->end(), v->second.node);
    o["input"] = at - inputs->begin();
    if (at == inputs->end()) inputs->push_back(v->second.node);
    return o;
  }
  // A constant or a parameter: the same for every sample. Its ONNX shape
  // lines up with the batch's last axes; an axis over the batch's must be 1.
  auto per_sample = [&](Shape dims) -> absl::StatusOr<Shape> {
    while (dims.size() > rank) {
      if (dims[0] != 1) {
        return Bad(absl::StrCat(NodeName(n), ": input \"", n.input(i), "\" ",
                                ShapeToString(dims),
                                " varies along the batch's axis"));
      }
      dims.erase(dims.begin());
    }
    return dims;
  };
  if (const Folded* f = FoldedIn(n, i)) {
    for (double x : f->v) {
      if (x == kBatchSize) {
        return Bad(absl::StrCat(NodeName(n),
                                ": computes with the batch size; "
                                "a shape that cannot be made static is not "
                                "imported"));
      }
    }
    ASSIGN_OR_RETURN(Shape dims, per_sample(f->dims));
    o["shape"] = dims;
    // JSON has no infinities (a mask's -inf): those are strings.
    Json values = Json::array();
    for (double x : f->v) {
      if (std::isfinite(x)) {
        values.push_back(x);
      } else {
        values.push_back(std::isnan(x) ? "nan" : x > 0 ? "inf" : "-inf");
      }
    }
    o["const"] = std::move(values);
    return o;
  }
  if (const onnx::TensorProto* t = Init(n, i)) {
    if (static_cast<size_t>(t->dims_size()) > rank) {
      return Bad(absl::StrCat(NodeName(n), ": parameter \"", t->name(),
                              "\" has more axes than a sample"));
    }
    return ParamRef(n, *t, layer);
  }
  return Bad(absl::StrCat(NodeName(n), ": input \"", n.input(i),
                          "\" is not made by an earlier node"));
}

absl::Status Importer::Binary(const onnx::NodeProto& n, const char* op) {
  return Broadcasting(n, "onnx_binary", op, {"a", "b"});
}

absl::Status Importer::Broadcasting(const onnx::NodeProto& n, const char* type,
                                    const char* op,
                                    const std::vector<const char*>& keys) {
  const int count = static_cast<int>(keys.size());
  // The output's per-sample rank: the batch inputs' largest, or the
  // constants' (less the batch axis) when they have more.
  size_t rank = 0;
  bool batch = false;
  for (int i = 0; i < count && i < n.input_size(); ++i) {
    auto v = values_.find(n.input(i));
    if (v != values_.end()) {
      rank = std::max(rank, v->second.shape.size());
      batch = true;
    }
  }
  if (!batch) {
    return Bad(absl::StrCat(NodeName(n), ": ", n.op_type(),
                            " of parameters alone (no batch) is not "
                            "imported yet"));
  }
  for (int i = 0; i < count && i < n.input_size(); ++i) {
    if (const Folded* f = FoldedIn(n, i)) {
      if (f->dims.size() > rank + 1) rank = f->dims.size() - 1;
    }
  }
  const std::string name =
      UniqueName(LayerName(n.name().empty() ? n.output(0) : n.name()));
  std::vector<std::string> inputs;
  Json fields = Json::object();
  if (op != nullptr) fields["op"] = op;
  // The output shape, as the op will work it out.
  Shape out;
  for (int k = 0; k < count; ++k) {
    ASSIGN_OR_RETURN(fields[keys[k]], Operand(n, k, name, rank, &inputs));
    const Json& o = fields[keys[k]];
    const Shape shape = o.contains("input") ? values_[n.input(k)].shape
                                            : o["shape"].get<Shape>();
    std::optional<Shape> merged = onnx_ops::Broadcast(out, shape);
    if (!merged) {
      return Bad(absl::StrCat(NodeName(n), ": shapes ", ShapeToString(out),
                              " and ", ShapeToString(shape),
                              " do not broadcast"));
    }
    out = *merged;
  }
  AddLayer(type, name, inputs, fields, n.output(0), out, false);
  return absl::OkStatus();
}

absl::Status Importer::Unary(const onnx::NodeProto& n, const char* op,
                             Json fields) {
  ASSIGN_OR_RETURN(Value x, In(n, 0));
  if (x.channels_last) {
    return Bad(absl::StrCat(NodeName(n), ": ", n.op_type(),
                            " of a feature map is not imported yet"));
  }
  fields["op"] = op;
  AddLayer("onnx_unary",
           UniqueName(LayerName(n.name().empty() ? n.output(0) : n.name())),
           {x.node}, fields, n.output(0), x.shape, false);
  return absl::OkStatus();
}

absl::Status Importer::ReshapeTo(const onnx::NodeProto& n, const Value& x,
                                 Shape shape) {
  if (NumElements(shape) != NumElements(x.shape)) {
    return Bad(absl::StrCat(NodeName(n), ": cannot reshape ",
                            ShapeToString(x.shape), " per sample to ",
                            ShapeToString(shape)));
  }
  if (x.channels_last) {
    // A feature map flattened (torch's x.view(n, -1)): channel by channel.
    if (shape.size() != 1) {
      return Bad(absl::StrCat(NodeName(n),
                              ": a reshape of a feature map "
                              "other than a flatten is not imported yet"));
    }
    AddLayer("flatten",
             UniqueName(LayerName(n.name().empty() ? n.output(0) : n.name())),
             {x.node}, Json::object(), n.output(0), shape, false);
    return absl::OkStatus();
  }
  if (shape == x.shape) {
    values_[n.output(0)] = x;
    return absl::OkStatus();
  }
  Json fields = Json::object();
  fields["shape"] = shape;
  AddLayer("onnx_reshape",
           UniqueName(LayerName(n.name().empty() ? n.output(0) : n.name())),
           {x.node}, fields, n.output(0), shape, false);
  return absl::OkStatus();
}

absl::Status Importer::OpNode(const onnx::NodeProto& n) {
  const std::string& op = n.op_type();
  if (op == "Div") {
    ASSIGN_OR_RETURN(bool gelu, Gelu(n));
    if (gelu) return absl::OkStatus();
  }
  const std::string base = LayerName(n.name().empty() ? n.output(0) : n.name());
  if (op == "Transpose") {
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
    for (size_t i = 1; i < perm.size(); ++i) {
      if (perm[i] < 1 || perm[i] > static_cast<int64_t>(x.shape.size())) {
        return Bad(
            absl::StrCat(NodeName(n), ": perm ", absl::StrJoin(perm, ", ")));
      }
      p.push_back(perm[i] - 1);
      out.push_back(x.shape[perm[i] - 1]);
    }
    fields["perm"] = p;
    AddLayer("onnx_transpose", UniqueName(base), {x.node}, fields, n.output(0),
             out, false);
    return absl::OkStatus();
  }
  if (op == "MatMul") return MatMul(n);
  if (op == "Sub") return Binary(n, "sub");
  if (op == "Mul") return Binary(n, "mul");
  if (op == "Div") return Binary(n, "div");
  if (op == "Pow") return Binary(n, "pow");
  if (op == "Equal") return Binary(n, "equal");
  if (op == "Less") return Binary(n, "less");
  if (op == "Greater") return Binary(n, "greater");
  if (op == "LessOrEqual") return Binary(n, "less_equal");
  if (op == "GreaterOrEqual") return Binary(n, "greater_equal");
  if (op == "Erf") return Unary(n, "erf", Json::object());
  if (op == "Sqrt") return Unary(n, "sqrt", Json::object());
  if (op == "Neg") return Unary(n, "neg", Json::object());
  if (op == "Exp") return Unary(n, "exp", Json::object());
  if (op == "Log") return Unary(n, "log", Json::object());
  if (op == "Reciprocal") return Unary(n, "reciprocal", Json::object());
  if (op == "Abs") return Unary(n, "abs", Json::object());
  if (op == "Not") return Unary(n, "not", Json::object());
  if (op == "Cast") {
    const int64_t to = IntAttr(n, "to", onnx::TensorProto::FLOAT);
    if (to == onnx::TensorProto::FLOAT || to == onnx::TensorProto::DOUBLE) {
      ASSIGN_OR_RETURN(Value x, In(n, 0));
      values_[n.output(0)] = x;
      return absl::OkStatus();
    }
    if (to == onnx::TensorProto::BOOL)
      return Unary(n, "nonzero", Json::object());
    if (to == onnx::TensorProto::INT64 || to == onnx::TensorProto::INT32) {
      return Unary(n, "trunc", Json::object());
    }
    return Bad(absl::StrCat(NodeName(n), ": a cast to type ", to,
                            " (float, int and bool are imported)"));
  }
  if (op == "Reshape" || op == "Unsqueeze" || op == "Squeeze") {
    ASSIGN_OR_RETURN(Value x, In(n, 0));
    const Folded* arg = FoldedIn(n, 1);
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
      int64_t known = 1;
      for (size_t i = 1; i < s.size(); ++i) {
        if (s[i] != -1) known *= static_cast<int64_t>(s[i]);
      }
      for (size_t i = 1; i < s.size(); ++i) {
        shape.push_back(s[i] == -1 && known > 0 ? NumElements(x.shape) / known
                                                : static_cast<int64_t>(s[i]));
      }
    } else {
      std::vector<int64_t> axes;
      if (arg != nullptr) {
        for (double a : arg->v) axes.push_back(static_cast<int64_t>(a));
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
        for (int64_t& a : axes) a = a < 0 ? a + rank : a;
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
  if (op == "Expand") {
    ASSIGN_OR_RETURN(Value x, In(n, 0));
    const Folded* arg = FoldedIn(n, 1);
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
      to.push_back(static_cast<int64_t>(v));
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
                              ShapeToString(x.shape), " to ",
                              ShapeToString(to)));
    }
    const Shape out = *expanded;
    if (out == x.shape) {
      values_[n.output(0)] = x;
      return absl::OkStatus();
    }
    AddLayer("onnx_binary", UniqueName(base), {x.node}, fields, n.output(0),
             out, false);
    return absl::OkStatus();
  }
  if (op == "Gather") {
    const onnx::TensorProto* table = Init(n, 0);
    if (table != nullptr && table->dims_size() == 2 &&
        IntAttr(n, "axis", 0) == 0) {
      const int64_t rows = table->dims(0), width = table->dims(1);
      auto ids = values_.find(n.input(1));
      if (ids != values_.end()) {
        // A table looked up by a batch of ids: an embedding.
        if (owner_.count(table->name())) {
          return Bad(absl::StrCat(NodeName(n), ": table \"", table->name(),
                                  "\" is looked up by two nodes (not "
                                  "imported yet)"));
        }
        ASSIGN_OR_RETURN(std::string name, Prefix(n, table->name(), "weight"));
        if (!names_.insert(name).second) {
          return Bad(absl::StrCat(NodeName(n), ": the name \"", name,
                                  "\" is taken by another node"));
        }
        RETURN_IF_ERROR(UseParam(n, *table, {rows, width}));
        owner_[table->name()] = name;
        Json fields = Json::object();
        fields["input_dim"] = rows;
        fields["output_dim"] = width;
        Shape out = ids->second.shape;
        out.push_back(width);
        AddLayer("embedding", name, {ids->second.node}, fields, n.output(0),
                 out, false);
        return absl::OkStatus();
      }
      if (const Folded* idx = FoldedIn(n, 1)) {
        // Rows at constant indices (positions 0..L-1): the same rows for
        // every sample.
        for (double v : idx->v) {
          if (!(v >= -rows && v < rows)) {
            return Bad(absl::StrCat(NodeName(n), ": index ", v,
                                    " is outside the ", rows, " rows of \"",
                                    table->name(), "\""));
          }
        }
        const std::string name = UniqueName(base);
        ASSIGN_OR_RETURN(Json fields, ParamRef(n, *table, name));
        fields["indices"] = idx->v;
        fields["indices_shape"] = idx->dims;
        Shape out = idx->dims;
        out.push_back(width);
        AddLayer("onnx_gather_rows", name, {model_inputs_[0]}, fields,
                 n.output(0), out, false);
        return absl::OkStatus();
      }
    }
    // One place along a sample's axis (x[:, 0]: BERT's pooler reads the
    // first token, a classifier the last): a slice there, the axis dropped.
    auto x = values_.find(n.input(0));
    const Folded* at = FoldedIn(n, 1);
    if (x != values_.end() && at != nullptr && at->v.size() == 1 &&
        !x->second.channels_last) {
      const Value& v = x->second;
      const int64_t rank = static_cast<int64_t>(v.shape.size()) + 1;
      int64_t axis = IntAttr(n, "axis", 0);
      if (axis < 0) axis += rank;
      if (axis >= 1 && axis < rank && at->v[0] != kBatchSize) {
        const int64_t dim = v.shape[axis - 1];
        int64_t i = static_cast<int64_t>(at->v[0]);
        if (i < 0) i += dim;
        if (i < 0 || i >= dim) {
          return Bad(absl::StrCat(NodeName(n), ": index ", at->v[0],
                                  " is outside axis ", axis, "'s ", dim));
        }
        Shape sliced = v.shape;
        sliced[axis - 1] = 1;
        Shape out = v.shape;
        out.erase(out.begin() + (axis - 1));
        if (at->dims.size() == 1) out = sliced;  // an index [1] keeps it
        Json fields = Json::object();
        fields["axis"] = axis - 1;
        fields["start"] = i;
        fields["end"] = i + 1;
        const std::string slice = UniqueName(base);
        const std::string slice_out = n.output(0) + "#slice";
        AddLayer("onnx_slice", slice, {v.node}, fields, slice_out, sliced,
                 false);
        if (out == sliced) {
          values_[n.output(0)] = values_[slice_out];
          return absl::OkStatus();
        }
        Json shape = Json::object();
        shape["shape"] = out.empty() ? Shape{1} : out;
        AddLayer("onnx_reshape", UniqueName(base + "_squeeze"), {slice}, shape,
                 n.output(0), out.empty() ? Shape{1} : out, false);
        return absl::OkStatus();
      }
    }
    return Bad(absl::StrCat(NodeName(n),
                            ": a Gather is imported for a parameter table's "
                            "rows (an embedding), one place along a "
                            "sample's axis, or constants"));
  }
  if (op == "GatherElements") {
    ASSIGN_OR_RETURN(Value x, In(n, 0));
    ASSIGN_OR_RETURN(Value idx, In(n, 1));
    int64_t axis = IntAttr(n, "axis", 0);
    if (axis < 0) axis += static_cast<int64_t>(x.shape.size()) + 1;
    if (axis <= 0 || x.channels_last || idx.channels_last) {
      return Bad(absl::StrCat(NodeName(n),
                              ": GatherElements along the batch "
                              "axis or of a feature map"));
    }
    bool fits = x.shape.size() == idx.shape.size();
    for (size_t d = 0; fits && d < x.shape.size(); ++d) {
      fits = static_cast<int64_t>(d) == axis - 1 || idx.shape[d] <= x.shape[d];
    }
    if (!fits) {
      return Bad(absl::StrCat(NodeName(n), ": gathers ",
                              ShapeToString(idx.shape), " from ",
                              ShapeToString(x.shape), " along axis ", axis));
    }
    Json fields = Json::object();
    fields["axis"] = axis - 1;
    AddLayer("onnx_gather_elements", UniqueName(base), {x.node, idx.node},
             fields, n.output(0), idx.shape, false);
    return absl::OkStatus();
  }
  if (op == "LayerNormalization") {
    ASSIGN_OR_RETURN(Value x, In(n, 0));
    const onnx::TensorProto* scale = Init(n, 1);
    const onnx::TensorProto* bias = Init(n, 2);
    const int64_t axis = IntAttr(n, "axis", -1);
    if (x.channels_last || x.shape.empty() ||
        (axis != -1 && axis != static_cast<int64_t>(x.shape.size())) ||
        scale == nullptr || bias == nullptr) {
      return Bad(absl::StrCat(NodeName(n),
                              ": a LayerNormalization is imported over the "
                              "last axis with a weight and a bias "
                              "(torch's LayerNorm)"));
    }
    const int64_t width = x.shape.back();
    ASSIGN_OR_RETURN(std::string name, Prefix(n, scale->name(), "weight"));
    if (bias->name() != name + ".bias") {
      return Bad(absl::StrCat(NodeName(n), ": its bias \"", bias->name(),
                              "\" should be named \"", name, ".bias\""));
    }
    if (!names_.insert(name).second) {
      return Bad(absl::StrCat(NodeName(n), ": the name \"", name,
                              "\" is taken by another node"));
    }
    RETURN_IF_ERROR(UseParam(n, *scale, {width}));
    RETURN_IF_ERROR(UseParam(n, *bias, {width}));
    owner_[scale->name()] = name;
    owner_[bias->name()] = name;
    Json fields = Json::object();
    fields["epsilon"] = FloatAttr(n, "epsilon", 1e-5f);
    AddLayer("layer_norm", name, {x.node}, fields, n.output(0), x.shape, false);
    return absl::OkStatus();
  }
  if (op == "Where") {
    return Broadcasting(n, "onnx_where", nullptr, {"cond", "a", "b"});
  }
  if (op == "ReduceSum" || op == "ReduceMean") {
    ASSIGN_OR_RETURN(Value x, In(n, 0));
    const int64_t rank = static_cast<int64_t>(x.shape.size()) + 1;
    // opset 13's ReduceSum takes its axes as an input, ReduceMean (to 17)
    // as an attribute; none: every axis.
    std::vector<int64_t> axes = IntsAttr(n, "axes", {});
    if (const Folded* f = FoldedIn(n, 1)) {
      for (double v : f->v) axes.push_back(static_cast<int64_t>(v));
    } else if (n.input_size() > 1 && !n.input(1).empty()) {
      return Bad(absl::StrCat(NodeName(n),
                              ": its axes must be known at "
                              "import"));
    }
    const bool noop = IntAttr(n, "noop_with_empty_axes", 0) != 0;
    if (axes.empty() && noop) {
      values_[n.output(0)] = x;
      return absl::OkStatus();
    }
    if (axes.empty()) {
      for (int64_t a = 0; a < rank; ++a) axes.push_back(a);
    }
    std::vector<int64_t> per_sample;
    for (int64_t a : axes) {
      if (a < 0) a += rank;
      if (a < 1 || a >= rank || x.channels_last) {
        return Bad(absl::StrCat(NodeName(n), ": reduces axis ", a,
                                a == 0 ? " (the batch's)" : "",
                                x.channels_last ? " of a feature map" : "",
                                "; only a sample's own axes are imported"));
      }
      per_sample.push_back(a - 1);
    }
    std::sort(per_sample.begin(), per_sample.end());
    per_sample.erase(std::unique(per_sample.begin(), per_sample.end()),
                     per_sample.end());
    const bool keep = IntAttr(n, "keepdims", 1) != 0;
    Shape out;
    for (size_t d = 0; d < x.shape.size(); ++d) {
      const bool reduced = std::count(per_sample.begin(), per_sample.end(),
                                      static_cast<int64_t>(d)) > 0;
      if (!reduced) out.push_back(x.shape[d]);
      if (reduced && keep) out.push_back(1);
    }
    if (out.empty()) out.push_back(1);  // a scalar a sample, held as [1]
    Json fields = Json::object();
    fields["op"] = op == "ReduceSum" ? "sum" : "mean";
    fields["axes"] = per_sample;
    fields["keepdims"] = keep;
    AddLayer("onnx_reduce", UniqueName(base), {x.node}, fields, n.output(0),
             out, false);
    return absl::OkStatus();
  }
  if (op == "Concat") {
    std::vector<std::string> inputs;
    Shape out;
    int64_t axis = IntAttr(n, "axis", 0);
    for (int i = 0; i < n.input_size(); ++i) {
      ASSIGN_OR_RETURN(Value v, In(n, i));
      if (v.channels_last) {
        return Bad(absl::StrCat(NodeName(n),
                                ": a Concat of feature maps is "
                                "not imported yet"));
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
    fields["axis"] = axis - 1;
    AddLayer("onnx_concat", UniqueName(base), inputs, fields, n.output(0), out,
             false);
    return absl::OkStatus();
  }
  if (op == "Split" || op == "Slice") {
    ASSIGN_OR_RETURN(Value x, In(n, 0));
    if (x.channels_last) {
      return Bad(absl::StrCat(NodeName(n), ": ", op,
                              " of a feature map is not imported yet"));
    }
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
      if (const Folded* f = FoldedIn(n, 1)) {
        sizes.clear();
        for (double v : f->v) sizes.push_back(static_cast<int64_t>(v));
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
      int64_t at = 0;
      for (int64_t size : sizes) {
        parts.push_back({axis - 1, at, at + size});
        at += size;
      }
      if (at != dim || static_cast<int>(sizes.size()) != n.output_size()) {
        return Bad(absl::StrCat(
            NodeName(n), ": sizes ", absl::StrJoin(sizes, ", "),
            " do not split ", dim, " into its ", n.output_size(), " outputs"));
      }
    } else {
      const Folded* starts = FoldedIn(n, 1);
      const Folded* ends = FoldedIn(n, 2);
      const Folded* axes = FoldedIn(n, 3);
      const Folded* steps = FoldedIn(n, 4);
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
      int64_t axis = axes == nullptr ? 0 : static_cast<int64_t>(axes->v[0]);
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
      fields["axis"] = parts[i].axis;
      fields["start"] = parts[i].start;
      fields["end"] = parts[i].end;
      Shape shape = x.shape;
      shape[parts[i].axis] = parts[i].end - parts[i].start;
      AddLayer("onnx_slice",
               UniqueName(LayerName(n.output(static_cast<int>(i)))), {x.node},
               fields, n.output(static_cast<int>(i)), shape, false);
    }
    return absl::OkStatus();
  }
  if (Foldable(op)) {
    return Bad(absl::StrCat(NodeName(n), ": op ", op,
                            " is imported on constants only (its inputs "
                            "known at import), not on a batch"));
  }
  return Bad(
      absl::StrCat(NodeName(n), ": op ", op,
                   " is not supported yet; supported: ", SupportedOps()));
}

}  // namespace onnx_internal
}  // namespace lockstep
