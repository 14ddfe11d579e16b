// Graph::Build: expansion, name resolution, construction, and the backward
// plan.
#include "core/model/graph.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "core/checkpoint/safetensors.h"
#include "core/json_util.h"
#include "core/layers/registry.h"
#include "core/onnx/onnx_import.h"
#include "core/param_init.h"

namespace lockstep {
namespace {

absl::Status Invalid(const std::string& where, absl::string_view msg) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", msg));
}

}  // namespace

// Builds the graph layer by layer; a block is expanded when it is reached,
// its inputs' shapes known, and its layers built in turn.
class GraphBuilder {
 public:
  GraphBuilder(const ModelSpec& spec, uint64_t seed, Graph* g)
      : spec_(spec), seed_(seed), g_(g) {}

  absl::Status Run() {
    if (spec_.inputs.empty()) {
      return absl::InvalidArgumentError("model: declares no input");
    }
    for (size_t i = 0; i < spec_.inputs.size(); ++i) {
      const ModelInput& in = spec_.inputs[i];
      if (in.shape.empty() || std::any_of(in.shape.begin(), in.shape.end(),
                                          [](int64_t d) { return d <= 0; })) {
        return absl::InvalidArgumentError(absl::StrCat(
            spec_.inputs.size() == 1 && in.name == "input"
                ? std::string("model.input_shape")
                : absl::StrCat("model.inputs[", i, "] (", in.name, ")"),
            ": every dimension must be > 0, got ", ShapeToString(in.shape)));
      }
      GraphNode node;
      node.name = in.name;
      node.shape = in.shape;
      node.size = NumElements(in.shape);
      g_->input_offsets_.push_back(g_->input_floats_);
      g_->input_floats_ += node.size;
      index_[in.name] = static_cast<int>(g_->nodes_.size());
      g_->nodes_.push_back(std::move(node));
    }
    g_->num_inputs_ = static_cast<int>(g_->nodes_.size());
    if (spec_.layers.empty()) {
      return absl::InvalidArgumentError("model.layers: must not be empty");
    }
    std::vector<LayerSpec> top = spec_.layers;
    AssignDefaultNames(&top);
    std::string previous = spec_.inputs[0].name;
    for (size_t i = 0; i < top.size(); ++i) {
      const std::string where =
          absl::StrCat("model.layers[", i, "] (", top[i].name, ")");
      RETURN_IF_ERROR(Add(top[i], where, &previous, 0));
    }
    std::set<std::string> names;
    for (const Param* p : g_->params_) {
      if (!names.insert(p->name).second) {
        return absl::InvalidArgumentError(
            absl::StrCat("model: two parameters are both named \"", p->name,
                         "\"; rename one of their layers"));
      }
    }
    return absl::OkStatus();
  }

