// The model part of a job (docs/job-file.md): the graph's inputs and
// its layers as the job file names them. Plain structs; the registry
// (core/layers/registry.h) validates a layer's own fields into `config`,
// and core/model/graph.h builds the layers.
#ifndef LOCKSTEP_CORE_LAYERS_LAYER_SPEC_H_
#define LOCKSTEP_CORE_LAYERS_LAYER_SPEC_H_

#include <string>
#include <vector>

#include "core/tensor.h"

namespace lockstep {

// How parameter names are spelled and dense kernels are laid out: Keras
// ("dense/kernel", [in, units]) or PyTorch / Hugging Face ("dense.weight",
// [units, in]), so safetensors move to and from the ecosystem a model comes
// from.
enum class ParamNaming { kKeras, kTorch };

// A named input of the model. Its values come from the data field of the
// same name ("input" for image and CSV data; "token_ids", "segment_ids",
// "padding_mask", "mask_positions" for text); integer inputs (token ids,
// positions) arrive as exact float values.
struct ModelInput {
  std::string name;
  Shape shape;  // per sample
};

struct LayerSpec {
  std::string type;  // a registered layer or block type
  std::string name;  // unique; Keras-style (dense, dense_1, ...) when absent
  // Layer or model input names; empty: the previous layer (for the first
  // layer, the model's first input).
  std::vector<std::string> inputs;
  // false: frozen (Keras' trainable=False). Its own parameters never change
  // (no gradient, no optimizer state, nothing all-reduced), it runs as in
  // inference (batch norm on its running statistics, no dropout), and
  // backward stops below it when nothing beneath learns. A block's false
  // holds for every layer it expands into.
  bool trainable = true;
  // The type's own fields as a canonical JSON object (every default filled
  // in, in the order the type lists them).
  std::string config = "{}";
};

struct ModelSpec {
  std::vector<ModelInput> inputs;
  std::vector<LayerSpec> layers;
  ParamNaming param_names = ParamNaming::kKeras;
  // Initial weights by parameter name ("" = the layers' initializers).
  std::string init_safetensors;
  // Parameters the file lacks keep their layers' initializers (a new head
  // over a pretrained base) instead of being an error.
  bool init_allow_missing = false;
  // A model exported as ONNX (model.onnx, model.input, model.output;
  // core/onnx/onnx_import.h): its
  // graph becomes the layers and its initializers the initial weights
  // when the graph is built, so `layers` stays empty and `inputs` holds
  // the data fields it reads: "input" (one graph input: `onnx_input` names
  // it, "" when the graph has one), or the graph inputs' own names (a list
  // model.input: each fed by the data field of its name). `onnx_output`
  // names the graph's output ("" when it has one).
  std::string onnx_path;
  std::string onnx_input;
  std::string onnx_output;

  // The single input's shape (a stack model's "input_shape"), or empty.
  Shape single_input_shape() const {
    return inputs.size() == 1 ? inputs[0].shape : Shape();
  }
};

bool operator==(const ModelInput& a, const ModelInput& b);
bool operator==(const LayerSpec& a, const LayerSpec& b);
bool operator==(const ModelSpec& a, const ModelSpec& b);

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_LAYERS_LAYER_SPEC_H_
