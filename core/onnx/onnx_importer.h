// The ONNX importer's inside (core/onnx/onnx_import.h is its interface):
// the Importer that walks a graph's nodes, shared by onnx_import.cc (reading,
// checking, parameters, the run), onnx_layers.cc (nodes that become
// registry layers) and onnx_op_nodes.cc (nodes that become op-level nodes).
#ifndef LOCKSTEP_CORE_ONNX_ONNX_IMPORTER_H_
#define LOCKSTEP_CORE_ONNX_ONNX_IMPORTER_H_

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/onnx/onnx_fold.h"
#include "core/onnx/onnx_import.h"
#include "core/spec_reader.h"
#include "core/tensor.h"
#include "onnx/onnx_pb.h"

namespace lockstep {
namespace onnx_internal {

using Json = spec_reader::Json;

// The ops a node may have ("Abs, Add, ..."), for refusals, and whether
// `op` is one.
std::string SupportedOps();
bool IsSupported(const std::string& op);

// An ONNX tensor as the layers hold it.
struct Value {
  std::string node;  // the lockstep node that makes it: "input" or a layer
  Shape shape;       // per sample, the graph's logical shape (no batch)
  // A logical [C, H, W] held as [H, W, C] (the data's and the layers'
  // layout for feature maps).
  bool channels_last = false;
};

// The largest stride, kernel size, dilation, pad or group a conv or pool
// may have (and an AvgPool2d's Pad node): beyond any real model, and
// small enough that the size arithmetic cannot overflow.
inline constexpr int64_t kMaxSpatialValue = int64_t{1} << 20;

// kInvalidArgument "model.onnx: <what>".
absl::Status Bad(absl::string_view what);
// "node \"NAME\" (OP)" for errors.
std::string NodeName(const onnx::NodeProto& n);
// A layer name from an ONNX name: [A-Za-z0-9_.-], at most 64 characters.
std::string LayerName(const std::string& onnx_name);

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
  // Nodes that move a batch's values (onnx_shape_nodes.cc).
  absl::Status Transpose(const onnx::NodeProto& n);
  absl::Status Reshape(const onnx::NodeProto& n);  // and (Un)Squeeze
  absl::Status Expand(const onnx::NodeProto& n);
  absl::Status Concat(const onnx::NodeProto& n);
  absl::Status SplitOrSlice(const onnx::NodeProto& n);
  // A Trilu of a batch of matrices: a product with its constant mask.
  absl::Status Trilu(const onnx::NodeProto& n);
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
  // rank of the op's output. With `maps` the batch inputs are feature maps
  // (held [H, W, C]) and a constant is laid out as they are.
  absl::StatusOr<Json> Operand(const onnx::NodeProto& n, int i,
                               const std::string& layer, size_t rank, bool maps,
                               std::vector<std::string>* inputs);
  // A parameter operand {"param", "shape", "owner"}: the first layer to
  // use it owns it (its initial value recorded), later ones tie to it.
  absl::StatusOr<Json> ParamRef(const onnx::NodeProto& n,
                                const onnx::TensorProto& t,
                                const std::string& layer);
  // The folded value of node input i, or null.
  const Folded* FoldedIn(const onnx::NodeProto& n, int i) const;
  // FoldedIn for an input ONNX types as integers (a shape, axes, indices,
  // sizes, pads, k): an error naming the input and the value when one is
  // not an integer (inf, NaN, 2.5: a damaged or hostile model's, which
  // would otherwise be cast to int64 unchecked); FoldedInt casts them.
  absl::StatusOr<const Folded*> IntsIn(const onnx::NodeProto& n, int i) const;
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
  // A Pad's output an AveragePool reads (torch's AvgPool2d(padding=N)
  // exports the padding as a Pad): the map padded, and the rows and
  // columns of zeros on each side.
  struct Padded {
    Value x;
    int64_t rows = 0, cols = 0;
  };
  std::map<std::string, Padded> padded_;
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

}  // namespace onnx_internal
}  // namespace lockstep

#endif  // LOCKSTEP_CORE_ONNX_ONNX_IMPORTER_H_
