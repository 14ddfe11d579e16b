// Equality of the model spec types.
#include "core/layers/layer_spec.h"

namespace lockstep {

bool operator==(const ModelInput& a, const ModelInput& b) {
  return a.name == b.name && a.shape == b.shape;
}

bool operator==(const LayerSpec& a, const LayerSpec& b) {
  return a.type == b.type && a.name == b.name && a.inputs == b.inputs &&
         a.trainable == b.trainable && a.config == b.config;
}

bool operator==(const ModelSpec& a, const ModelSpec& b) {
  return a.inputs == b.inputs && a.layers == b.layers &&
         a.param_names == b.param_names &&
         a.init_safetensors == b.init_safetensors &&
         a.init_allow_missing == b.init_allow_missing &&
         a.onnx_path == b.onnx_path && a.onnx_input == b.onnx_input &&
         a.onnx_output == b.onnx_output;
}

}  // namespace lockstep
