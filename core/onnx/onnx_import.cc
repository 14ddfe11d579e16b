// ONNX -> lockstep layers (see the header).
#include "core/onnx/onnx_import.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/file_util.h"
#include "base/status_macros.h"
#include "core/layers/registry.h"
#include "onnx/checker.h"
#include "onnx/onnx_pb.h"
#include "onnx/shape_inference/implementation.h"

namespace lockstep {
namespace {

using Json = spec_reader::Json;

// The ops a node may have here, for the refusal of any other.
constexpr const char* kSupported[] = {"Add",
                                      "BatchNormalization",
                                      "Clip",
                                      "Constant",
                                      "Conv",
                                      "Dropout",
                                      "Flatten",
                                      "Gemm",
                                      "GlobalAveragePool",
                                      "Identity",
                                      "MaxPool",
                                      "Relu",
                                      "Sigmoid",
                                      "Softmax",
                                      "Tanh"};

// An ONNX tensor as the layers hold it.
struct Value {
  std::string node;  // the lockstep node that makes it: "input" or a layer
  Shape shape;       // per sample, the graph's logical shape (no batch)
  // A logical [C, H, W] held as [H, W, C] (the data's and the layers'
  // layout for feature maps).
  bool channels_last = false;
};

absl::Status Bad(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("model.onnx: ", what));
}

std::string NodeName(const onnx::NodeProto& n) {
  const std::string name = !n.name().empty()     ? n.name()
                           : n.output_size() > 0 ? n.output(0)
                                                 : std::string("(unnamed)");
  return absl::StrCat("node \"", name, "\" (", n.op_type(), ")");
}

// What libonnx's checker leaves to shape inference, which divides by it or
// indexes with it unchecked: a node of an op imported here must not have
// strides, kernel sizes, dilations or groups below 1, negative pads, or
// more of them than its 2 spatial axes. Run before the checker.
absl::Status CheckSpatialAttributes(const onnx::NodeProto& n) {
  for (const auto& a : n.attribute()) {
    const std::string& name = a.name();
    const bool pads = name == "pads";
    if (pads || name == "strides" || name == "kernel_shape" ||
        name == "dilations") {
      const int want = pads ? 4 : 2;
      if (a.ints_size() != want) {
        return Bad(absl::StrCat(NodeName(n), ": ", name, " has ", a.ints_size(),
                                " values (", want, " for a 2-D op)"));
      }
      for (int64_t v : a.ints()) {
        if (v < (pads ? 0 : 1) || v > (int64_t{1} << 20)) {
          return Bad(absl::StrCat(
              NodeName(n), ": ", name, " holds ", v,
              pads ? " (pads are 0 or more)" : " (it must be 1 or more)"));
        }
      }
    }
    if (name == "group" && (a.i() < 1 || a.i() > (int64_t{1} << 20))) {
      return Bad(absl::StrCat(NodeName(n), ": group ", a.i(),
                              " (it must be 1 or more)"));
    }
  }
  return absl::OkStatus();
}

// A layer name from an ONNX name: [A-Za-z0-9_.-], at most 64 characters.
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

class Importer {
 public:
  Importer(onnx::ModelProto& model, std::string path)
      : model_(model), graph_(*model.mutable_graph()), path_(std::move(path)) {}

  absl::StatusOr<OnnxImport> Run(const std::string& input,
                                 const std::string& output);

 private:
  absl::Status CheckOpsets();
  absl::Status Index();
  absl::StatusOr<std::string> PickInput(const std::string& wanted);
  absl::StatusOr<std::string> PickOutput(const std::string& wanted);
  absl::StatusOr<Shape> PerSample(const std::string& name) const;
  absl::Status Node(const onnx::NodeProto& n);

  // The node's input i as a value (an activation), or an error.
  absl::StatusOr<Value> In(const onnx::NodeProto& n, int i) const;
  // The node's input i as an initializer, or null when it is not one.
  const onnx::TensorProto* Init(const onnx::NodeProto& n, int i) const;
  // A float constant (an initializer or a Constant node's) of one value.
  absl::StatusOr<double> Scalar(const onnx::NodeProto& n, int i,
                                double fallback) const;
  // The parameter prefix of a weight named "PREFIX.SUFFIX", or an error
  // telling how to export with names kept.
  absl::StatusOr<std::string> Prefix(const onnx::NodeProto& n,
                                     const std::string& name,
                                     const std::string& suffix) const;
  absl::Status UseParam(const onnx::NodeProto& n, const onnx::TensorProto& t,
                        const Shape& want);
  // Adds a layer (type, name, inputs, fields); its output is `out`.
  void AddLayer(const std::string& type, const std::string& name,
                const std::vector<std::string>& inputs, Json fields,
                const std::string& out, Shape shape, bool channels_last);
  std::string UniqueName(const std::string& base);
  // An activation node: fused into the layer that makes its input when
  // that one can take it, else a layer of its own.
  absl::Status Activation(const onnx::NodeProto& n, const char* activation);
  absl::Status OnlyUsed(const onnx::NodeProto& n, int from_output) const;
  static int64_t IntAttr(const onnx::NodeProto& n, const char* name,
                         int64_t fallback);
  static float FloatAttr(const onnx::NodeProto& n, const char* name,
                         float fallback);
  static std::vector<int64_t> IntsAttr(const onnx::NodeProto& n,
                                       const char* name,
                                       std::vector<int64_t> fallback);
  static std::string StringAttr(const onnx::NodeProto& n, const char* name);

