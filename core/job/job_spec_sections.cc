// The job file's sections: model (inputs and layers, or a preset),
// optimizer, learning-rate schedule and data. The schema they check is
// documented in job_spec.cc.
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "core/job/job_spec_internal.h"
#include "core/layers/registry.h"

namespace lockstep {
namespace job_spec_internal {
namespace {

absl::Status ParseInputs(const Reader& r, ModelSpec* model) {
  if (r.Has("input_shape") == r.Has("inputs")) {
    return Bad(r.At("input_shape"),
               "give exactly one of input_shape (one input) or inputs");
  }
  if (r.Has("input_shape")) {
    const Json& shape = r.Get("input_shape");
    if (!shape.is_array() || shape.empty()) {
      return Bad(
          r.At("input_shape"),
          absl::StrCat("must be a non-empty array of integers >= 1, got ",
                       Got(shape)));
    }
    ModelInput in;
    in.name = "input";
    for (size_t i = 0; i < shape.size(); ++i) {
      int64_t d = 0;
      RETURN_IF_ERROR(
          IntValue(shape[i], Index(r.At("input_shape"), i), 1, kMaxInt, &d));
      in.shape.push_back(d);
    }
    model->inputs.push_back(std::move(in));
    return absl::OkStatus();
  }
  const Json& inputs = r.Get("inputs");
  if (!inputs.is_array() || inputs.empty()) {
    return Bad(
        r.At("inputs"),
        absl::StrCat("must be a non-empty array of inputs, got ", Got(inputs)));
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string path = Index(r.At("inputs"), i);
    RETURN_IF_ERROR(Reader::CheckObject(inputs[i], path));
    Reader in(inputs[i], path);
    RETURN_IF_ERROR(in.CheckKeys(ModelInputKeys()));
    ModelInput mi;
    RETURN_IF_ERROR(in.Require("name"));
    RETURN_IF_ERROR(in.String("name", &mi.name));
    RETURN_IF_ERROR(CheckName(mi.name, in.At("name")));
    for (const ModelInput& other : model->inputs) {
      if (other.name == mi.name) {
        return Bad(in.At("name"),
                   absl::StrCat("duplicate input name ", Got(Json(mi.name))));
      }
    }
    if (in.Has("shape")) {
      const Json& shape = in.Get("shape");
      if (!shape.is_array() || shape.empty()) {
        return Bad(
            in.At("shape"),
            absl::StrCat("must be a non-empty array of integers >= 1, got ",
                         Got(shape)));
      }
      for (size_t k = 0; k < shape.size(); ++k) {
        int64_t d = 0;
        RETURN_IF_ERROR(
            IntValue(shape[k], Index(in.At("shape"), k), 1, kMaxInt, &d));
        mi.shape.push_back(d);
      }
    }
    model->inputs.push_back(std::move(mi));
  }
  return absl::OkStatus();
}

absl::Status ParseLayers(const Reader& r, ModelSpec* model) {
  RETURN_IF_ERROR(r.Require("layers"));
  const Json& layers = r.Get("layers");
  if (!layers.is_array() || layers.empty()) {
    return Bad(
        r.At("layers"),
        absl::StrCat("must be a non-empty array of layers, got ", Got(layers)));
  }
  std::map<std::string, size_t> seen;
  for (size_t i = 0; i < layers.size(); ++i) {
    const std::string path = Index(r.At("layers"), i);
    LayerSpec layer;
    RETURN_IF_ERROR(ParseLayerSpec(layers[i], path, &layer));
    if (!layer.name.empty()) {
      auto [it, fresh] = seen.emplace(layer.name, i);
      if (!fresh) {
        return Bad(Child(path, "name"),
                   absl::StrCat("duplicate layer name ", Got(Json(layer.name)),
                                " (also model.layers[", it->second, "])"));
      }
    }
    model->layers.push_back(std::move(layer));
  }
  AssignDefaultNames(&model->layers);
  return absl::OkStatus();
}

// "preset": "bert_mlm" with the block's fields beside it: one layer of that
// type over the model inputs the preset names.
absl::Status ParsePreset(const Reader& r, ModelSpec* model) {
  std::string preset;
  RETURN_IF_ERROR(r.String("preset", &preset));
  const LayerTypeInfo* info = FindLayerType(preset);
  std::vector<std::string> presets;
  for (const std::string& type : LayerTypeNames()) {
    const LayerTypeInfo* t = FindLayerType(type);
    if (!t->preset_inputs.empty()) presets.push_back(type);
  }
  if (info == nullptr || info->preset_inputs.empty()) {
    return Bad(
        r.At("preset"),
        absl::StrCat("unknown preset ", Got(r.Get("preset")),
                     "; expected one of ", absl::StrJoin(presets, ", ")));
  }
  // "layers" is a preset's own field when it is a number (bert_mlm's
  // encoder layers); a list of layers beside a preset is a mistake.
  for (const char* key :
       {"input_shape", "inputs", "layers", "onnx", "input", "output"}) {
    if (r.Has(key) &&
        (std::string(key) != "layers" || r.Get("layers").is_array())) {
      return Bad(r.At(key), absl::StrCat("unknown field for a preset model (",
                                         preset, " declares its inputs)"));
    }
  }
  Json block = Json::object();
  block["type"] = preset;
  for (auto it = r.object().begin(); it != r.object().end(); ++it) {
    bool model_key = false;
    for (const std::string& k : ModelKeys()) model_key |= it.key() == k;
    // A number under "layers" is the block's (checked above), not the
    // model's list: it must reach the block, or the default silently wins.
    if (!model_key || it.key() == "layers") block[it.key()] = it.value();
  }
  block["inputs"] = info->preset_inputs;
  LayerSpec layer;
  RETURN_IF_ERROR(ParseLayerSpec(block, r.path(), &layer));
  layer.name = preset;
  for (const std::string& name : info->preset_inputs) {
    model->inputs.push_back(ModelInput{name, {}});
  }
  model->layers.push_back(std::move(layer));
  model->param_names = ParamNaming::kTorch;
  return absl::OkStatus();
}

// "model": {"onnx": PATH, "input": ..., "output": ...}: the graph is read
// when the model is built (Graph::Build) and by check and submit
// (ImportOnnxModel); here only its fields.
absl::Status ParseOnnx(const Reader& r, absl::string_view base_dir,
                       ModelSpec* model) {
  for (const char* key : {"input_shape", "inputs", "layers", "preset"}) {
    if (r.Has(key)) {
      return Bad(r.At(key),
                 "unknown field for an ONNX model (its graph declares its "
                 "input and layers)");
    }
  }
  RETURN_IF_ERROR(r.CheckKeys(ModelKeys()));
  RETURN_IF_ERROR(r.Path("onnx", base_dir, &model->onnx_path));
  if (r.Has("input") && r.Get("input").is_array()) {
    // Several graph inputs (a text model's token ids, segments, mask...):
    // each is fed by the data field of its name, in this order.
    const Json& list = r.Get("input");
    if (list.empty()) return Bad(r.At("input"), "an empty list");
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string at = absl::StrCat(r.At("input"), "[", i, "]");
      if (!list[i].is_string() || list[i].get<std::string>().empty()) {
        return Bad(at, absl::StrCat("must be a graph input's name, got ",
                                    Got(list[i])));
      }
      for (const ModelInput& seen : model->inputs) {
        if (seen.name == list[i].get<std::string>()) {
          return Bad(at, absl::StrCat("\"", seen.name, "\" is named twice"));
        }
      }
      model->inputs.push_back(ModelInput{list[i].get<std::string>(), {}});
    }
  } else {
    RETURN_IF_ERROR(r.String("input", &model->onnx_input));
    // The graph's input is fed by the data's field "input" (an image, a
    // CSV row); its shape is the data's, checked against the graph's on
    // import.
    model->inputs.push_back(ModelInput{"input", {}});
  }
  RETURN_IF_ERROR(r.String("output", &model->onnx_output));
  model->param_names = ParamNaming::kTorch;
  return absl::OkStatus();
}

}  // namespace

absl::Status ParseModel(const Json& v, absl::string_view base_dir,
                        ModelSpec* model) {
  RETURN_IF_ERROR(Reader::CheckObject(v, "model"));
  Reader r(v, "model");
  if (r.Has("preset")) {
    RETURN_IF_ERROR(ParsePreset(r, model));
  } else if (r.Has("onnx")) {
    RETURN_IF_ERROR(ParseOnnx(r, base_dir, model));
  } else {
    RETURN_IF_ERROR(r.CheckKeys(ModelKeys()));
    for (const char* key : {"input", "output"}) {
      if (r.Has(key)) {
        return Bad(r.At(key),
                   "only with model.onnx (the name of the graph's input or "
                   "output)");
      }
    }
    RETURN_IF_ERROR(ParseInputs(r, model));
    RETURN_IF_ERROR(ParseLayers(r, model));
  }
  RETURN_IF_ERROR(r.Enum("param_names", "parameter naming", ParamNamings(),
                         &model->param_names));
  if (!model->onnx_path.empty() && model->param_names != ParamNaming::kTorch) {
    return Bad(r.At("param_names"),
               "an ONNX model's parameters are its initializers' names (the "
               "torch state dict's): only \"torch\"");
  }
  if (r.Has("init")) {
    RETURN_IF_ERROR(Reader::CheckObject(r.Get("init"), r.At("init")));
    Reader init(r.Get("init"), r.At("init"));
    RETURN_IF_ERROR(init.CheckKeys(ModelInitKeys()));
    RETURN_IF_ERROR(init.Require("safetensors"));
    RETURN_IF_ERROR(
        init.Path("safetensors", base_dir, &model->init_safetensors));
    RETURN_IF_ERROR(init.Bool("allow_missing", &model->init_allow_missing));
  }
  return absl::OkStatus();
}

absl::Status ResolveInputShapes(const DataSpec& data, ModelSpec* model) {
  for (size_t i = 0; i < model->inputs.size(); ++i) {
    ModelInput& in = model->inputs[i];
    absl::StatusOr<Shape> shape =
        data.config != nullptr
            ? data.config->FieldShape(in.name)
            : absl::StatusOr<Shape>(absl::NotFoundError("it has no fields"));
    const std::string path = absl::StrCat("model.inputs[", i, "]");
    if (absl::IsNotFound(shape.status()) && !model->onnx_path.empty() &&
        model->inputs.size() == 1 && in.name == "input") {
      // An ONNX graph fed by the data's one "input", which this data (a
      // text's token_ids, mask_positions, ...) does not have.
      return Bad(
          "model.input",
          absl::StrCat("data format \"", data.format,
                       "\" has no single input (", shape.status().message(),
                       "): list the graph inputs it feeds, each fed by "
                       "the data field of its name, as in "
                       "\"input\": [\"token_ids\", \"mask_positions\"]"));
    }
    if (absl::IsNotFound(shape.status())) {
      return Bad(path, absl::StrCat(
                           "data format \"", data.format,
                           "\" has no field named ", Got(Json(in.name)), ": ",
                           shape.status().message()));
    }
    // A given shape is checked against the data when it is loaded
    // (CheckDataFitsModel): a reshape ([64] for an 8x8x1 image) is fine.
    if (!in.shape.empty()) {
      continue;
    }
    if (!shape.ok()) {
      return Bad(Child(path, "shape"),
                 absl::StrCat("required: ", shape.status().message()));
    }
    in.shape = *shape;
  }
  return absl::OkStatus();
}

absl::Status ParseOptimizer(const Json& v, OptimizerSpec* opt) {
  RETURN_IF_ERROR(Reader::CheckObject(v, "optimizer"));
  Reader r(v, "optimizer");
  const Keys& all = OptimizerKeys();
  RETURN_IF_ERROR(r.CheckKeys(all));
  RETURN_IF_ERROR(r.Require("type"));
  RETURN_IF_ERROR(
      r.Enum("type", "optimizer type", OptimizerTypes(), &opt->type));
  const bool sgd = opt->type == OptimizerType::kSgd;
  Keys allowed = {"type",
                  "learning_rate",
                  "weight_decay",
                  "exclude_from_weight_decay",
                  "global_clipnorm",
                  "scale_with_replicas"};
  if (sgd) {
    allowed.insert(allowed.end(), {"momentum", "nesterov"});
  } else {
    allowed.insert(allowed.end(), {"beta_1", "beta_2", "epsilon"});
  }
  RETURN_IF_ERROR(
      r.CheckKeys(allowed, all,
                  absl::StrCat("optimizer type \"",
                               NameOf(OptimizerTypes(), opt->type), "\"")));
  RETURN_IF_ERROR(r.Number("learning_rate", kPositive, &opt->learning_rate));
  opt->weight_decay = opt->type == OptimizerType::kAdamW ? 0.004 : 0.0;
  RETURN_IF_ERROR(r.Number("weight_decay", kNonNegative, &opt->weight_decay));
  RETURN_IF_ERROR(r.Number("momentum", kUnitClosed, &opt->momentum));
  RETURN_IF_ERROR(r.Bool("nesterov", &opt->nesterov));
  RETURN_IF_ERROR(r.Number("beta_1", kUnitOpen, &opt->beta_1));
  RETURN_IF_ERROR(r.Number("beta_2", kUnitOpen, &opt->beta_2));
  RETURN_IF_ERROR(r.Number("epsilon", kPositive, &opt->epsilon));
  RETURN_IF_ERROR(
      r.Strings("exclude_from_weight_decay", &opt->exclude_from_weight_decay));
  RETURN_IF_ERROR(
      r.Number("global_clipnorm", kPositive, &opt->global_clipnorm));
  RETURN_IF_ERROR(r.Bool("scale_with_replicas", &opt->scale_with_replicas));
  return absl::OkStatus();
}

absl::Status ParseSchedule(const Json& v, ScheduleSpec* s) {
  RETURN_IF_ERROR(Reader::CheckObject(v, "lr_schedule"));
  Reader r(v, "lr_schedule");
  const Keys& all = ScheduleKeys();
  RETURN_IF_ERROR(r.CheckKeys(all));
  RETURN_IF_ERROR(r.Require("type"));
  RETURN_IF_ERROR(r.Enum("type", "schedule type", ScheduleTypes(), &s->type));
  const std::string type = NameOf(ScheduleTypes(), s->type);
  Keys allowed = {"type", "warmup_steps"};
  if (s->type == ScheduleType::kPiecewise) {
    allowed.insert(allowed.end(), {"unit", "boundaries", "values"});
  } else if (s->type == ScheduleType::kPolynomial) {
    allowed.insert(allowed.end(),
                   {"decay_steps", "end_learning_rate", "power"});
  }
  const std::string variant = absl::StrCat("schedule type \"", type, "\"");
  RETURN_IF_ERROR(r.CheckKeys(allowed, all, variant));
  RETURN_IF_ERROR(r.Int("warmup_steps", 0, &s->warmup_steps));
  if (s->type == ScheduleType::kPiecewise) {
    RETURN_IF_ERROR(r.Enum("unit", "unit", ScheduleUnits(), &s->unit));
    for (const char* key : {"boundaries", "values"}) {
      RETURN_IF_ERROR(r.Require(key, variant));
      const Json& a = r.Get(key);
      if (!a.is_array()) {
        return Bad(r.At(key),
                   absl::StrCat("must be an array of numbers, got ", Got(a)));
      }
      std::vector<double>& out =
          std::string(key) == "boundaries" ? s->boundaries : s->values;
      const Constraint& c =
          std::string(key) == "boundaries" ? kNonNegative : kPositive;
      for (size_t i = 0; i < a.size(); ++i) {
        double d = 0;
        RETURN_IF_ERROR(NumberValue(a[i], Index(r.At(key), i), c, &d));
        if (&out == &s->boundaries && i > 0 && d <= out.back()) {
          return Bad(Index(r.At(key), i),
                     absl::StrCat("must be greater than the boundary before "
                                  "it (",
                                  Got(a[i - 1]), "), got ", Got(a[i])));
        }
        out.push_back(d);
      }
    }
    if (s->values.size() != s->boundaries.size() + 1) {
      return Bad(
          r.At("values"),
          absl::StrCat("must have one more entry than boundaries (",
                       s->boundaries.size() + 1, "), got ", s->values.size()));
    }
  } else if (s->type == ScheduleType::kPolynomial) {
    RETURN_IF_ERROR(r.Require("decay_steps", variant));
    RETURN_IF_ERROR(r.Int("decay_steps", 1, &s->decay_steps));
    RETURN_IF_ERROR(
        r.Number("end_learning_rate", kNonNegative, &s->end_learning_rate));
    RETURN_IF_ERROR(r.Number("power", kPositive, &s->power));
  }
  return absl::OkStatus();
}

}  // namespace job_spec_internal
}  // namespace lockstep
