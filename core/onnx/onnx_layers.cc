// ONNX nodes that become registry layers (the Importer of onnx_importer.h):
// Conv, BatchNormalization, pools, Flatten, Gemm and x @ W.T as dense,
// Gather of a table as an embedding, LayerNormalization, torch's GELU and
// the activations fused into the layer before them.
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
namespace {

// The [channels, h, w] a 2-D window (a conv's or a pool's: kernel k,
// strides, pads the same on both sides) makes of a [C, H, W] map. Worked
// out here, not read from shape inference, which loses the shapes after
// slices whose bounds come from Shape nodes (torch.chunk).
absl::StatusOr<Shape> WindowOutput(const onnx::NodeProto& n, const Shape& x,
                                   int64_t channels,
                                   const std::vector<int64_t>& k,
                                   const std::vector<int64_t>& strides,
                                   const std::vector<int64_t>& pads) {
  const int64_t h = x[1] + 2 * pads[0] - k[0];
  const int64_t w = x[2] + 2 * pads[1] - k[1];
  if (h < 0 || w < 0) {
    return Bad(absl::StrCat(NodeName(n), ": its window [", k[0], ", ", k[1],
                            "] is larger than its padded input [",
                            x[1] + 2 * pads[0], ", ", x[2] + 2 * pads[1], "]"));
  }
  return Shape{channels, h / strides[0] + 1, w / strides[1] + 1};
}

}  // namespace

absl::Status Importer::Activation(const onnx::NodeProto& n,
                                  const char* activation) {
  ASSIGN_OR_RETURN(Value x, In(n, 0));
  auto at = layer_index_.find(x.node);
  if (at != layer_index_.end() && uses_[n.input(0)] == 1) {
    Json& producer = layers_[at->second];
    const std::string type = producer["type"].get<std::string>();
    const bool takes =
        type == "conv2d" || type == "depthwise_conv2d" || type == "dense" ||
        (type == "batch_norm" && std::string(activation) != "softmax");
    if (takes && producer.contains("activation") &&
        producer["activation"] == "linear") {
      producer["activation"] = activation;
      values_[n.output(0)] = x;
      return absl::OkStatus();
    }
  }
  if (std::string(activation) == "softmax" && x.channels_last &&
      x.shape.size() == 3) {
    return Bad(absl::StrCat(NodeName(n),
                            ": a softmax over a feature map's width is not "
                            "imported yet"));
  }
  Json f = Json::object();
  f["activation"] = activation;
  AddLayer("activation",
           UniqueName(LayerName(n.name().empty() ? n.output(0) : n.name())),
           {x.node}, f, n.output(0), x.shape, x.channels_last);
  return absl::OkStatus();
}

