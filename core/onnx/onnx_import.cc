// ONNX -> lockstep layers (see the header).
#include "core/onnx/onnx_import.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/file_util.h"
#include "base/status_macros.h"
#include "core/layers/registry.h"
#include "core/onnx/onnx_fold.h"
#include "core/onnx/onnx_importer.h"
#include "core/onnx/ops/op_util.h"
#include "onnx/checker.h"
#include "onnx/onnx_pb.h"
#include "onnx/shape_inference/implementation.h"

namespace lockstep {
namespace onnx_internal {
namespace {

constexpr const char* kSupported[] = {
    "Abs",
    "Add",
    "AveragePool",
    "BatchNormalization",
    "Cast",
    "Clip",
    "Concat",
    "Constant",
    "ConstantOfShape",
    "Conv",
    "Div",
    "Dropout",
    "Equal",
    "Erf",
    "Exp",
    "Expand",
    "Flatten",
    "Gather",
    "GatherElements",
    "Gemm",
    "GlobalAveragePool",
    "Greater",
    "GreaterOrEqual",
    "HardSigmoid",
    "HardSwish",
    "Identity",
    "LayerNormalization",
    "Less",
    "LessOrEqual",
    "Log",
    "LogSoftmax",
    "MatMul",
    "MaxPool",
    "Mul",
    "Neg",
    "Not",
    "Pad",
    "Pow",
    "Range",
    "ReduceMean",
    "ReduceSum",
    "Reciprocal",
    "Relu",
    "Reshape",
    "Shape",
    "Sigmoid",
    "Slice",
    "Softmax",
    "Split",
    "Sqrt",
    "Squeeze",
    "Sub",
    "Tanh",
    "Transpose",
    "Trilu",
    "Unsqueeze",
    "Where",
};

// What libonnx's checker leaves to shape inference, which divides by it or
// indexes with it unchecked: a node of an op imported here must not have
// strides, kernel sizes, dilations or groups below 1, negative pads, or
// more of them than its 2 spatial axes. Run before the checker.
// A tensor's per-sample shape within kMaxOnnxSampleValues, its sizes at
// least 0; the error names it as `what` ("tensor \"x\"").
absl::Status CheckSampleShape(const std::string& what, const Shape& shape) {
  absl::Status s = BoundedCount(shape, kMaxOnnxSampleValues,
                                absl::StrCat(what, ", ", ShapeToString(shape),
                                             " per sample,"))
                       .status();
  return s.ok() ? s : Bad(s.message());
}

absl::Status CheckSpatialAttributes(const onnx::NodeProto& n) {
  for (const auto& a : n.attribute()) {
    const std::string& name = a.name();
    const bool pads = name == "pads";
    if (pads || name == "strides" || name == "kernel_shape" ||
        name == "dilations") {
      const int want = pads ? 4 : 2;
      if (a.ints_size() != want) {
        // One value per spatial axis (two for pads): Conv1d's 1, Conv3d's 3.
        const int per_axis = pads ? 2 : 1;
        if (a.ints_size() > 0 && a.ints_size() % per_axis == 0) {
          return Bad(absl::StrCat(
              NodeName(n), ": a ", a.ints_size() / per_axis, "-D ", n.op_type(),
              " (its ", name, " has ", a.ints_size(),
              " values); only 2-D convolutions and pools are imported "
              "(Conv2d, MaxPool2d, AvgPool2d: a 1-D one can be exported as "
              "2-D with a height of 1)"));
        }
        return Bad(absl::StrCat(NodeName(n), ": ", name, " has ", a.ints_size(),
                                " values (", want, " for a 2-D op)"));
      }
      for (int64_t v : a.ints()) {
        if (v < (pads ? 0 : 1) || v > kMaxSpatialValue) {
          return Bad(
              absl::StrCat(NodeName(n), ": ", name, " holds ", v,
                           pads ? " (pads are 0 to " : " (it must be 1 to ",
                           kMaxSpatialValue, ")"));
        }
      }
    }
    if (name == "group" && (a.i() < 1 || a.i() > kMaxSpatialValue)) {
      return Bad(absl::StrCat(NodeName(n), ": group ", a.i(),
                              " (it must be 1 to ", kMaxSpatialValue, ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::string SupportedOps() { return absl::StrJoin(kSupported, ", "); }

bool IsSupported(const std::string& op) {
  return std::any_of(std::begin(kSupported), std::end(kSupported),
                     [&op](const char* s) { return op == s; });
}

absl::Status Bad(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("model.onnx: ", what));
}

std::string NodeName(const onnx::NodeProto& n) {
  const std::string name = !n.name().empty()     ? n.name()
                           : n.output_size() > 0 ? n.output(0)
                                                 : std::string("(unnamed)");
  return absl::StrCat("node \"", name, "\" (", n.op_type(), ")");
}

std::string LayerName(const std::string& onnx_name) {
  std::string out;
  for (char c : onnx_name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                    (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
    out.push_back(ok ? c : '_');
  }
  while (!out.empty() && (out[0] == '_' || out[0] == '.')) out.erase(0, 1);
  if (out.size() > 56) out = out.substr(out.size() - 56);
  if (out.empty() || out == "." || out == "..") out = "node";
  return out;
}

int64_t Importer::IntAttr(const onnx::NodeProto& n, const char* name,
                          int64_t fallback) {
  for (const auto& a : n.attribute()) {
    if (a.name() == name) return a.i();
  }
  return fallback;
}

float Importer::FloatAttr(const onnx::NodeProto& n, const char* name,
                          float fallback) {
  for (const auto& a : n.attribute()) {
    if (a.name() == name) return a.f();
  }
  return fallback;
}

std::vector<int64_t> Importer::IntsAttr(const onnx::NodeProto& n,
                                        const char* name,
                                        std::vector<int64_t> fallback) {
  for (const auto& a : n.attribute()) {
    if (a.name() == name) return {a.ints().begin(), a.ints().end()};
  }
  return fallback;
}

std::string Importer::StringAttr(const onnx::NodeProto& n, const char* name) {
  for (const auto& a : n.attribute()) {
    if (a.name() == name) return a.s();
  }
  return "";
}

absl::Status Importer::CheckOpsets() {
  int64_t opset = -1;
  for (const auto& o : model_.opset_import()) {
    if (o.domain().empty() || o.domain() == "ai.onnx") opset = o.version();
  }
  if (opset < kMinOnnxOpset || opset > kMaxOnnxOpset) {
    return Bad(absl::StrCat(
        "\"", path_, "\" uses opset ", opset, " of the default domain; ",
        "opsets ", kMinOnnxOpset, " to ", kMaxOnnxOpset,
        " are read (export with torch.onnx.export(..., opset_version=17))"));
  }
  return absl::OkStatus();
}

absl::Status Importer::Index() {
  for (const auto& t : graph_.initializer()) {
    if (t.data_location() == onnx::TensorProto::EXTERNAL) {
      return Bad(absl::StrCat(
          "initializer \"", t.name(),
          "\" keeps its data in an external file; export the model with its "
          "weights inside (torch.onnx.export without "
          "use_external_data_format)"));
    }
    inits_[t.name()] = &t;
  }
  for (const auto& v : graph_.input()) infos_[v.name()] = &v;
  for (const auto& v : graph_.value_info()) infos_[v.name()] = &v;
  for (const auto& v : graph_.output()) infos_[v.name()] = &v;
  for (const auto& n : graph_.node()) {
    for (const auto& i : n.input()) {
      if (!i.empty()) {
        ++uses_[i];
        consumers_[i].push_back(&n);
      }
    }
  }
  for (const auto& o : graph_.output()) ++uses_[o.name()];
  return absl::OkStatus();
}

absl::StatusOr<std::string> Importer::PickInput(const std::string& wanted) {
  std::vector<std::string> inputs;
  for (const auto& v : graph_.input()) {
    if (!inits_.count(v.name())) inputs.push_back(v.name());
  }
  if (!wanted.empty()) {
    if (std::find(inputs.begin(), inputs.end(), wanted) != inputs.end()) {
      return wanted;
    }
    return Bad(absl::StrCat("model.input \"", wanted,
                            "\" is not an input of "
                            "the graph; its inputs: ",
                            absl::StrJoin(inputs, ", ")));
  }
  if (inputs.size() != 1) {
    return Bad(absl::StrCat(
        "the graph has ", inputs.size(), " inputs (",
        absl::StrJoin(inputs, ", "),
        "); list those the data feeds in model.input, each fed by the data "
        "field of its name: [\"",
        absl::StrJoin(inputs, "\", \""), "\"]"));
  }
  return inputs[0];
}

absl::StatusOr<std::string> Importer::PickOutput(const std::string& wanted) {
  std::vector<std::string> outputs;
  for (const auto& v : graph_.output()) outputs.push_back(v.name());
  if (!wanted.empty()) {
    if (std::find(outputs.begin(), outputs.end(), wanted) != outputs.end()) {
      return wanted;
    }
    return Bad(absl::StrCat("model.output \"", wanted,
                            "\" is not an output of the graph; its outputs: ",
                            absl::StrJoin(outputs, ", ")));
  }
  if (outputs.size() != 1) {
    return Bad(absl::StrCat("the graph has ", outputs.size(), " outputs (",
                            absl::StrJoin(outputs, ", "),
                            "); say which the loss reads in model.output"));
  }
  return outputs[0];
}

absl::StatusOr<Shape> Importer::PerSample(const std::string& name) const {
  auto it = infos_.find(name);
  if (it == infos_.end() || !it->second->type().has_tensor_type() ||
      !it->second->type().tensor_type().has_shape()) {
    return Bad(absl::StrCat("tensor \"", name,
                            "\" has no shape after shape inference"));
  }
  const auto& dims = it->second->type().tensor_type().shape().dim();
  if (dims.empty()) {
    return Bad(absl::StrCat("tensor \"", name, "\" is a scalar, not a batch"));
  }
  Shape s;
  for (int i = 1; i < dims.size(); ++i) {
    if (!dims[i].has_dim_value() || dims[i].dim_value() <= 0) {
      return Bad(absl::StrCat(
          "tensor \"", name, "\" has a dimension (", i,
          ") that is not a fixed size; only the batch dimension may vary"));
    }
    s.push_back(dims[i].dim_value());
  }
  RETURN_IF_ERROR(CheckSampleShape(absl::StrCat("tensor \"", name, "\""), s));
  return s;
}

absl::StatusOr<Value> Importer::In(const onnx::NodeProto& n, int i) const {
  if (i >= n.input_size() || n.input(i).empty()) {
    return Bad(absl::StrCat(NodeName(n), ": input ", i, " is missing"));
  }
  auto it = values_.find(n.input(i));
  if (it == values_.end()) {
    return Bad(
        absl::StrCat(NodeName(n), ": input \"", n.input(i), "\" is ",
                     inits_.count(n.input(i)) || folded_.count(n.input(i))
                         ? "a constant where this op takes a batch of values"
                         : "not made by an earlier node"));
  }
  return it->second;
}

const onnx::TensorProto* Importer::Init(const onnx::NodeProto& n, int i) const {
  if (i >= n.input_size() || n.input(i).empty()) return nullptr;
  auto it = inits_.find(n.input(i));
  return it == inits_.end() ? nullptr : it->second;
}

absl::StatusOr<double> Importer::Scalar(const onnx::NodeProto& n, int i,
                                        double fallback) const {
  if (i >= n.input_size() || n.input(i).empty()) return fallback;
  const Folded* c = FoldedIn(n, i);
  if (c != nullptr && c->v.size() == 1 && c->v[0] != kBatchSize) {
    return c->v[0];
  }
  return Bad(absl::StrCat(NodeName(n), ": input ", i, " (\"", n.input(i),
                          "\") must be a constant of one value"));
}

absl::StatusOr<std::string> Importer::Prefix(const onnx::NodeProto& n,
                                             const std::string& name,
                                             const std::string& suffix) const {
  const std::string end = "." + suffix;
  if (!absl::EndsWith(name, end) || name.size() == end.size()) {
    return Bad(absl::StrCat(
        NodeName(n), ": its parameter \"", name,
        "\" is not named like a torch parameter (PREFIX", end,
        "); export with lockstep.export(module, example, path), or "
        "torch.onnx.export(..., training=torch.onnx.TrainingMode.TRAINING, "
        "do_constant_folding=False), so parameters keep their state-dict "
        "names"));
  }
  const std::string prefix = name.substr(0, name.size() - end.size());
  if (prefix != LayerName(prefix)) {
    return Bad(absl::StrCat(NodeName(n), ": parameter prefix \"", prefix,
                            "\" is not a layer name ([A-Za-z0-9_.-], at most "
                            "56 characters)"));
  }
  return prefix;
}

absl::Status Importer::UseParam(const onnx::NodeProto& n,
                                const onnx::TensorProto& t, const Shape& want) {
  if (t.data_type() != onnx::TensorProto::FLOAT) {
    return Bad(absl::StrCat(
        NodeName(n), ": parameter \"", t.name(), "\" is not float32 (it is ",
        onnx::TensorProto_DataType_IsValid(t.data_type())
            ? onnx::TensorProto_DataType_Name(
                  static_cast<onnx::TensorProto_DataType>(t.data_type()))
            : absl::StrCat("type ", t.data_type()),
        "); export the model in float32"));
  }
  Shape shape(t.dims().begin(), t.dims().end());
  if (shape != want) {
    return Bad(absl::StrCat(NodeName(n), ": parameter \"", t.name(), "\" is ",
                            ShapeToString(shape), ", expected ",
                            ShapeToString(want)));
  }
  if (!params_.insert(t.name()).second || owner_.count(t.name())) {
    return Bad(absl::StrCat(NodeName(n), ": parameter \"", t.name(),
                            "\" is used by two nodes: a module applied "
                            "twice (one Linear or Conv on two inputs) is not "
                            "imported; weights are shared only between an "
                            "embedding and its output Linear, and by "
                            "element-wise ops"));
  }
  const int64_t count = NumElements(shape);
  Tensor value(shape);
  if (!t.raw_data().empty()) {
    if (static_cast<int64_t>(t.raw_data().size()) != count * 4) {
      return Bad(absl::StrCat("initializer \"", t.name(), "\" holds ",
                              t.raw_data().size(), " bytes for ",
                              ShapeToString(shape), " float32 values"));
    }
    std::memcpy(value.data(), t.raw_data().data(), count * 4);
  } else if (t.float_data_size() == count) {
    std::copy(t.float_data().begin(), t.float_data().end(), value.data());
  } else {
    return Bad(absl::StrCat("initializer \"", t.name(), "\" holds ",
                            t.float_data_size(), " values for ",
                            ShapeToString(shape)));
  }
  initial_.emplace_back(t.name(), std::move(value));
  return absl::OkStatus();
}

std::string Importer::UniqueName(const std::string& base) {
  std::string name = base;
  for (int i = 1; names_.count(name); ++i) name = absl::StrCat(base, "_", i);
  names_.insert(name);
  return name;
}

void Importer::AddLayer(const std::string& type, const std::string& name,
                        const std::vector<std::string>& inputs, Json fields,
                        const std::string& out, Shape shape,
                        bool channels_last) {
  Json j = Json::object();
  j["type"] = type;
  j["name"] = name;
  j["inputs"] = inputs;
  for (auto it = fields.begin(); it != fields.end(); ++it) {
    j[it.key()] = it.value();
  }
  layer_index_[name] = layers_.size();
  layers_.push_back(std::move(j));
  values_[out] = Value{name, std::move(shape), channels_last};
}

absl::Status Importer::OnlyUsed(const onnx::NodeProto& n,
                                int from_output) const {
  for (int i = from_output; i < n.output_size(); ++i) {
    auto it = uses_.find(n.output(i));
    if (!n.output(i).empty() && it != uses_.end() && it->second > 0) {
      return Bad(absl::StrCat(NodeName(n), ": its output ", i, " (\"",
                              n.output(i),
                              "\") is used, which is not imported yet"));
    }
  }
  return absl::OkStatus();
}

const Folded* Importer::FoldedIn(const onnx::NodeProto& n, int i) const {
  if (i >= n.input_size() || n.input(i).empty()) return nullptr;
  auto it = folded_.find(n.input(i));
  return it == folded_.end() ? nullptr : &it->second;
}

absl::StatusOr<const Folded*> Importer::IntsIn(const onnx::NodeProto& n,
                                               int i) const {
  const Folded* f = FoldedIn(n, i);
  if (f == nullptr) return f;
  for (double v : f->v) {
    if (!IsFoldedInt(v)) {
      return Bad(absl::StrCat(NodeName(n), ": input ", i, " (\"", n.input(i),
                              "\") must hold integers; it holds ", v));
    }
  }
  return f;
}

absl::StatusOr<Json> Importer::ParamRef(const onnx::NodeProto& n,
                                        const onnx::TensorProto& t,
                                        const std::string& layer) {
  Json ref = Json::object();
  ref["param"] = t.name();
  ref["shape"] = std::vector<int64_t>(t.dims().begin(), t.dims().end());
  auto owned = owner_.find(t.name());
  if (owned != owner_.end()) {
    ref["owner"] = owned->second;
    return ref;
  }
  RETURN_IF_ERROR(UseParam(n, t, Shape(t.dims().begin(), t.dims().end())));
  owner_[t.name()] = layer;
  return ref;
}

absl::StatusOr<OnnxImport> Importer::Run(
    const std::string& input, const std::string& output,
    const std::vector<std::string>& named) {
  RETURN_IF_ERROR(CheckOpsets());
  // Before the checker, whose message about a branch would say less.
  for (const auto& n : graph_.node()) {
    for (const auto& a : n.attribute()) {
      if (a.has_g() || a.graphs_size() > 0) {
        return Bad(absl::StrCat(NodeName(n),
                                ": a subgraph (control flow) cannot be "
                                "trained here; export a graph without Loop, "
                                "If or Scan"));
      }
    }
  }
  // Only the ops imported here reach libonnx's shape inference, with
  // attributes it can take.
  for (const auto& n : graph_.node()) {
    const bool known = (n.domain().empty() || n.domain() == "ai.onnx") &&
                       IsSupported(n.op_type());
    if (!known) {
      return Bad(absl::StrCat(
          NodeName(n), ": op ",
          n.domain().empty() ? "" : absl::StrCat(n.domain(), "."), n.op_type(),
          " is not supported yet; supported: ", SupportedOps()));
    }
    RETURN_IF_ERROR(CheckSpatialAttributes(n));
  }
  try {
    onnx::checker::check_model(model_);
  } catch (const std::exception& e) {
    return Bad(
        absl::StrCat("\"", path_, "\" fails ONNX's checker: ", e.what()));
  }
  try {
    onnx::shape_inference::InferShapes(model_);
  } catch (const std::exception& e) {
    return Bad(
        absl::StrCat("\"", path_, "\": ONNX's shape inference: ", e.what()));
  }
  RETURN_IF_ERROR(Index());
  ASSIGN_OR_RETURN(const std::string out, PickOutput(output));
  // Float scalars (a dropout ratio, clip bounds) and integer tensors are
  // constants; float tensors are the parameters and buffers.
  for (const auto& [name, t] : inits_) {
    if (t->data_type() != onnx::TensorProto::FLOAT || t->dims_size() == 0) {
      absl::StatusOr<Folded> f = FoldTensor(*t);
      if (!f.ok()) return Bad(std::string(f.status().message()));
      folded_[name] = *std::move(f);
    }
  }
  OnnxImport result;
  std::vector<std::string> feeds = named;
  std::vector<std::string> graph_inputs;
  for (const auto& v : graph_.input()) {
    if (!inits_.count(v.name())) graph_inputs.push_back(v.name());
  }
  for (const std::string& in : named) {
    if (std::find(graph_inputs.begin(), graph_inputs.end(), in) ==
        graph_inputs.end()) {
      return Bad(absl::StrCat("model.input \"", in,
                              "\" is not an input of the graph; its inputs: ",
                              absl::StrJoin(graph_inputs, ", ")));
    }
  }
  if (feeds.empty()) {
    ASSIGN_OR_RETURN(std::string in, PickInput(input));
    feeds.push_back(in);
  }
  for (const std::string& in : feeds) {
    ASSIGN_OR_RETURN(Shape in_shape, PerSample(in));
    // One input is the data's field "input"; named ones are fed by the
    // data fields of their names.
    const std::string node = named.empty() ? "input" : in;
    if (!named.empty() && LayerName(in) != in) {
      return Bad(
          absl::StrCat("graph input \"", in,
                       "\" is not a data field's name ([A-Za-z0-9_.-])"));
    }
    ModelInput model_input{node, in_shape};
    const bool image = in_shape.size() == 3 && feeds.size() == 1;
    if (image) {
      // The data decodes images channels-last: [C, H, W] arrives [H, W, C].
      model_input.shape = {in_shape[1], in_shape[2], in_shape[0]};
    }
    names_.insert(node);
    values_[in] = Value{node, in_shape, image};
    model_inputs_.push_back(node);
    result.model.inputs.push_back(model_input);
  }
  // Constant nodes' values are known before the nodes run, so a pattern
  // seen from its first node (a GELU) can read the constants after it.
  for (const onnx::NodeProto& n : graph_.node()) {
    if (n.op_type() != "Constant" || n.output_size() != 1) continue;
    for (const auto& a : n.attribute()) {
      if (a.name() != "value") continue;
      absl::StatusOr<Folded> f = FoldTensor(a.t());
      if (f.ok()) folded_[n.output(0)] = *std::move(f);
    }
  }
  for (const onnx::NodeProto& n : graph_.node()) {
    RETURN_IF_ERROR(Node(n));
    for (const std::string& o : n.output()) {
      auto v = values_.find(o);
      if (v == values_.end()) continue;
      RETURN_IF_ERROR(CheckSampleShape(
          absl::StrCat(NodeName(n), ": its output \"", o, "\""),
          v->second.shape));
    }
    ++result.nodes;
  }
  auto last = values_.find(out);
  if (last == values_.end() || last->second.node == "input" ||
      layers_.empty()) {
    return Bad(absl::StrCat("the output \"", out, "\" is not made by a layer"));
  }
  if (layers_.back()["name"] != last->second.node) {
    return Bad(absl::StrCat("the output \"", out, "\" is made by \"",
                            last->second.node,
                            "\", which is not the graph's last node; nodes "
                            "after it are not imported yet"));
  }
  if (last->second.shape.empty() || last->second.channels_last) {
    return Bad(absl::StrCat("the output \"", out, "\" is ",
                            ShapeToString(last->second.shape),
                            " per sample; the loss reads logits along its "
                            "last axis"));
  }
  result.model.param_names = ParamNaming::kTorch;
  for (size_t i = 0; i < layers_.size(); ++i) {
    const LayerTypeInfo* info =
        FindLayerType(layers_[i]["type"].get<std::string>());
    if (info != nullptr && info->internal) {
      // An op-level node: its config is what the importer wrote.
      LayerSpec layer;
      Json config = layers_[i];
      layer.type = config["type"].get<std::string>();
      layer.name = config["name"].get<std::string>();
      layer.inputs = config["inputs"].get<std::vector<std::string>>();
      config.erase("type");
      config.erase("name");
      config.erase("inputs");
      layer.config = config.dump();
      result.model.layers.push_back(std::move(layer));
      continue;
    }
    LayerSpec layer;
    RETURN_IF_ERROR(
        ParseLayerSpec(layers_[i],
                       absl::StrCat("model.onnx layer ",
                                    layers_[i]["name"].get<std::string>()),
                       &layer));
    result.model.layers.push_back(std::move(layer));
  }
  result.initial = std::move(initial_);
  return result;
}

}  // namespace onnx_internal

using onnx_internal::Bad;
using onnx_internal::Importer;

absl::StatusOr<OnnxImport> ImportOnnx(const std::string& path,
                                      const std::string& input,
                                      const std::string& output,
                                      const std::vector<std::string>& named) {
  auto fail = [&path](int err) {
    const std::string msg =
        absl::StrCat("model.onnx: cannot read \"", path, "\": ", strerror(err));
    return err == ENOENT ? absl::NotFoundError(msg)
                         : absl::InvalidArgumentError(msg);
  };
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return fail(errno);
  if (st.st_size > kMaxOnnxFileBytes) {
    return Bad(absl::StrCat("\"", path, "\" is ", st.st_size,
                            " bytes, over the 2 GiB a protobuf may hold"));
  }
  ASSIGN_OR_RETURN(std::string bytes, ReadFile(path, fail, fail));
  onnx::ModelProto model;
  if (bytes.empty() || !model.ParseFromString(bytes) || !model.has_graph()) {
    return Bad(absl::StrCat("\"", path, "\" is not an ONNX model (",
                            bytes.size(),
                            " bytes that do not parse as a ModelProto with a "
                            "graph; truncated?)"));
  }
  Importer importer(model, path);
  return importer.Run(input, output, named);
}

std::vector<std::string> OnnxFeeds(const ModelSpec& model) {
  std::vector<std::string> names;
  if (model.inputs.size() == 1 && model.inputs[0].name == "input") {
    return names;
  }
  for (const ModelInput& in : model.inputs) names.push_back(in.name);
  return names;
}

absl::StatusOr<OnnxImport> ImportOnnxModel(const ModelSpec& model) {
  ASSIGN_OR_RETURN(OnnxImport imported,
                   ImportOnnx(model.onnx_path, model.onnx_input,
                              model.onnx_output, OnnxFeeds(model)));
  if (model.inputs.size() == imported.model.inputs.size() &&
      model.inputs.size() > 1) {
    // Named inputs: each data field's shape against its graph input's.
    for (size_t i = 0; i < model.inputs.size(); ++i) {
      const Shape& data = model.inputs[i].shape;
      const Shape& graph = imported.model.inputs[i].shape;
      if (!data.empty() && data != graph) {
        return absl::InvalidArgumentError(absl::StrCat(
            "model.onnx: \"", model.onnx_path, "\" input \"",
            model.inputs[i].name, "\" is ", ShapeToString(graph),
            " per sample but the data's field is ", ShapeToString(data),
            " (export the model with an example of the data's shape, e.g. "
            "its sequence_length)"));
      }
    }
    return imported;
  }
  const Shape data = model.single_input_shape();
  const Shape graph = imported.model.single_input_shape();
  if (!data.empty() && NumElements(data) != NumElements(graph)) {
    return absl::InvalidArgumentError(
        absl::StrCat("model.onnx: \"", model.onnx_path, "\" takes ",
                     ShapeToString(graph), " per sample (", NumElements(graph),
                     " values, channels last) but a data sample is ",
                     ShapeToString(data), " (", NumElements(data), " values)"));
  }
  return imported;
}

}  // namespace lockstep
