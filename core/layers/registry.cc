// The layer type table and the job file's layer objects.
#include "core/layers/registry.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "core/json_util.h"

namespace lockstep {
namespace {

using spec_reader::Bad;
using spec_reader::CheckName;
using spec_reader::Got;
using spec_reader::Index;
using spec_reader::Json;
using spec_reader::Keys;
using spec_reader::Reader;

std::map<std::string, LayerTypeInfo, std::less<>>& Table() {
  static auto* t = new std::map<std::string, LayerTypeInfo, std::less<>>();
  return *t;
}

// Every type's own keys, for "unknown field for a dense layer".
Keys AllKeys() {
  std::set<std::string> all;
  for (const auto& [type, info] : Table()) {
    all.insert(info.keys.begin(), info.keys.end());
  }
  return Keys(all.begin(), all.end());
}

std::string Joined(absl::string_view name, absl::string_view keras,
                   absl::string_view torch, ParamNaming naming) {
  return naming == ParamNaming::kTorch ? absl::StrCat(name, ".", torch)
                                       : absl::StrCat(name, "/", keras);
}

}  // namespace

const spec_reader::Keys& CommonLayerKeys() {
  static const Keys* k = new Keys{"type", "name", "inputs", "trainable"};
  return *k;
}

absl::Status LayerBuildContext::Error(absl::string_view msg) const {
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", msg));
}

std::string LayerBuildContext::ParamName(absl::string_view keras,
                                         absl::string_view torch) const {
  return Joined(name, keras, torch, naming);
}

std::string BlockContext::Sub(absl::string_view keras,
                              absl::string_view torch) const {
  return Joined(name, keras, torch, naming);
}

bool RegisterLayerType(LayerTypeInfo info) {
  const std::string type = info.type;
  Table().emplace(type, std::move(info));
  return true;
}

const LayerTypeInfo* FindLayerType(absl::string_view type) {
  auto it = Table().find(type);
  return it == Table().end() ? nullptr : &it->second;
}

std::vector<std::string> LayerTypeNames() {
  std::vector<std::string> names;
  for (const auto& [type, info] : Table()) {
    if (!info.internal) names.push_back(type);
  }
  return names;
}

absl::Status ParseLayerSpec(const Json& v, const std::string& path,
                            LayerSpec* out) {
  RETURN_IF_ERROR(Reader::CheckObject(v, path));
  Reader r(v, path);
  RETURN_IF_ERROR(r.Require("type"));
  const Json& t = r.Get("type");
  if (!t.is_string()) {
    return Bad(r.At("type"), absl::StrCat("must be a string, got ", Got(t)));
  }
  const LayerTypeInfo* info = FindLayerType(t.get<std::string>());
  if (info == nullptr || info->internal) {
    return Bad(r.At("type"),
               absl::StrCat("unknown layer type ", Got(t), "; expected one of ",
                            absl::StrJoin(LayerTypeNames(), ", ")));
  }
  Keys allowed = CommonLayerKeys();
  allowed.insert(allowed.end(), info->keys.begin(), info->keys.end());
  RETURN_IF_ERROR(r.CheckKeys(allowed, AllKeys(),
                              absl::StrCat("a ", info->type, " layer")));
  LayerSpec layer;
  layer.type = info->type;
  if (r.Has("name")) {
    RETURN_IF_ERROR(r.String("name", &layer.name));
    RETURN_IF_ERROR(CheckName(layer.name, r.At("name")));
  }
  const std::string want =
      info->max_inputs < 0 ? absl::StrCat("at least ", info->min_inputs)
      : info->min_inputs == info->max_inputs
          ? absl::StrCat(info->min_inputs)
          : absl::StrCat(info->min_inputs, " to ", info->max_inputs);
  if (r.Has("inputs")) {
    RETURN_IF_ERROR(r.Strings("inputs", &layer.inputs));
    const int n = static_cast<int>(layer.inputs.size());
    if (n < info->min_inputs ||
        (info->max_inputs >= 0 && n > info->max_inputs)) {
      return Bad(r.At("inputs"),
                 absl::StrCat("a ", info->type, " layer takes ", want, " input",
                              want == "1" ? "" : "s", ", got ", n));
    }
  } else if (info->min_inputs > 1) {
    return Bad(r.At("inputs"),
               absl::StrCat("required for a ", info->type, " layer (it takes ",
                            want, " inputs)"));
  }
  RETURN_IF_ERROR(r.Bool("trainable", &layer.trainable));
  Json config = Json::object();
  RETURN_IF_ERROR(info->parse(r, &config));
  layer.config = DumpJson(config);
  *out = std::move(layer);
  return absl::OkStatus();
}

LayerSpec SubLayer(const std::string& type, const std::string& name,
                   std::vector<std::string> inputs, const Json& config) {
  LayerSpec l;
  l.type = type;
  l.name = name;
  l.inputs = std::move(inputs);
  l.config = DumpJson(config);
  return l;
}

Json LayerSpecToJson(const LayerSpec& layer) {
  Json j;
  j["type"] = layer.type;
  j["name"] = layer.name;
  if (!layer.inputs.empty()) j["inputs"] = layer.inputs;
  if (!layer.trainable) j["trainable"] = false;
  absl::StatusOr<Json> config = ParseOrderedJson(layer.config, "layer config");
  if (config.ok() && config->is_object()) {
    for (auto it = config->begin(); it != config->end(); ++it) {
      j[it.key()] = it.value();
    }
  }
  return j;
}

absl::StatusOr<LayerSpec> LayerFromJson(absl::string_view json) {
  ASSIGN_OR_RETURN(Json v, ParseOrderedJson(json, "layer"));
  LayerSpec layer;
  RETURN_IF_ERROR(ParseLayerSpec(v, "layer", &layer));
  return layer;
}

void AssignDefaultNames(std::vector<LayerSpec>* layers) {
  std::set<std::string> used;
  for (const LayerSpec& l : *layers) {
    if (!l.name.empty()) used.insert(l.name);
  }
  std::map<std::string, int> next;
  for (LayerSpec& l : *layers) {
    if (!l.name.empty()) continue;
    const LayerTypeInfo* info = FindLayerType(l.type);
    const std::string base = info != nullptr ? info->keras_stem : l.type;
    int& n = next[base];
    std::string name;
    do {
      name = n == 0 ? base : absl::StrCat(base, "_", n);
      ++n;
    } while (used.count(name) > 0);
    used.insert(name);
    l.name = name;
  }
}

}  // namespace lockstep