  onnx::ModelProto& model_;
  onnx::GraphProto& graph_;
  const std::string path_;
  std::map<std::string, const onnx::TensorProto*> inits_;
  std::map<std::string, std::vector<double>> consts_;
  std::map<std::string, const onnx::ValueInfoProto*> infos_;
  std::map<std::string, int> uses_;
  std::map<std::string, Value> values_;
  std::vector<Json> layers_;
  std::map<std::string, size_t> layer_index_;  // layer name -> layers_
  std::set<std::string> names_;
  std::set<std::string> params_;
  std::vector<std::pair<std::string, Tensor>> initial_;
};

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
      if (!i.empty()) ++uses_[i];
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
    return Bad(absl::StrCat("the graph has ", inputs.size(), " inputs (",
                            absl::StrJoin(inputs, ", "),
                            "); say which the data feeds in model.input"));
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
                     inits_.count(n.input(i)) || consts_.count(n.input(i))
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
  auto c = consts_.find(n.input(i));
  if (c != consts_.end() && c->second.size() == 1) return c->second[0];
  const onnx::TensorProto* t = Init(n, i);
  if (t != nullptr) {
    auto v = consts_.find(t->name());
    if (v != consts_.end() && v->second.size() == 1) return v->second[0];
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
    return Bad(absl::StrCat(NodeName(n), ": parameter \"", t.name(),
                            "\" is not float32 (type ", t.data_type(),
                            "); export the model in float32"));
  }
  Shape shape(t.dims().begin(), t.dims().end());
  if (shape != want) {
    return Bad(absl::StrCat(NodeName(n), ": parameter \"", t.name(), "\" is ",
                            ShapeToString(shape), ", expected ",
                            ShapeToString(want)));
  }
  if (!params_.insert(t.name()).second) {
    return Bad(absl::StrCat(NodeName(n), ": parameter \"", t.name(),
                            "\" is used by two nodes (tied weights are not "
                            "imported yet)"));
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
  if (op == "Constant") {
    for (const auto& a : n.attribute()) {
      if (a.name() != "value") continue;
      const onnx::TensorProto& t = a.t();
      std::vector<double> v;
      if (t.data_type() == onnx::TensorProto::FLOAT) {
        if (!t.raw_data().empty()) {
          std::vector<float> f(t.raw_data().size() / 4);
          std::memcpy(f.data(), t.raw_data().data(), f.size() * 4);
          v.assign(f.begin(), f.end());
        } else {
          v.assign(t.float_data().begin(), t.float_data().end());
        }
      } else if (t.data_type() == onnx::TensorProto::INT64) {
        if (!t.raw_data().empty()) {
          std::vector<int64_t> f(t.raw_data().size() / 8);
          std::memcpy(f.data(), t.raw_data().data(), f.size() * 8);
          v.assign(f.begin(), f.end());
        } else {
          v.assign(t.int64_data().begin(), t.int64_data().end());
        }
      } else if (t.data_type() == onnx::TensorProto::BOOL) {
        for (char c : t.raw_data()) v.push_back(c != 0);
        for (int32_t b : t.int32_data()) v.push_back(b != 0);
      }
      consts_[n.output(0)] = std::move(v);
      return absl::OkStatus();
    }
    return Bad(absl::StrCat(NodeName(n),
                            ": only a \"value\" tensor constant "
                            "is imported"));
  }
  if (op == "Identity") {
    if (consts_.count(n.input(0))) {
      consts_[n.output(0)] = consts_[n.input(0)];
      return absl::OkStatus();
    }
    ASSIGN_OR_RETURN(Value x, In(n, 0));
    values_[n.output(0)] = x;
    return absl::OkStatus();
  }
  if (op == "Relu") return Activation(n, "relu");
  if (op == "Sigmoid") return Activation(n, "sigmoid");
  if (op == "Tanh") return Activation(n, "tanh");
  if (op == "Softmax") {
    ASSIGN_OR_RETURN(Value x, In(n, 0));
    const int64_t axis = IntAttr(n, "axis", -1);
    const int64_t rank = static_cast<int64_t>(x.shape.size()) + 1;
    if (axis != -1 && axis != rank - 1) {
      return Bad(absl::StrCat(NodeName(n), ": a softmax over axis ", axis,
                              " (only the last axis is imported)"));
    }
    return Activation(n, "softmax");
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
    for (int64_t d : IntsAttr(n, "dilations", {1, 1})) {
      if (d != 1) {
        return Bad(absl::StrCat(NodeName(n), ": dilation ", d,
                                " (only 1 is imported)"));
      }
    }
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
    ASSIGN_OR_RETURN(Shape out, PerSample(n.output(0)));
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
  if (op == "MaxPool") {
    ASSIGN_OR_RETURN(Value x, In(n, 0));
    RETURN_IF_ERROR(OnlyUsed(n, 1));
    const std::vector<int64_t> k = IntsAttr(n, "kernel_shape", {});
    const std::vector<int64_t> pads = IntsAttr(n, "pads", {0, 0, 0, 0});
    const std::string auto_pad = StringAttr(n, "auto_pad");
    if (!x.channels_last || x.shape.size() != 3 || k.size() != 2 ||
        IntAttr(n, "ceil_mode", 0) != 0 ||
        IntsAttr(n, "dilations", {1, 1}) != std::vector<int64_t>{1, 1} ||
        (!auto_pad.empty() && auto_pad != "NOTSET")) {
      return Bad(absl::StrCat(NodeName(n),
                              ": a 2-D max pool of a feature map without "
                              "dilation, ceil_mode or auto_pad is imported"));
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
    ASSIGN_OR_RETURN(Shape out, PerSample(n.output(0)));
    AddLayer("max_pool2d", UniqueName(base), {x.node}, fields, n.output(0), out,
             true);
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
    ASSIGN_OR_RETURN(Value a, In(n, 0));
    ASSIGN_OR_RETURN(Value b, In(n, 1));
    if (a.shape != b.shape || a.channels_last != b.channels_last) {
      return Bad(absl::StrCat(NodeName(n), ": an add of ",
                              ShapeToString(a.shape), " and ",
                              ShapeToString(b.shape),
                              " (only two batches of one shape are "
                              "imported)"));
    }
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
  return Bad(absl::StrCat(
      NodeName(n), ": op ", op,
      " is not supported yet; supported: ", absl::StrJoin(kSupported, ", ")));
}

absl::StatusOr<OnnxImport> Importer::Run(const std::string& input,
                                         const std::string& output) {
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
    const bool known =
        (n.domain().empty() || n.domain() == "ai.onnx") &&
        std::any_of(std::begin(kSupported), std::end(kSupported),
                    [&n](const char* op) { return n.op_type() == op; });
    if (!known) {
      return Bad(
          absl::StrCat(NodeName(n), ": op ",
                       n.domain().empty() ? "" : absl::StrCat(n.domain(), "."),
                       n.op_type(), " is not supported yet; supported: ",
                       absl::StrJoin(kSupported, ", ")));
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
  ASSIGN_OR_RETURN(const std::string in, PickInput(input));
  ASSIGN_OR_RETURN(const std::string out, PickOutput(output));
  ASSIGN_OR_RETURN(Shape in_shape, PerSample(in));
  // Small float initializers (a dropout ratio, clip bounds) are constants.
  for (const auto& [name, t] : inits_) {
    if (t->data_type() == onnx::TensorProto::FLOAT && t->dims_size() == 0) {
      float v = 0;
      if (t->raw_data().size() == 4) {
        std::memcpy(&v, t->raw_data().data(), 4);
      } else if (t->float_data_size() == 1) {
        v = t->float_data(0);
      }
      consts_[name] = {v};
    }
  }
  OnnxImport result;
  ModelInput model_input{"input", in_shape};
  const bool image = in_shape.size() == 3;
  if (image) {
    // The data decodes images channels-last: [C, H, W] arrives [H, W, C].
    model_input.shape = {in_shape[1], in_shape[2], in_shape[0]};
  }
  names_.insert("input");
  values_[in] = Value{"input", in_shape, image};
  for (const onnx::NodeProto& n : graph_.node()) {
    RETURN_IF_ERROR(Node(n));
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
  if (last->second.shape.size() != 1) {
    return Bad(absl::StrCat("the output \"", out, "\" is ",
                            ShapeToString(last->second.shape),
                            " per sample; the loss reads a vector of logits"));
  }
  result.model.inputs.push_back(model_input);
  result.model.param_names = ParamNaming::kTorch;
  for (size_t i = 0; i < layers_.size(); ++i) {
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

}  // namespace

absl::StatusOr<OnnxImport> ImportOnnx(const std::string& path,
                                      const std::string& input,
                                      const std::string& output) {
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
  return importer.Run(input, output);
}

absl::StatusOr<OnnxImport> ImportOnnxModel(const ModelSpec& model) {
  ASSIGN_OR_RETURN(
      OnnxImport imported,
      ImportOnnx(model.onnx_path, model.onnx_input, model.onnx_output));
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
