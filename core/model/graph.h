// A model's layers as a graph: the ModelSpec's blocks expanded, every
// layer's inputs resolved by name (default: the layer before it), each
// layer built from its input shapes, and the parameters gathered (a weight
// two layers share counted once). Also the backward plan that the CPU and
// the GPU executors both follow: which layers run backward, where each
// layer's input gradient goes, and when each parameter's gradient is final.
#ifndef LOCKSTEP_CORE_MODEL_GRAPH_H_
#define LOCKSTEP_CORE_MODEL_GRAPH_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/layers/layer.h"
#include "core/layers/layer_spec.h"
#include "core/tensor.h"

namespace lockstep {

struct GraphNode {
  std::string name;
  Shape shape;  // per-sample output
  int64_t size = 0;
  Layer* layer = nullptr;   // null for a model input
  std::vector<int> inputs;  // node indices, all smaller than this one's
  std::vector<int> params;  // Graph::params() indices, in layer params() order
  int layer_index = -1;     // among the layers (seeds dropout masks)
  // trainable: false (LayerSpec): runs as in inference, its params are
  // kFrozen.
  bool frozen = false;
};

// One layer's backward in the plan.
struct BackwardStep {
  int node = 0;
  // Per input: the gradient slot its dx goes to (-1: not needed) and
  // whether an earlier step already wrote there (then dx is added).
  std::vector<int> dx_slot;
  std::vector<bool> dx_add;
  // Parameters whose gradient this step is the first to add to: zeroed
  // just before it, so that a gradient's memory is touched only once
  // backward reaches it (cluster.shard "gradients" hands it back between
  // steps).
  std::vector<int> first_params;
  // Parameters whose gradient is final once this step has run.
  std::vector<int> ready_params;
};

class Graph {
 public:
  // Expands and builds, in one pass: a block expands once its inputs'
  // shapes are known. Errors (kInvalidArgument) name the layer and the
  // problem: "model.layers[3] (add): inputs [8] and [4] differ in shape".
  static absl::StatusOr<std::unique_ptr<Graph>> Build(const ModelSpec& spec,
                                                      uint64_t seed);

  // Nodes [0, num_inputs()) are the model inputs in spec order, then the
  // layers in order; the last node is the output.
  const std::vector<GraphNode>& nodes() const { return nodes_; }
  int num_inputs() const { return num_inputs_; }
  int output() const { return static_cast<int>(nodes_.size()) - 1; }
  const GraphNode& node(int i) const { return nodes_[i]; }
  int num_layers() const { return static_cast<int>(layers_.size()); }

  // A sample is the concatenation of the inputs in order:
  // input i's values start at input_offset(i).
  int64_t input_floats() const { return input_floats_; }
  int64_t input_offset(int i) const { return input_offsets_[i]; }

  // Unique parameters in first-use order (layer order, kernel before bias).
  const std::vector<Param*>& params() const { return params_; }
  int64_t num_parameters() const { return num_parameters_; }

  // The output layer ends in a softmax the loss may fuse.
  bool output_has_softmax() const;
  bool output_has_sigmoid() const;
  // A layer that trains sums across replicas in its passes (sync batch
  // norm; Layer::SumsAcrossReplicas).
  bool sums_across_replicas() const;

  // The training pass's backward, in execution order (reverse topological),
  // only the steps that matter: a layer runs when it or something below it
  // has parameters and its output reaches the loss.
  const std::vector<BackwardStep>& backward_plan() const { return plan_; }
  // The gradient slot of each node: pass-through layers (flatten) share
  // their input's; the output's is written by the loss.
  int grad_slot(int node) const { return slot_of_[node]; }
  int num_slots() const { return num_slots_; }
  int64_t slot_size(int slot) const { return slot_size_[slot]; }  // per sample
  // The tensors of the model's init file (ModelSpec::init_safetensors)
  // that are no parameter of it, sorted (a Hugging Face file's buffers).
  const std::vector<std::string>& init_unused() const { return init_unused_; }
  // The parameters it lacked, which kept their initializers (only with
  // ModelSpec::init_allow_missing), in parameter order.
  const std::vector<std::string>& init_missing() const { return init_missing_; }
  // One line for the log: where the initial weights came from, what the
  // file lacked and what it held besides; "" without an init file.
  std::string InitSummary(const std::string& path) const;
  // For a model.onnx, one line for the log: the file, its nodes and the
  // layers and parameters they became; "" otherwise.
  const std::string& import_summary() const { return import_summary_; }

  // Parameters no planned step touches (their gradient stays zero): final
  // before backward starts.
  const std::vector<int>& untouched_params() const { return untouched_; }

 private:
  Graph() = default;
  absl::Status Plan();
  // Build for a model.onnx: the imported graph's layers, its initializers
  // as the parameters' values (then model.init over them).
  static absl::StatusOr<std::unique_ptr<Graph>> BuildOnnx(const ModelSpec& spec,
                                                          uint64_t seed);
  // Overwrites every parameter with the tensor of its name in `path`:
  // InvalidArgument naming the file and the tensor when one is missing or
  // of another shape.
  absl::Status LoadInitialWeights(const std::string& path, bool allow_missing);
  friend class GraphBuilder;

  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<GraphNode> nodes_;
  int num_inputs_ = 0;
  int64_t input_floats_ = 0;
  std::vector<int64_t> input_offsets_;
  std::vector<Param*> params_;
  int64_t num_parameters_ = 0;
  std::string import_summary_;
  std::vector<BackwardStep> plan_;
  std::vector<int> slot_of_;
  std::vector<int64_t> slot_size_;
  int num_slots_ = 0;
  std::vector<int> untouched_;
  std::vector<std::string> init_unused_;
  std::vector<std::string> init_missing_;
};

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_MODEL_GRAPH_H_
