// ONNX nodes that become op-level nodes (core/onnx/ops/): element-wise
// ops with their operands, gathers, reductions and softmaxes, and the
// dispatch to those that move values (onnx_shape_nodes.cc) (the Importer
// of onnx_importer.h).
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
                                       bool maps,
                                       std::vector<std::string>* inputs) {
  Json o = Json::object();
  auto v = values_.find(n.input(i));
  if (v != values_.end()) {
    if (v->second.channels_last != maps) {
      return Bad(absl::StrCat(NodeName(n), ": ", n.op_type(),
                              " of a feature map and a tensor that is not "
                              "one is not imported yet"));
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
    std::vector<double> held = f->v;
    if (maps) {
      // [C, H, W] (leading axes of 1 added) as the maps hold it: [H, W, C].
      while (dims.size() < 3) dims.insert(dims.begin(), 1);
      const int64_t c = dims[0], hw = dims[1] * dims[2];
      for (int64_t ch = 0; ch < c; ++ch) {
        for (int64_t p = 0; p < hw; ++p) held[p * c + ch] = f->v[ch * hw + p];
      }
      dims = {dims[1], dims[2], c};
    }
    o["shape"] = dims;
    // JSON has no infinities (a mask's -inf): those are strings.
    Json values = Json::array();
    for (double x : held) {
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
    if (maps) {
      return Bad(absl::StrCat(NodeName(n), ": parameter \"", t->name(),
                              "\" with a feature map is not imported yet"));
    }
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
  bool batch = false, maps = false;
  for (int i = 0; i < count && i < n.input_size(); ++i) {
    auto v = values_.find(n.input(i));
    if (v != values_.end()) {
      rank = std::max(rank, v->second.shape.size());
      batch = true;
      maps = maps || v->second.channels_last;
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
    ASSIGN_OR_RETURN(fields[keys[k]], Operand(n, k, name, rank, maps, &inputs));
    const Json& o = fields[keys[k]];
    Shape shape = o.contains("input") ? values_[n.input(k)].shape
                                      : o["shape"].get<Shape>();
    if (maps && !o.contains("input")) {
      shape = {shape[2], shape[0], shape[1]};  // held [H, W, C] -> [C, H, W]
    }
    std::optional<Shape> merged = onnx_ops::Broadcast(out, shape);
    if (!merged) {
      return Bad(absl::StrCat(NodeName(n), ": shapes ", ShapeToString(out),
                              " and ", ShapeToString(shape),
                              " do not broadcast"));
    }
    out = *merged;
  }
  AddLayer(type, name, inputs, fields, n.output(0), out, maps);
  return absl::OkStatus();
}

absl::Status Importer::Unary(const onnx::NodeProto& n, const char* op,
                             Json fields) {
  ASSIGN_OR_RETURN(Value x, In(n, 0));
  fields["op"] = op;
  // Element by element: a feature map stays one.
  AddLayer("onnx_unary",
           UniqueName(LayerName(n.name().empty() ? n.output(0) : n.name())),
           {x.node}, fields, n.output(0), x.shape, x.channels_last);
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
  if (op == "Transpose") return Transpose(n);
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
  if (op == "HardSwish") return Unary(n, "hard_swish", Json::object());
  if (op == "HardSigmoid") {
    Json fields = Json::object();
    fields["alpha"] = FloatAttr(n, "alpha", 0.2f);
    fields["beta"] = FloatAttr(n, "beta", 0.5f);
    return Unary(n, "hard_sigmoid", fields);
  }
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
  if (op == "Reshape" || op == "Unsqueeze" || op == "Squeeze")
    return Reshape(n);
  if (op == "Expand") return Expand(n);
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
      ASSIGN_OR_RETURN(const Folded* indices, IntsIn(n, 1));
      if (const Folded* idx = indices) {
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
    ASSIGN_OR_RETURN(const Folded* at, IntsIn(n, 1));
    if (x != values_.end() && at != nullptr && at->v.size() == 1 &&
        !x->second.channels_last) {
      const Value& v = x->second;
      const int64_t rank = static_cast<int64_t>(v.shape.size()) + 1;
      int64_t axis = IntAttr(n, "axis", 0);
      if (axis < 0) axis += rank;
      if (axis >= 1 && axis < rank && at->v[0] != kBatchSize) {
        const int64_t dim = v.shape[axis - 1];
        int64_t i = FoldedInt(at->v[0]);
        if (i < 0) i += dim;
        if (i < 0 || i >= dim) {
          return Bad(absl::StrCat(NodeName(n), ": index ", FoldedInt(at->v[0]),
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
    ASSIGN_OR_RETURN(const Folded* axes_in, IntsIn(n, 1));
    if (const Folded* f = axes_in) {
      for (double v : f->v) axes.push_back(FoldedInt(v));
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
  if (op == "Concat") return Concat(n);
  if (op == "Trilu") return Trilu(n);
  if (op == "Split" || op == "Slice") return SplitOrSlice(n);
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