absl::Status Importer::Node(const onnx::NodeProto& n) {
  const std::string& op = n.op_type();
  if (!n.domain().empty() && n.domain() != "ai.onnx") {
    return Bad(absl::StrCat(NodeName(n), ": op domain \"", n.domain(),
                            "\" is not supported (only the default domain)"));
  }
  const std::string base = LayerName(n.name().empty() ? n.output(0) : n.name());
  if (fused_.count(n.output(0))) return absl::OkStatus();
  if (op == "Shape") {
    auto v = values_.find(n.input(0));
    if (v != values_.end()) {
      Shape full = {-1};
      full.insert(full.end(), v->second.shape.begin(), v->second.shape.end());
      folded_[n.output(0)] = ShapeOf(n, full);
      return absl::OkStatus();
    }
  }
  if (Foldable(op) && n.input_size() > 0) {
    std::vector<const Folded*> in;
    bool all = true;
    for (int i = 0; i < n.input_size(); ++i) {
      const Folded* f = FoldedIn(n, i);
      if (!n.input(i).empty() && f == nullptr) all = false;
      in.push_back(f);
    }
    if (all) {
      absl::StatusOr<Folded> f = FoldNode(n, in);
      if (!f.ok()) {
        return Bad(absl::StrCat(NodeName(n), ": ", f.status().message(),
                                "; a shape that cannot be made static is "
                                "not imported"));
      }
      folded_[n.output(0)] = *std::move(f);
      return absl::OkStatus();
    }
  }
  if (op == "Constant") {
    for (const auto& a : n.attribute()) {
      if (a.name() != "value") continue;
      absl::StatusOr<Folded> f = FoldTensor(a.t());
      if (!f.ok()) {
        return Bad(absl::StrCat(NodeName(n), ": ", f.status().message()));
      }
      folded_[n.output(0)] = *std::move(f);
      return absl::OkStatus();
    }
    return Bad(absl::StrCat(NodeName(n),
                            ": only a \"value\" tensor constant "
                            "is imported"));
  }
  if (op == "Identity") {
    ASSIGN_OR_RETURN(Value x, In(n, 0));
    values_[n.output(0)] = x;
    return absl::OkStatus();
  }
  if (op == "Relu") return Activation(n, "relu");
  if (op == "Sigmoid") return Activation(n, "sigmoid");
  if (op == "Tanh") return Activation(n, "tanh");
  if (op == "Softmax" || op == "LogSoftmax") {
    ASSIGN_OR_RETURN(Value x, In(n, 0));
    int64_t axis = IntAttr(n, "axis", -1);
    const int64_t rank = static_cast<int64_t>(x.shape.size()) + 1;
    if (axis < 0) axis += rank;
    if (op == "Softmax" && axis == rank - 1) return Activation(n, "softmax");
    if (axis < 1 || axis >= rank || x.channels_last) {
      return Bad(absl::StrCat(NodeName(n), ": a ", op, " over axis ", axis,
                              x.channels_last ? " of a feature map" : "",
                              " (the batch axis or a feature map's are not "
                              "imported)"));
    }
    // Along another axis, or a log-softmax: the op node.
    Json fields = Json::object();
    fields["axis"] = axis - 1;
    fields["log"] = op == "LogSoftmax";
    AddLayer("onnx_softmax", UniqueName(base), {x.node}, fields, n.output(0),
             x.shape, false);
    return absl::OkStatus();
  }
  if (op == "Clip") {
    ASSIGN_OR_RETURN(double lo, Scalar(n, 1, -INFINITY));
    ASSIGN_OR_RETURN(double hi, Scalar(n, 2, INFINITY));
    if (lo == 0 && hi == 6) return Activation(n, "relu6");
    if (lo == 0 && std::isinf(hi)) return Activation(n, "relu");
    return Bad(absl::StrCat(NodeName(n), ": a clip to [", lo, ", ", hi,
                            "] (only ReLU's [0, inf) and ReLU6's [0, 6] are "
                            "imported)"));
  }
  if (op == "Conv") {
    ASSIGN_OR_RETURN(Value x, In(n, 0));
    const onnx::TensorProto* w = Init(n, 1);
    const onnx::TensorProto* b = Init(n, 2);
    if (w == nullptr || w->dims_size() != 4 || x.shape.size() != 3) {
      return Bad(absl::StrCat(NodeName(n),
                              ": a 2-D convolution of a [C, H, W] feature "
                              "map by a [F, C/groups, KH, KW] weight "
                              "initializer is imported"));
    }
    if (n.input_size() > 2 && !n.input(2).empty() && b == nullptr) {
      return Bad(absl::StrCat(NodeName(n),
                              ": its bias must be an "
                              "initializer"));
    }
    const std::string auto_pad = StringAttr(n, "auto_pad");
    if (!auto_pad.empty() && auto_pad != "NOTSET") {
      return Bad(absl::StrCat(NodeName(n), ": auto_pad ", auto_pad,
                              " (export explicit pads)"));
    }
    const std::vector<int64_t> dilations = IntsAttr(n, "dilations", {1, 1});
    const std::vector<int64_t> pads = IntsAttr(n, "pads", {0, 0, 0, 0});
    if (pads.size() != 4 || pads[0] != pads[2] || pads[1] != pads[3]) {
      return Bad(absl::StrCat(NodeName(n), ": pads [",
                              absl::StrJoin(pads, ", "),
                              "] are not the same on both sides"));
    }
    const std::vector<int64_t> strides = IntsAttr(n, "strides", {1, 1});
    const int64_t group = IntAttr(n, "group", 1);
    const int64_t f = w->dims(0), cg = w->dims(1), kh = w->dims(2),
                  kw = w->dims(3), c = x.shape[0];
    if (cg * group != c || f % group != 0) {
      return Bad(absl::StrCat(NodeName(n), ": weight ",
                              ShapeToString({f, cg, kh, kw}), " with ", group,
                              " groups does not fit ", c, " input channels"));
    }
    ASSIGN_OR_RETURN(std::string prefix, Prefix(n, w->name(), "weight"));
    if (b != nullptr && b->name() != prefix + ".bias") {
      return Bad(absl::StrCat(NodeName(n), ": its bias \"", b->name(),
                              "\" should be named \"", prefix, ".bias\""));
    }
    RETURN_IF_ERROR(UseParam(n, *w, {f, cg, kh, kw}));
    if (b != nullptr) RETURN_IF_ERROR(UseParam(n, *b, {f}));
    Json fields = Json::object();
    const bool depthwise = group == c && cg == 1 && group > 1;
    const bool dilated = dilations != std::vector<int64_t>{1, 1};
    if (dilated && depthwise) {
      return Bad(absl::StrCat(NodeName(n),
                              ": a dilated depthwise "
                              "convolution (dilations ",
                              absl::StrJoin(dilations, ", "),
                              ") is not imported yet"));
    }
    if (dilated) fields["dilation_rate"] = dilations;
    fields["kernel_size"] = {kh, kw};
    fields["strides"] = strides;
    if (pads[0] == 0 && pads[1] == 0) {
      fields["padding"] = "valid";
    } else {
      fields["padding"] = {pads[0], pads[1]};
    }
    fields["use_bias"] = b != nullptr;
    fields["activation"] = "linear";
    if (depthwise) {
      fields["depth_multiplier"] = f / c;
    } else {
      fields["filters"] = f;
      fields["groups"] = group;
    }
    ASSIGN_OR_RETURN(Shape out, WindowOutput(n, x.shape, f,
                                             {dilations[0] * (kh - 1) + 1,
                                              dilations[1] * (kw - 1) + 1},
                                             strides, pads));
    if (!names_.insert(prefix).second) {
      return Bad(absl::StrCat(NodeName(n), ": the name \"", prefix,
                              "\" is taken by another node"));
    }
    AddLayer(depthwise ? "depthwise_conv2d" : "conv2d", prefix, {x.node},
             fields, n.output(0), out, true);
    return absl::OkStatus();
  }
  if (op == "BatchNormalization") {
    ASSIGN_OR_RETURN(Value x, In(n, 0));
    RETURN_IF_ERROR(OnlyUsed(n, 1));
    if (x.shape.empty() || (x.shape.size() != 1 && !x.channels_last)) {
      return Bad(absl::StrCat(NodeName(n), ": a batch norm of ",
                              ShapeToString(x.shape),
                              " (of a feature map or a vector is imported)"));
    }
    const int64_t c = x.shape[0];
    const onnx::TensorProto* p[4] = {Init(n, 1), Init(n, 2), Init(n, 3),
                                     Init(n, 4)};
    const char* suffix[4] = {"weight", "bias", "running_mean", "running_var"};
    for (int i = 0; i < 4; ++i) {
      if (p[i] == nullptr) {
        return Bad(absl::StrCat(NodeName(n), ": its ", suffix[i],
                                " must be an initializer"));
      }
    }
    ASSIGN_OR_RETURN(std::string prefix, Prefix(n, p[0]->name(), "weight"));
    for (int i = 0; i < 4; ++i) {
      if (p[i]->name() != absl::StrCat(prefix, ".", suffix[i])) {
        return Bad(absl::StrCat(NodeName(n), ": \"", p[i]->name(),
                                "\" should be named \"", prefix, ".", suffix[i],
                                "\""));
      }
      RETURN_IF_ERROR(UseParam(n, *p[i], {c}));
    }
    Json fields = Json::object();
    // ONNX's momentum is the running statistics' weight (Keras'): torch's
    // momentum 0.1 exports as 0.9.
    fields["momentum"] = FloatAttr(n, "momentum", 0.9f);
    fields["epsilon"] = FloatAttr(n, "epsilon", 1e-5f);
    fields["activation"] = "linear";
    if (!names_.insert(prefix).second) {
      return Bad(absl::StrCat(NodeName(n), ": the name \"", prefix,
                              "\" is taken by another node"));
    }
    AddLayer("batch_norm", prefix, {x.node}, fields, n.output(0), x.shape,
             x.channels_last);
    return absl::OkStatus();
  }
  if (op == "Pad") {
    // Only as torch exports AvgPool2d(padding=N): zeros on both sides of H
    // and W that one AveragePool reads (the pads counted in its divisor).
    ASSIGN_OR_RETURN(Value x, In(n, 0));
    const onnx::NodeProto* reader = SoleReader(n);
    ASSIGN_OR_RETURN(const Folded* pads, IntsIn(n, 1));
    const Folded* fill = FoldedIn(n, 2);
    const std::string mode = StringAttr(n, "mode");
    const bool zeros =
        n.input_size() < 3 || n.input(2).empty() ||
        (fill != nullptr && fill->v.size() == 1 && fill->v[0] == 0);
    const std::vector<double> v =
        pads != nullptr ? pads->v : std::vector<double>{};
    if (reader == nullptr || reader->op_type() != "AveragePool" ||
        !x.channels_last || !zeros || n.input_size() > 3 ||
        (!mode.empty() && mode != "constant") || v.size() != 8 || v[0] != 0 ||
        v[1] != 0 || v[4] != 0 || v[5] != 0 || v[2] != v[6] || v[3] != v[7] ||
        v[2] < 0 || v[3] < 0) {
      return Bad(absl::StrCat(
          NodeName(n),
          ": a Pad is imported only as the zero padding of the one average "
          "pool that reads it (torch's AvgPool2d(padding=N)): constant 0, "
          "the same rows on both sides of H and columns of W"));
    }
    if (v[2] > kMaxSpatialValue || v[3] > kMaxSpatialValue) {
      return Bad(absl::StrCat(NodeName(n), ": pads ", FoldedInt(v[2]), " and ",
                              FoldedInt(v[3]), " (pads are 0 to ",
                              kMaxSpatialValue, ")"));
    }
    padded_[n.output(0)] = {x, static_cast<int64_t>(v[2]),
                            static_cast<int64_t>(v[3])};
    return absl::OkStatus();
  }
  if (op == "MaxPool" || op == "AveragePool") {
    const bool max = op == "MaxPool";
    auto pad = padded_.find(n.input(0));
    Value x;
    if (!max && pad != padded_.end()) {
      x = pad->second.x;
    } else {
      ASSIGN_OR_RETURN(x, In(n, 0));
    }
    if (max) RETURN_IF_ERROR(OnlyUsed(n, 1));
    const std::vector<int64_t> k = IntsAttr(n, "kernel_shape", {});
    std::vector<int64_t> pads = IntsAttr(n, "pads", {0, 0, 0, 0});
    bool count_pads = IntAttr(n, "count_include_pad", 0) != 0;
    if (!max && pad != padded_.end()) {
      if (pads != std::vector<int64_t>{0, 0, 0, 0}) {
        return Bad(
            absl::StrCat(NodeName(n), ": pads of its own after a Pad node"));
      }
      pads = {pad->second.rows, pad->second.cols, pad->second.rows,
              pad->second.cols};
      count_pads = true;  // the Pad's zeros are cells of its input
    }
    const std::string auto_pad = StringAttr(n, "auto_pad");
    if (!x.channels_last || x.shape.size() != 3 || k.size() != 2 ||
        IntAttr(n, "ceil_mode", 0) != 0 ||
        IntsAttr(n, "dilations", {1, 1}) != std::vector<int64_t>{1, 1} ||
        (!auto_pad.empty() && auto_pad != "NOTSET")) {
      return Bad(absl::StrCat(NodeName(n), ": a 2-D ", max ? "max" : "average",
                              " pool of a feature map without dilation, "
                              "ceil_mode or auto_pad is imported"));
    }
    // PyTorch's padding: the same on both sides, at most half the window.
    if (pads.size() != 4 || pads[0] != pads[2] || pads[1] != pads[3] ||
        2 * pads[0] > k[0] || 2 * pads[1] > k[1]) {
      return Bad(absl::StrCat(NodeName(n), ": pads [",
                              absl::StrJoin(pads, ", "),
                              "] are not the same on both sides and at most "
                              "half the window"));
    }
    Json fields = Json::object();
    fields["pool_size"] = k;
    fields["strides"] = IntsAttr(n, "strides", {1, 1});  // ONNX's default
    if (pads[0] == 0 && pads[1] == 0) {
      fields["padding"] = "valid";
    } else {
      fields["padding"] = {pads[0], pads[1]};
    }
    if (!max) fields["count_include_pad"] = count_pads;
    ASSIGN_OR_RETURN(Shape out,
                     WindowOutput(n, x.shape, x.shape[0], k,
                                  IntsAttr(n, "strides", {1, 1}), pads));
    AddLayer(max ? "max_pool2d" : "average_pooling2d", UniqueName(base),
             {x.node}, fields, n.output(0), out, true);
    return absl::OkStatus();
  }
  if (op == "GlobalAveragePool") {
    ASSIGN_OR_RETURN(Value x, In(n, 0));
    if (!x.channels_last || x.shape.size() != 3) {
      return Bad(absl::StrCat(NodeName(n),
                              ": of a [C, H, W] feature map "
                              "is imported"));
    }
    Json fields = Json::object();
    fields["keepdims"] = true;
    AddLayer("global_average_pooling2d", UniqueName(base), {x.node}, fields,
             n.output(0), {x.shape[0], 1, 1}, true);
    return absl::OkStatus();
  }
  if (op == "Flatten") {
    ASSIGN_OR_RETURN(Value x, In(n, 0));
    if (IntAttr(n, "axis", 1) != 1) {
      return Bad(absl::StrCat(NodeName(n), ": a flatten from axis ",
                              IntAttr(n, "axis", 1),
                              " (only the batch's, axis 1, is imported)"));
    }
    if (x.shape.size() == 1) {
      values_[n.output(0)] = x;
      return absl::OkStatus();
    }
    // Under PyTorch naming lockstep's flatten orders a channels-last map
    // channel by channel: ONNX's order.
    AddLayer("flatten", UniqueName(base), {x.node}, Json::object(), n.output(0),
             {NumElements(x.shape)}, false);
    return absl::OkStatus();
  }
  if (op == "Gemm") {
    ASSIGN_OR_RETURN(Value a, In(n, 0));
    const onnx::TensorProto* w = Init(n, 1);
    const onnx::TensorProto* b = Init(n, 2);
    if (a.shape.size() != 1 || w == nullptr || w->dims_size() != 2 ||
        IntAttr(n, "transA", 0) != 0 || IntAttr(n, "transB", 0) != 1 ||
        FloatAttr(n, "alpha", 1) != 1 || FloatAttr(n, "beta", 1) != 1) {
      return Bad(
          absl::StrCat(NodeName(n),
                       ": only a torch Linear is imported (a vector times a "
                       "[out, in] weight initializer, transB = 1, alpha = "
                       "beta = 1)"));
    }
    if (n.input_size() > 2 && !n.input(2).empty() && b == nullptr) {
      return Bad(absl::StrCat(NodeName(n),
                              ": its bias must be an "
                              "initializer"));
    }
    const int64_t units = w->dims(0), in = w->dims(1);
    if (in != a.shape[0]) {
      return Bad(absl::StrCat(NodeName(n), ": weight ",
                              ShapeToString({units, in}), " does not take ",
                              a.shape[0], " inputs"));
    }
    ASSIGN_OR_RETURN(std::string prefix, Prefix(n, w->name(), "weight"));
    if (b != nullptr && b->name() != prefix + ".bias") {
      return Bad(absl::StrCat(NodeName(n), ": its bias \"", b->name(),
                              "\" should be named \"", prefix, ".bias\""));
    }
    RETURN_IF_ERROR(UseParam(n, *w, {units, in}));
    if (b != nullptr) RETURN_IF_ERROR(UseParam(n, *b, {units}));
    Json fields = Json::object();
    fields["units"] = units;
    fields["use_bias"] = b != nullptr;
    fields["activation"] = "linear";
    if (!names_.insert(prefix).second) {
      return Bad(absl::StrCat(NodeName(n), ": the name \"", prefix,
                              "\" is taken by another node"));
    }
    AddLayer("dense", prefix, {a.node}, fields, n.output(0), {units}, false);
    return absl::OkStatus();
  }
  if (op == "Add") {
    auto va = values_.find(n.input(0));
    auto vb = values_.find(n.input_size() > 1 ? n.input(1) : "");
    if (va == values_.end() || vb == values_.end() ||
        va->second.shape != vb->second.shape ||
        va->second.channels_last != vb->second.channels_last) {
      // A bias, a constant or a broadcast: the element-wise op.
      return Binary(n, "add");
    }
    const Value a = va->second, b = vb->second;
    AddLayer("add", UniqueName(base), {a.node, b.node}, Json::object(),
             n.output(0), a.shape, a.channels_last);
    return absl::OkStatus();
  }
  if (op == "Dropout") {
    ASSIGN_OR_RETURN(Value x, In(n, 0));
    RETURN_IF_ERROR(OnlyUsed(n, 1));
    ASSIGN_OR_RETURN(double ratio, Scalar(n, 1, 0.5));
    if (ratio <= 0) {
      values_[n.output(0)] = x;
      return absl::OkStatus();
    }
    Json fields = Json::object();
    fields["rate"] = ratio;
    AddLayer("dropout", UniqueName(base), {x.node}, fields, n.output(0),
             x.shape, x.channels_last);
    return absl::OkStatus();
  }
  return OpNode(n);
}

