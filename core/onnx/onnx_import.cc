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
#include "core/onnx/ops/op_util.h"
#include "onnx/checker.h"
#include "onnx/onnx_pb.h"
#include "onnx/shape_inference/implementation.h"

namespace lockstep {
namespace {

using Json = spec_reader::Json;

// The ops a node may have here, for the refusal of any other.
// The ops a node may have here, for the refusal of any other.
constexpr const char* kSupported[] = {
    "Abs",
    "Add",
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
                                 const std::string& output,
                                 const std::vector<std::string>& named);

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
  // Op-level nodes (core/onnx/ops/): the ops no layer is.
  absl::Status OpNode(const onnx::NodeProto& n);
  // torch's exact GELU as exported, x * 0.5 * (1 + erf(x / sqrt 2)) in
  // five nodes from this Div: one gelu (fused into the dense layer before
  // it when that one has no other reader). False when n does not start
  // that pattern.
  absl::StatusOr<bool> Gelu(const onnx::NodeProto& n);
  // The one node that reads output 0 of n (and nothing else does), or
  // null.
  const onnx::NodeProto* SoleReader(const onnx::NodeProto& n) const;
  absl::Status MatMul(const onnx::NodeProto& n);
  absl::Status Binary(const onnx::NodeProto& n, const char* op);
  // An element-wise op node of `type` over the node's first inputs as the
  // config operands `keys`, broadcast as numpy's ("op" set when op is not
  // null).
  absl::Status Broadcasting(const onnx::NodeProto& n, const char* type,
                            const char* op,
                            const std::vector<const char*>& keys);
  absl::Status Unary(const onnx::NodeProto& n, const char* op, Json fields);
  absl::Status ReshapeTo(const onnx::NodeProto& n, const Value& x, Shape shape);
  // The config operand of node input i for an onnx_binary whose batch
  // inputs are *inputs (added to when it is one); `rank` is the per-sample
  // rank of the op's output.
  absl::StatusOr<Json> Operand(const onnx::NodeProto& n, int i,
                               const std::string& layer, size_t rank,
                               std::vector<std::string>* inputs);
  // A parameter operand {"param", "shape", "owner"}: the first layer to
  // use it owns it (its initial value recorded), later ones tie to it.
  absl::StatusOr<Json> ParamRef(const onnx::NodeProto& n,
                                const onnx::TensorProto& t,
                                const std::string& layer);
  // The folded value of node input i, or null.
  const Folded* FoldedIn(const onnx::NodeProto& n, int i) const;
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
  // Values known at import (onnx_fold.h), by tensor name.
  std::map<std::string, Folded> folded_;
  // A parameter's name -> the layer that owns it (the first to use it).
  std::map<std::string, std::string> owner_;
  // Transpose [1, 0] of a parameter, by output name: a torch Linear's
  // weight as MatMul takes it.
  std::map<std::string, const onnx::TensorProto*> transposed_;
  // Outputs of nodes a layer made before them (a bias Add fused into the
  // dense layer of its MatMul): those nodes are skipped.
  std::set<std::string> fused_;
  // Tensor name -> the nodes that read it.
  std::map<std::string, std::vector<const onnx::NodeProto*>> consumers_;
  // The graph inputs the data feeds, in order; the first names the batch.
  std::vector<std::string> model_inputs_;
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
  if (!params_.insert(t.name()).second || owner_.count(t.name())) {
    return Bad(absl::StrCat(NodeName(n), ": parameter \"", t.name(),
                            "\" is used by two nodes (tied weights are "
                            "imported for embeddings, Linears and "
                            "element-wise ops only)"));
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

const Folded* Importer::FoldedIn(const onnx::NodeProto& n, int i) const {
  if (i >= n.input_size() || n.input(i).empty()) return nullptr;
  auto it = folded_.find(n.input(i));
  return it == folded_.end() ? nullptr : &it->second;
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
  return Bad(absl::StrCat(
      NodeName(n), ": op ", op,
      " is not supported yet; supported: ", absl::StrJoin(kSupported, ", ")));
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

}  // namespace

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
