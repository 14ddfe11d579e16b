// A graph exported as ONNX (torch.onnx.export, opsets 13 to 17) imported as
// a lockstep model: the file is parsed and checked with Debian's libonnx
// (its checker and shape inference); a node, or a run of nodes, that is a
// registry layer becomes that layer (Conv, BatchNormalization, MaxPool,
// Gemm and x @ W.T as dense, Gather of a table as an embedding,
// LayerNormalization, torch's GELU, activations fused; onnx_layers.cc) and
// runs the native kernels on the CPU and on GPUs; what no layer is becomes
// an op-level node (core/onnx/ops/, CPU only; onnx_op_nodes.cc); shape
// sub-graphs fold at import (onnx_fold.h). Parameters keep the
// initializers' names (the torch state dict's) and start from their
// values. Activations keep lockstep's layout (a feature map [C, H, W] is
// held channels-last, as the data decodes it; a flatten orders it as
// torch's). Any other op, attribute or layout is refused naming the node,
// the op and what to do.
#ifndef LOCKSTEP_CORE_ONNX_ONNX_IMPORT_H_
#define LOCKSTEP_CORE_ONNX_ONNX_IMPORT_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/layers/layer_spec.h"
#include "core/tensor.h"

namespace lockstep {

// The opsets of the default domain an importer accepts.
inline constexpr int kMinOnnxOpset = 13;
inline constexpr int kMaxOnnxOpset = 17;
// A file larger than this is refused before it is read.
inline constexpr int64_t kMaxOnnxFileBytes = int64_t{2} << 30;

// The most values one tensor of an imported graph holds per sample (2^31:
// 8 GiB of float32 for one sample). A node whose output would hold more,
// or has a negative size (a hostile or damaged Expand's shape), is refused
// at import, before any size is multiplied out.
inline constexpr int64_t kMaxOnnxSampleValues = int64_t{1} << 31;

struct OnnxImport {
  // One input ("input", the data's field) whose per-sample shape is the
  // graph input's without its batch dimension, channels-last for a
  // [C, H, W] image; the layers in the graph's order, the last one its
  // output; PyTorch naming.
  ModelSpec model;
  // Every parameter's initial value, by name (the graph's initializers).
  std::vector<std::pair<std::string, Tensor>> initial;
  // How many nodes were read, and how many layers they became.
  int nodes = 0;
};

// Reads and imports `path`. `input` and `output` name the graph input the
// data feeds and the output the loss reads; either may be "" when the
// graph has exactly one. `named`, when not empty, lists graph inputs
// instead (a text model's token_ids, segment_ids, ...): each becomes a
// model input of its own name, fed by the data field of that name, in
// this order. Errors (InvalidArgument, NotFound for a missing file) start
// with "model.onnx" and name the node and op.
absl::StatusOr<OnnxImport> ImportOnnx(
    const std::string& path, const std::string& input,
    const std::string& output, const std::vector<std::string>& named = {});

// The graph inputs a model names (its inputs' names when model.input is a
// list), or none (one input, the data's "input").
std::vector<std::string> OnnxFeeds(const ModelSpec& model);

// Imports `model.onnx_path` as ImportOnnx does, with the spec's input and
// output names, and checks that its input holds as many values per sample
// as the spec's (the data's) shape when that is known: a CSV row of 784
// values feeds a [1, 28, 28] graph input; an 8x8 image does not.
absl::StatusOr<OnnxImport> ImportOnnxModel(const ModelSpec& model);

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_ONNX_ONNX_IMPORT_H_