 private:
  // Resolves one layer's inputs and builds it (or expands it); *previous
  // becomes the name later layers default to.
  absl::Status Add(LayerSpec layer, const std::string& where,
                   std::string* previous, int depth) {
    if (depth > 8) return Invalid(where, "blocks nested too deep");
    const LayerTypeInfo* info = FindLayerType(layer.type);
    if (info == nullptr) {
      return Invalid(where,
                     absl::StrCat("unknown layer type \"", layer.type,
                                  "\"; expected one of ",
                                  absl::StrJoin(LayerTypeNames(), ", ")));
    }
    if (layer.inputs.empty()) layer.inputs = {*previous};
    std::vector<int> inputs;
    for (std::string& in : layer.inputs) {
      auto alias = aliases_.find(in);
      if (alias != aliases_.end()) in = alias->second;
      auto it = index_.find(in);
      if (it == index_.end()) {
        std::vector<std::string> names;
        for (const ModelInput& m : spec_.inputs) names.push_back(m.name);
        return Invalid(
            where,
            absl::StrCat("input \"", in, "\" is neither a model input (",
                         absl::StrJoin(names, ", "), ") nor an earlier layer"));
      }
      inputs.push_back(it->second);
    }
    const int n = static_cast<int>(inputs.size());
    if (n < info->min_inputs ||
        (info->max_inputs >= 0 && n > info->max_inputs)) {
      return Invalid(
          where,
          absl::StrCat("a ", layer.type, " layer takes ", info->min_inputs,
                       info->max_inputs == info->min_inputs ? "" : " or more",
                       " input(s), got ", n));
    }
    if (index_.count(layer.name) > 0 || aliases_.count(layer.name) > 0) {
      return Invalid(where, absl::StrCat("the name \"", layer.name,
                                         "\" is already used by an earlier "
                                         "layer; layer names must be unique"));
    }
    ASSIGN_OR_RETURN(spec_reader::Json config,
                     ParseOrderedJson(layer.config, where));
    std::vector<Shape> shapes;
    for (int k : inputs) shapes.push_back(g_->nodes_[k].shape);
    if (info->expand) {
      BlockContext ctx;
      ctx.name = layer.name;
      ctx.where = where;
      ctx.inputs = layer.inputs;
      ctx.input_shapes = shapes;
      ctx.naming = spec_.param_names;
      ASSIGN_OR_RETURN(std::vector<LayerSpec> subs, info->expand(config, ctx));
      if (subs.empty()) return Invalid(where, "the block expands to nothing");
      std::string inner = layer.inputs[0];
      for (LayerSpec& sub : subs) {
        if (!layer.trainable) sub.trainable = false;
        const std::string sub_where = absl::StrCat(where, " > ", sub.name);
        RETURN_IF_ERROR(Add(std::move(sub), sub_where, &inner, depth + 1));
      }
      aliases_[layer.name] = inner;
      *previous = inner;
      return absl::OkStatus();
    }
    const int layer_index = static_cast<int>(g_->layers_.size());
    LayerBuildContext ctx;
    ctx.name = layer.name;
    ctx.where = where;
    ctx.naming = spec_.param_names;
    ctx.init_seed = LayerSeed(seed_, layer_index);
    ctx.inputs = shapes;
    ctx.input_names = layer.inputs;
    ctx.find_layer = [this](const std::string& name) -> Layer* {
      auto it = built_.find(name);
      return it == built_.end() ? nullptr : it->second;
    };
    ASSIGN_OR_RETURN(std::unique_ptr<Layer> built, info->create(config, ctx));
    GraphNode node;
    node.name = layer.name;
    node.inputs = std::move(inputs);
    node.shape = built->output_shape();
    node.size = built->output_size();
    node.layer = built.get();
    node.layer_index = layer_index;
    node.frozen = !layer.trainable;
    for (Param* p : built->params()) {
      auto it = param_index_.find(p);
      if (it != param_index_.end() &&
          (p->update == ParamUpdate::kFrozen) != node.frozen) {
        return Invalid(where, absl::StrCat("shares \"", p->name,
                                           "\" with a layer whose trainable "
                                           "differs; tied layers must both be "
                                           "trainable or both frozen"));
      }
      if (node.frozen) p->update = ParamUpdate::kFrozen;
      if (it == param_index_.end()) {
        it =
            param_index_.emplace(p, static_cast<int>(g_->params_.size())).first;
        g_->params_.push_back(p);
        g_->num_parameters_ += p->value.size();
      }
      node.params.push_back(it->second);
    }
    built_[layer.name] = built.get();
    index_[layer.name] = static_cast<int>(g_->nodes_.size());
    *previous = layer.name;
    g_->nodes_.push_back(std::move(node));
    g_->layers_.push_back(std::move(built));
    return absl::OkStatus();
  }

  const ModelSpec& spec_;
  const uint64_t seed_;
  Graph* g_;
  std::map<std::string, int> index_;            // node name -> node
  std::map<std::string, std::string> aliases_;  // block -> its last layer
  std::map<std::string, Layer*> built_;
  std::map<const Param*, int> param_index_;
};

absl::StatusOr<std::unique_ptr<Graph>> Graph::Build(const ModelSpec& spec,
                                                    uint64_t seed) {
  if (!spec.onnx_path.empty()) return BuildOnnx(spec, seed);
  std::unique_ptr<Graph> g(new Graph());
  GraphBuilder builder(spec, seed, g.get());
  RETURN_IF_ERROR(builder.Run());
  RETURN_IF_ERROR(g->Plan());
  if (!spec.init_safetensors.empty()) {
    RETURN_IF_ERROR(g->LoadInitialWeights(spec.init_safetensors,
                                          spec.init_allow_missing));
  }
  return g;
}