absl::Status Importer::MatMul(const onnx::NodeProto& n) {
  ASSIGN_OR_RETURN(Value a, In(n, 0));
  if (a.channels_last) {
    return Bad(absl::StrCat(NodeName(n),
                            ": MatMul of a feature map is not "
                            "imported yet"));
  }
  auto t =
      n.input_size() > 1 ? transposed_.find(n.input(1)) : transposed_.end();
  if (t == transposed_.end()) {
    auto b = values_.find(n.input_size() > 1 ? n.input(1) : "");
    if (b == values_.end()) {
      return Bad(absl::StrCat(
          NodeName(n),
          ": a MatMul by a weight is imported as a torch Linear's (the "
          "weight transposed, x @ W.T); this one multiplies by \"",
          n.input_size() > 1 ? n.input(1) : "", "\""));
    }
    const Shape& x = a.shape;
    const Shape& y = b->second.shape;
    if (x.size() < 2 || y.size() < 2 || x.back() != y[y.size() - 2] ||
        b->second.channels_last) {
      return Bad(absl::StrCat(NodeName(n), ": a MatMul of ", ShapeToString(x),
                              " and ", ShapeToString(y),
                              " per sample (each needs 2 axes or more, the "
                              "first's last the second's next to last)"));
    }
    // The leading axes broadcast as numpy's.
    std::optional<Shape> lead = onnx_ops::Broadcast(
        Shape(x.begin(), x.end() - 2), Shape(y.begin(), y.end() - 2));
    if (!lead) {
      return Bad(absl::StrCat(NodeName(n), ": a MatMul of ", ShapeToString(x),
                              " and ", ShapeToString(y),
                              ": leading axes do not broadcast"));
    }
    Shape out = *lead;
    out.push_back(x[x.size() - 2]);
    out.push_back(y.back());
    AddLayer("onnx_matmul",
             UniqueName(LayerName(n.name().empty() ? n.output(0) : n.name())),
             {a.node, b->second.node}, Json::object(), n.output(0), out, false);
    return absl::OkStatus();
  }
  // x @ W.T (+ b): a torch Linear, the dense layer.
  const onnx::TensorProto& w = *t->second;
  const int64_t units = w.dims(0), in = w.dims(1);
  if (a.shape.empty() || a.shape.back() != in) {
    return Bad(absl::StrCat(NodeName(n), ": weight \"", w.name(), "\" ",
                            ShapeToString({units, in}), " does not take ",
                            ShapeToString(a.shape)));
  }
  const onnx::TensorProto* bias = nullptr;
  const onnx::NodeProto* add = nullptr;
  auto readers = consumers_.find(n.output(0));
  if (uses_[n.output(0)] == 1 && readers != consumers_.end() &&
      readers->second.size() == 1 && readers->second[0]->op_type() == "Add") {
    add = readers->second[0];
    const int other = add->input(0) == n.output(0) ? 1 : 0;
    auto b = inits_.find(add->input(other));
    if (b != inits_.end() && b->second->dims_size() == 1 &&
        b->second->dims(0) == units && !owner_.count(b->first) &&
        b->second->data_type() == onnx::TensorProto::FLOAT) {
      bias = b->second;
    } else {
      add = nullptr;
    }
  }
  Json fields = Json::object();
  fields["units"] = units;
  fields["use_bias"] = bias != nullptr;
  fields["activation"] = "linear";
  std::string name;
  auto tied = owner_.find(w.name());
  if (tied == owner_.end()) {
    ASSIGN_OR_RETURN(name, Prefix(n, w.name(), "weight"));
    if (bias != nullptr && bias->name() != name + ".bias") {
      return Bad(absl::StrCat(NodeName(n), ": its bias \"", bias->name(),
                              "\" should be named \"", name, ".bias\""));
    }
    RETURN_IF_ERROR(UseParam(n, w, {units, in}));
  } else {
    // The weight of an earlier layer (a decoder tied to the word
    // embeddings): a dense layer that reads that layer's table.
    auto owner = layer_index_.find(tied->second);
    if (owner == layer_index_.end() ||
        layers_[owner->second]["type"] != "embedding") {
      return Bad(absl::StrCat(NodeName(n), ": weight \"", w.name(),
                              "\" is tied to \"", tied->second,
                              "\", which is no embedding"));
    }
    fields["tied_to"] = tied->second;
    if (bias != nullptr) {
      ASSIGN_OR_RETURN(name, Prefix(n, bias->name(), "bias"));
    } else {
      name = LayerName(n.name().empty() ? n.output(0) : n.name());
    }
  }
  if (!names_.insert(name).second) {
    return Bad(absl::StrCat(NodeName(n), ": the name \"", name,
                            "\" is taken by another node"));
  }
  if (bias != nullptr) RETURN_IF_ERROR(UseParam(n, *bias, {units}));
  if (bias != nullptr) owner_[bias->name()] = name;
  if (tied == owner_.end()) owner_[w.name()] = name;
  Shape out = a.shape;
  out.back() = units;
  const std::string produced = add != nullptr ? add->output(0) : n.output(0);
  if (add != nullptr) fused_.insert(produced);
  AddLayer("dense", name, {a.node}, fields, produced, out, false);
  return absl::OkStatus();
}

