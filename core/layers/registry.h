// The layer vocabulary's one home: each layer type registers here, from its
// own file, its JSON fields (validated into a canonical config), its Keras
// name stem, and how to build it (shape inference, named parameters, CPU
// forward/backward: core/layers/layer.h). A block type (transformer_encoder,
// bert_mlm) registers an expansion into other layers instead. The CUDA side
// of a layer registers separately (core/layers/device_layer.h), from the
// CUDA build only.
#ifndef LOCKSTEP_CORE_LAYERS_REGISTRY_H_
#define LOCKSTEP_CORE_LAYERS_REGISTRY_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/layers/layer.h"
#include "core/layers/layer_spec.h"
#include "core/spec_reader.h"

namespace lockstep {

// What a layer's constructor is told.
struct LayerBuildContext {
  std::string name;
  // Names the layer in errors: "model.layers[3] (dense_1)", or for a layer
  // a block expanded into, "model.layers[0] (encoder) > encoder/attention".
  std::string where;
  std::vector<Shape> inputs;  // per-sample shapes, in input order
  std::vector<std::string> input_names;
  uint64_t init_seed = 0;
  ParamNaming naming = ParamNaming::kKeras;
  // A layer built earlier in the same model (weight tying); null if none.
  std::function<Layer*(const std::string& name)> find_layer;

  // kInvalidArgument "<where>: <msg>".
  absl::Status Error(absl::string_view msg) const;
  // The full name of one of the layer's parameters, in the model's naming:
  // "<name>/<keras>" or "<name>.<torch>".
  std::string ParamName(absl::string_view keras, absl::string_view torch) const;
};

// What a block's expansion is told.
struct BlockContext {
  std::string name;                 // the block's own name
  std::string where;                // as LayerBuildContext::where
  std::vector<std::string> inputs;  // resolved names of its inputs
  std::vector<Shape> input_shapes;  // their per-sample shapes
  ParamNaming naming = ParamNaming::kKeras;