absl::StatusOr<std::unique_ptr<Graph>> Graph::BuildOnnx(const ModelSpec& spec,
                                                        uint64_t seed) {
  ASSIGN_OR_RETURN(OnnxImport imported, ImportOnnxModel(spec));
  ModelSpec model = std::move(imported.model);
  const Shape graph = model.single_input_shape();
  model.init_safetensors = spec.init_safetensors;
  model.init_allow_missing = spec.init_allow_missing;
  std::unique_ptr<Graph> g(new Graph());
  GraphBuilder builder(model, seed, g.get());
  RETURN_IF_ERROR(builder.Run());
  RETURN_IF_ERROR(g->Plan());
  // The graph's initializers are every parameter's initial value.
  std::map<std::string, const Tensor*> by_name;
  for (const auto& [name, t] : imported.initial) by_name[name] = &t;
  for (Param* p : g->params_) {
    auto it = by_name.find(p->name);
    if (it == by_name.end() || it->second->shape() != p->value.shape()) {
      return absl::InternalError(
          absl::StrCat("model.onnx: \"", spec.onnx_path,
                       "\" was imported with no initializer ",
                       ShapeToString(p->value.shape()), " for the parameter \"",
                       p->name, "\""));
    }
    p->value.values() = it->second->values();
  }
  std::string inputs;
  if (model.inputs.size() == 1) {
    const std::string& name = model.inputs[0].name;
    inputs = absl::StrCat("input ", name == "input" ? "" : name + " ",
                          ShapeToString(graph),
                          graph.size() == 3 ? " (channels last)" : "");
  } else {
    std::vector<std::string> each;
    for (const ModelInput& in : model.inputs) {
      each.push_back(absl::StrCat(in.name, " ", ShapeToString(in.shape)));
    }
    inputs = absl::StrCat("inputs ", absl::StrJoin(each, ", "));
  }
  g->import_summary_ = absl::StrCat(
      "model: ", spec.onnx_path, ": ", imported.nodes, " ONNX nodes as ",
      g->layers_.size(), " layers, ", inputs, ", ", g->params_.size(),
      " parameter tensors from its initializers");
  if (!spec.init_safetensors.empty()) {
    RETURN_IF_ERROR(
        g->LoadInitialWeights(spec.init_safetensors, spec.init_allow_missing));
  }
  return g;
}

namespace {

// When the file names the parameter `want` under another prefix (a
// Hugging Face BertModel's "embeddings..." for a BertForMaskedLM's
// "bert.embeddings..."), says so; else "".
std::string PrefixHint(const std::string& want,
                       const std::map<std::string, const Tensor*>& by_name) {
  for (const auto& [name, tensor] : by_name) {
    if (name.size() < want.size() && absl::EndsWith(want, "." + name)) {
      return absl::StrCat("; the file has \"", name,
                          "\": its names lack the model's prefix \"",
                          want.substr(0, want.size() - name.size()), "\"");
    }
    if (name.size() > want.size() && absl::EndsWith(name, "." + want)) {
      return absl::StrCat(
          "; the file has \"", name, "\": its names carry a prefix \"",
          name.substr(0, name.size() - want.size()), "\" the model's lack");
    }
  }
  return "";
}

}  // namespace

absl::Status Graph::LoadInitialWeights(const std::string& path,
                                       bool allow_missing) {
  const std::string where = "model.init.safetensors";
  std::vector<SkippedTensor> skipped;
  SafetensorsReadOptions options;
  options.any_dtype = true;
  options.skipped = &skipped;
  absl::StatusOr<std::vector<std::pair<std::string, Tensor>>> tensors =
      ReadSafetensors(path, nullptr, options);
  if (!tensors.ok()) {
    // The user's file, damaged or not safetensors: bad input, as a data
    // file (exit 2), whatever the reader called it.
    return absl::Status(absl::IsNotFound(tensors.status()) ||
                                absl::IsPermissionDenied(tensors.status())
                            ? tensors.status().code()
                            : absl::StatusCode::kInvalidArgument,
                        absl::StrCat(where, ": ", tensors.status().message()));
  }
  std::map<std::string, const Tensor*> by_name;
  for (const auto& [name, t] : *tensors) by_name[name] = &t;
  std::map<std::string, std::string> skipped_dtype;
  for (const SkippedTensor& t : skipped) skipped_dtype[t.name] = t.dtype;
  for (Param* p : params_) {
    auto it = by_name.find(p->name);
    // Before allow_missing: the tensor is there, in a type it cannot be.
    if (it == by_name.end() && skipped_dtype.count(p->name) > 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": \"", path, "\" tensor \"", p->name, "\" is ",
          skipped_dtype[p->name],
          "; a parameter's initial weights must be floating point (F32, "
          "F16, BF16 or F64)"));
    }
    if (it == by_name.end() && allow_missing) {
      init_missing_.push_back(p->name);
      continue;
    }
    if (it == by_name.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": \"", path, "\" has no tensor named \"", p->name,
          "\" (the model's parameter ", ShapeToString(p->value.shape()),
          "); its tensors' names must be the model's parameter names "
          "(model.param_names), or set model.init.allow_missing to keep "
          "the initializers of those it lacks",
          PrefixHint(p->name, by_name)));
    }
    if (it->second->shape() != p->value.shape()) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": \"", path, "\" tensor \"", p->name, "\" is ",
          ShapeToString(it->second->shape()), " but the model's parameter is ",
          ShapeToString(p->value.shape())));
    }
    const std::vector<float>& values = it->second->values();
    for (size_t k = 0; k < values.size(); ++k) {
      if (!std::isfinite(values[k])) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, ": \"", path, "\" tensor \"", p->name, "\" holds ",
            std::isnan(values[k]) ? "NaN" : "infinity", " (element ", k, " of ",
            values.size(), "): training from it would diverge"));
      }
    }
    p->value.values() = values;
    by_name.erase(it);
  }
  if (init_missing_.size() == params_.size() && !params_.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": \"", path, "\" has none of the model's ", params_.size(),
        " parameters (the first is \"", params_[0]->name,
        "\"); its tensors' names must be the model's parameter names "
        "(model.param_names)",
        PrefixHint(params_[0]->name, by_name)));
  }
  init_unused_.clear();
  for (const SkippedTensor& t : skipped) init_unused_.push_back(t.name);
  for (const auto& [name, t] : by_name) init_unused_.push_back(name);
  std::sort(init_unused_.begin(), init_unused_.end());
  return absl::OkStatus();
}