const onnx::NodeProto* Importer::SoleReader(const onnx::NodeProto& n) const {
  auto it = consumers_.find(n.output(0));
  auto uses = uses_.find(n.output(0));
  if (it == consumers_.end() || it->second.size() != 1 || uses == uses_.end() ||
      uses->second != 1) {
    return nullptr;
  }
  return it->second[0];
}

absl::StatusOr<bool> Importer::Gelu(const onnx::NodeProto& div) {
  auto x = values_.find(div.input(0));
  if (x == values_.end() || x->second.channels_last) return false;
  // A scalar constant input of node m other than `of`, or NaN.
  auto scalar = [this](const onnx::NodeProto& m, const std::string& of) {
    for (int i = 0; i < m.input_size() && i < 2; ++i) {
      if (m.input(i) == of) continue;
      const Folded* f = FoldedIn(m, i);
      if (f != nullptr && f->v.size() == 1) return f->v[0];
    }
    return std::nan("");
  };
  if (div.input_size() < 2 ||
      std::fabs(scalar(div, div.input(0)) - std::sqrt(2.0)) > 1e-6) {
    return false;
  }
  const onnx::NodeProto* erf = SoleReader(div);
  if (erf == nullptr || erf->op_type() != "Erf") return false;
  const onnx::NodeProto* add = SoleReader(*erf);
  if (add == nullptr || add->op_type() != "Add" ||
      scalar(*add, erf->output(0)) != 1.0) {
    return false;
  }
  const onnx::NodeProto* mul = SoleReader(*add);
  if (mul == nullptr || mul->op_type() != "Mul" || mul->input_size() != 2 ||
      !((mul->input(0) == div.input(0) && mul->input(1) == add->output(0)) ||
        (mul->input(1) == div.input(0) && mul->input(0) == add->output(0)))) {
    return false;
  }
  const onnx::NodeProto* half = SoleReader(*mul);
  if (half == nullptr || half->op_type() != "Mul" ||
      scalar(*half, mul->output(0)) != 0.5) {
    return false;
  }
  for (const onnx::NodeProto* m : {erf, add, mul, half}) {
    fused_.insert(m->output(0));
  }
  const std::string out = half->output(0);
  auto at = layer_index_.find(x->second.node);
  if (at != layer_index_.end() && uses_[div.input(0)] == 2) {
    Json& producer = layers_[at->second];
    if (producer["type"] == "dense" && producer["activation"] == "linear") {
      producer["activation"] = "gelu";
      values_[out] = x->second;
      return true;
    }
  }
  AddLayer("gelu", UniqueName(LayerName(div.name().empty() ? out : div.name())),
           {x->second.node}, Json::object(), out, x->second.shape, false);
  return true;
}

}  // namespace onnx_internal
}  // namespace lockstep