  // A sub-layer's name: "<name>/<keras>" or "<name>.<torch>".
  std::string Sub(absl::string_view keras, absl::string_view torch) const;
};

struct LayerTypeInfo {
  std::string type;        // the job file's "type"
  std::string keras_stem;  // unnamed layers: stem, stem_1, ... (as Keras)
  std::vector<std::string> keys;  // its own JSON fields
  int min_inputs = 1;
  int max_inputs = 1;  // -1: any number
  // A block that can be a whole model (the job file's "model": {"preset":
  // "bert_mlm", ...}) names the data fields it takes as model inputs; a
  // preset's parameters have PyTorch names unless the model says otherwise.
  std::vector<std::string> preset_inputs;
  // Made by an importer only (an ONNX graph's op-level nodes,
  // core/onnx/ops/): a job file cannot name it, and LayerTypeNames leaves
  // it out.
  bool internal = false;
  // Validates the fields (the caller has refused keys outside `keys`) and
  // fills *config with every field, defaults included.
  std::function<absl::Status(const spec_reader::Reader&,
                             spec_reader::Json* config)>
      parse;
  // A layer type builds; a block type expands into layers whose last one
  // is the block's output (names and inputs filled in). Exactly one is set.
  std::function<absl::StatusOr<std::unique_ptr<Layer>>(
      const spec_reader::Json& config, const LayerBuildContext&)>
      create;
  std::function<absl::StatusOr<std::vector<LayerSpec>>(
      const spec_reader::Json& config, const BlockContext&)>
      expand;
};

// Fields every layer object may have besides its type's own.
const spec_reader::Keys& CommonLayerKeys();

// Adds a type at static-initialization time (LOCKSTEP_REGISTER_LAYER).
bool RegisterLayerType(LayerTypeInfo info);
// Null for an unknown type.
const LayerTypeInfo* FindLayerType(absl::string_view type);
// Every registered type a job file may name, sorted.
std::vector<std::string> LayerTypeNames();

namespace registry_internal {
// What a layer type and a block type share: the names, the input counts,
// and `parse` (read the fields into Config, write its canonical form).
template <typename Config>
LayerTypeInfo TypeInfo(std::string type, std::string keras_stem,
                       std::vector<std::string> keys, int min_inputs,
                       int max_inputs,
                       absl::Status (*read)(const spec_reader::Reader&,
                                            Config*),
                       spec_reader::Json (*to_json)(const Config&)) {
  LayerTypeInfo info;
  info.type = std::move(type);
  info.keras_stem = std::move(keras_stem);
  info.keys = std::move(keys);
  info.min_inputs = min_inputs;
  info.max_inputs = max_inputs;
  info.parse = [read, to_json](const spec_reader::Reader& r,
                               spec_reader::Json* out) -> absl::Status {
    Config c;
    absl::Status s = read(r, &c);
    if (s.ok()) *out = to_json(c);
    return s;
  };
  return info;
}
}  // namespace registry_internal

// A layer type from its typed config: `read` validates the fields into
// Config (the same function reads the canonical config back at build time),
// `to_json` writes the canonical form, `create` builds.
template <typename Config>
LayerTypeInfo MakeLayerType(std::string type, std::string keras_stem,
                            std::vector<std::string> keys, int min_inputs,
                            int max_inputs,
                            absl::Status (*read)(const spec_reader::Reader&,
                                                 Config*),
                            spec_reader::Json (*to_json)(const Config&),
                            absl::StatusOr<std::unique_ptr<Layer>> (*create)(
                                const Config&, const LayerBuildContext&)) {
  LayerTypeInfo info = registry_internal::TypeInfo<Config>(
      std::move(type), std::move(keras_stem), std::move(keys), min_inputs,
      max_inputs, read, to_json);
  info.create = [read, create](const spec_reader::Json& config,
                               const LayerBuildContext& ctx)
      -> absl::StatusOr<std::unique_ptr<Layer>> {
    Config c;
    absl::Status s = read(spec_reader::Reader(config, ctx.where), &c);
    if (!s.ok()) return s;
    return create(c, ctx);
  };
  return info;
}

// The same for a block, which `expand`s into layers instead.
template <typename Config>
LayerTypeInfo MakeBlockType(
    std::string type, std::string keras_stem, std::vector<std::string> keys,
    int min_inputs, int max_inputs,
    absl::Status (*read)(const spec_reader::Reader&, Config*),
    spec_reader::Json (*to_json)(const Config&),
    absl::StatusOr<std::vector<LayerSpec>> (*expand)(const Config&,
                                                     const BlockContext&)) {
  LayerTypeInfo info = registry_internal::TypeInfo<Config>(
      std::move(type), std::move(keras_stem), std::move(keys), min_inputs,
      max_inputs, read, to_json);
  info.expand =
      [read, expand](
          const spec_reader::Json& config,
          const BlockContext& ctx) -> absl::StatusOr<std::vector<LayerSpec>> {
    Config c;
    absl::Status s = read(spec_reader::Reader(config, ctx.where), &c);
    if (!s.ok()) return s;
    return expand(c, ctx);
  };
  return info;
}

// Registers `expr` (a LayerTypeInfo) when the program starts; `id` names
// the registration within the file.
#define LOCKSTEP_REGISTER_LAYER(id, expr)                             \
  static const bool lockstep_layer_registered_##id [[maybe_unused]] = \
      ::lockstep::RegisterLayerType(expr)

// --- The job file's side -----------------------------------------------

// Parses one layer object at JSON path `path` ("model.layers[2]"): its
// type, name, inputs and the type's own fields. Errors name the field:
// `model.layers[1].type: unknown layer type "dense3"; expected one of ...`,
// `model.layers[0].rate: unknown field for a dense layer`.
absl::Status ParseLayerSpec(const spec_reader::Json& v, const std::string& path,
                            LayerSpec* out);
// The canonical JSON object of a parsed layer: type, name, inputs (only
// when given), then the config's fields.
spec_reader::Json LayerSpecToJson(const LayerSpec& layer);
// A LayerSpec from a JSON object text, for code and tests that build
// models by hand: ParseLayerSpec of it, or an error.
absl::StatusOr<LayerSpec> LayerFromJson(absl::string_view json);
// One layer of a block's expansion: its type, name, inputs and fields.
LayerSpec SubLayer(const std::string& type, const std::string& name,
                   std::vector<std::string> inputs,
                   const spec_reader::Json& config);
// Gives unnamed layers Keras-style names (dense, dense_1, ...) that skip the
// names already used.
void AssignDefaultNames(std::vector<LayerSpec>* layers);

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_LAYERS_REGISTRY_H_