std::string Graph::InitSummary(const std::string& path) const {
  if (path.empty()) return "";
  // At most a few names of each list.
  auto some = [](const std::vector<std::string>& names) {
    std::vector<std::string> shown(
        names.begin(), names.begin() + std::min<size_t>(names.size(), 4));
    std::string out = absl::StrJoin(shown, ", ");
    if (names.size() > shown.size()) {
      absl::StrAppend(&out, " and ", names.size() - shown.size(), " more");
    }
    return out;
  };
  std::string line =
      absl::StrCat("initial weights: ", params_.size() - init_missing_.size(),
                   " of ", params_.size(), " parameter tensors from ", path);
  if (!init_missing_.empty()) {
    absl::StrAppend(&line, "; initialized by their layers: ",
                    some(init_missing_));
  }
  if (!init_unused_.empty()) {
    absl::StrAppend(&line, "; not in the model: ", some(init_unused_));
  }
  return line;
}

bool Graph::output_has_softmax() const {
  const Layer* l = nodes_.back().layer;
  return l != nullptr && l->HasSoftmaxOutput();
}

bool Graph::output_has_sigmoid() const {
  const Layer* l = nodes_.back().layer;
  return l != nullptr && l->HasSigmoidOutput();
}

bool Graph::sums_across_replicas() const {
  for (const GraphNode& node : nodes_) {
    if (node.layer != nullptr && !node.frozen &&
        node.layer->SumsAcrossReplicas()) {
      return true;
    }
  }
  return false;
}

absl::Status Graph::Plan() {
  const int n = static_cast<int>(nodes_.size());
  // A training pass: every layer trains but the frozen ones.
  auto pass = [&](int i) {
    PassContext ctx;
    ctx.training = !nodes_[i].frozen;
    return ctx;
  };
  // Gradient slots: a pass-through layer's output is its input's buffer, so
  // its gradient is its input's too.
  slot_of_.assign(n, -1);
  for (int i = 0; i < n; ++i) {
    const Layer* l = nodes_[i].layer;
    if (l != nullptr && l->PassesThrough(pass(i))) {
      slot_of_[i] = slot_of_[nodes_[i].inputs[0]];
    } else {
      slot_of_[i] = num_slots_++;
      slot_size_.push_back(nodes_[i].size);
    }
  }
  // Which nodes have parameters that learn at or below them.
  std::vector<bool> learns(n, false);
  for (int i = num_inputs_; i < n; ++i) {
    for (int p : nodes_[i].params) {
      learns[i] = learns[i] || params_[p]->update != ParamUpdate::kFrozen;
    }
    for (int k : nodes_[i].inputs) learns[i] = learns[i] || learns[k];
  }
  std::vector<bool> written(num_slots_, false);
  written[slot_of_[n - 1]] = true;  // by the loss
  std::vector<int> last_step(params_.size(), -1);
  for (int i = n - 1; i >= num_inputs_; --i) {
    const GraphNode& node = nodes_[i];
    if (node.layer->PassesThrough(pass(i))) continue;
    if (!learns[i] || !written[slot_of_[i]]) continue;
    BackwardStep step;
    step.node = i;
    for (int k : node.inputs) {
      if (!learns[k]) {
        step.dx_slot.push_back(-1);
        step.dx_add.push_back(false);
        continue;
      }
      const int s = slot_of_[k];
      step.dx_slot.push_back(s);
      step.dx_add.push_back(written[s]);
      written[s] = true;
    }
    for (int p : node.params) {
      if (last_step[p] < 0) step.first_params.push_back(p);
      last_step[p] = static_cast<int>(plan_.size());
    }
    plan_.push_back(std::move(step));
  }
  for (size_t p = 0; p < params_.size(); ++p) {
    if (last_step[p] < 0) {
      untouched_.push_back(static_cast<int>(p));
    } else {
      plan_[last_step[p]].ready_params.push_back(static_cast<int>(p));
    }
  }
  // Within a step, report in parameter order (kernel before bias), as the
  // executors always have.
  for (BackwardStep& s : plan_) {
    std::sort(s.ready_params.begin(), s.ready_params.end());
  }
  return absl::OkStatus();
}

}  // namespace lockstep
