// The job file's sections: model (with its layers), optimizer, learning-rate
// schedule and data. The schema they check is documented in job_spec.cc.
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/job_spec_internal.h"
#include "core/status_macros.h"

namespace lockstep {
namespace job_spec_internal {
namespace {

absl::Status ParseLayer(const Json& v, const std::string& path,
                        LayerSpec* layer) {
  RETURN_IF_ERROR(Reader::CheckObject(v, path));
  Reader r(v, path);
  RETURN_IF_ERROR(r.Require("type"));
  RETURN_IF_ERROR(r.Enum("type", "layer type", LayerTypes(), &layer->type));
  const std::string type = NameOf(LayerTypes(), layer->type);
  Keys allowed = {"type", "name"};
  switch (layer->type) {
    case LayerType::kDense:
      allowed.insert(allowed.end(), {"units", "activation", "use_bias"});
      break;
    case LayerType::kConv2D:
      allowed.insert(allowed.end(), {"filters", "kernel_size", "strides",
                                     "padding", "activation", "use_bias"});
      break;
    case LayerType::kMaxPool2D:
      allowed.insert(allowed.end(), {"pool_size", "strides", "padding"});
      break;
    case LayerType::kFlatten:
      break;
    case LayerType::kDropout:
      allowed.insert(allowed.end(), {"rate"});
      break;
  }
  const Keys all = {"units",   "activation",  "use_bias",
                    "filters", "kernel_size", "strides",
                    "padding", "pool_size",   "rate"};
  RETURN_IF_ERROR(
      r.CheckKeys(allowed, all, absl::StrCat("a ", type, " layer")));
  if (r.Has("name")) {
    RETURN_IF_ERROR(r.String("name", &layer->name));
    RETURN_IF_ERROR(CheckName(layer->name, r.At("name")));
  }
  const std::string why = absl::StrCat("a ", type, " layer");
  switch (layer->type) {
    case LayerType::kDense:
      RETURN_IF_ERROR(r.Require("units", why));
      RETURN_IF_ERROR(r.Int("units", 1, &layer->units));
      break;
    case LayerType::kConv2D:
      RETURN_IF_ERROR(r.Require("filters", why));
      RETURN_IF_ERROR(r.Int("filters", 1, &layer->filters));
      RETURN_IF_ERROR(r.Require("kernel_size", why));
      RETURN_IF_ERROR(
          r.Pair("kernel_size", &layer->kernel_h, &layer->kernel_w));
      layer->stride_h = layer->stride_w = 1;
      RETURN_IF_ERROR(r.Pair("strides", &layer->stride_h, &layer->stride_w));
      break;
    case LayerType::kMaxPool2D:
      RETURN_IF_ERROR(r.Pair("pool_size", &layer->pool_h, &layer->pool_w));
      layer->stride_h = layer->pool_h;  // Keras: strides default to pool_size
      layer->stride_w = layer->pool_w;
      RETURN_IF_ERROR(r.Pair("strides", &layer->stride_h, &layer->stride_w));
      break;
    case LayerType::kFlatten:
      break;
    case LayerType::kDropout:
      RETURN_IF_ERROR(r.Require("rate", why));
      RETURN_IF_ERROR(r.Number("rate", kUnitOpen, &layer->rate));
      break;
  }
  RETURN_IF_ERROR(r.Enum("padding", "padding", Paddings(), &layer->padding));
  RETURN_IF_ERROR(
      r.Enum("activation", "activation", Activations(), &layer->activation));
  RETURN_IF_ERROR(r.Bool("use_bias", &layer->use_bias));
  return absl::OkStatus();
}

// Unnamed layers get Keras-style names: dense, dense_1, ... skipping names
// the job file already uses.
void NameLayers(std::vector<LayerSpec>* layers) {
  std::set<std::string> used;
  for (const LayerSpec& l : *layers) {
    if (!l.name.empty()) used.insert(l.name);
  }
  std::map<std::string, int> next;
  for (LayerSpec& l : *layers) {
    if (!l.name.empty()) continue;
    // Keras' stems (max_pooling2d, not the type name), as the model builder.
    const std::string base = l.type == LayerType::kMaxPool2D
                                 ? "max_pooling2d"
                                 : NameOf(LayerTypes(), l.type);
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

}  // namespace

absl::Status ParseModel(const Json& v, ModelSpec* model) {
  RETURN_IF_ERROR(Reader::CheckObject(v, "model"));
  Reader r(v, "model");
  RETURN_IF_ERROR(r.CheckKeys({"input_shape", "layers"}));
  RETURN_IF_ERROR(r.Require("input_shape"));
  const Json& shape = r.Get("input_shape");
  if (!shape.is_array() || shape.empty()) {
    return Bad(r.At("input_shape"),
               absl::StrCat("must be a non-empty array of integers >= 1, got ",
                            Got(shape)));
  }
  for (size_t i = 0; i < shape.size(); ++i) {
    int64_t d = 0;
    RETURN_IF_ERROR(
        IntValue(shape[i], Index(r.At("input_shape"), i), 1, kMaxInt, &d));
    model->input_shape.push_back(d);
  }
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
    RETURN_IF_ERROR(ParseLayer(layers[i], path, &layer));
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
  NameLayers(&model->layers);
  return absl::OkStatus();
}

absl::Status ParseOptimizer(const Json& v, OptimizerSpec* opt) {
  RETURN_IF_ERROR(Reader::CheckObject(v, "optimizer"));
  Reader r(v, "optimizer");
  const Keys all = {"type",     "learning_rate", "weight_decay", "momentum",
                    "nesterov", "beta_1",        "beta_2",       "epsilon"};
  RETURN_IF_ERROR(r.CheckKeys(all));
  RETURN_IF_ERROR(r.Require("type"));
  RETURN_IF_ERROR(
      r.Enum("type", "optimizer type", OptimizerTypes(), &opt->type));
  const bool sgd = opt->type == OptimizerType::kSgd;
  Keys allowed = {"type", "learning_rate", "weight_decay"};
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
  return absl::OkStatus();
}

absl::Status ParseSchedule(const Json& v, ScheduleSpec* s) {
  RETURN_IF_ERROR(Reader::CheckObject(v, "lr_schedule"));
  Reader r(v, "lr_schedule");
  const Keys all = {
      "type",        "warmup_steps",      "unit", "boundaries", "values",
      "decay_steps", "end_learning_rate", "power"};
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

absl::Status ParseData(const Json& v, absl::string_view base_dir, DataSpec* d) {
  RETURN_IF_ERROR(Reader::CheckObject(v, "data"));
  Reader r(v, "data");
  const Keys idx = {"train_images", "train_labels", "test_images",
                    "test_labels"};
  const Keys csv = {"train_path", "test_path", "header"};
  const Keys synthetic = {"train_samples", "test_samples", "seed"};
  Keys all = {"format", "scale", "shuffle", "num_classes"};
  for (const Keys* k : {&idx, &csv, &synthetic}) {
    all.insert(all.end(), k->begin(), k->end());
  }
  RETURN_IF_ERROR(r.CheckKeys(all));
  RETURN_IF_ERROR(r.Require("format"));
  RETURN_IF_ERROR(r.Enum("format", "data format", DataFormats(), &d->format));
  const std::string variant =
      absl::StrCat("format \"", NameOf(DataFormats(), d->format), "\"");
  Keys allowed = {"format", "scale", "shuffle", "num_classes"};
  const Keys& own = d->format == DataFormat::kMnistIdx ? idx
                    : d->format == DataFormat::kCsv    ? csv
                                                       : synthetic;
  allowed.insert(allowed.end(), own.begin(), own.end());
  RETURN_IF_ERROR(r.CheckKeys(allowed, all, variant));
  switch (d->format) {
    case DataFormat::kMnistIdx: {
      std::string* out[] = {&d->train_images, &d->train_labels, &d->test_images,
                            &d->test_labels};
      for (size_t i = 0; i < idx.size(); ++i) {
        RETURN_IF_ERROR(r.Require(idx[i].c_str(), variant));
        RETURN_IF_ERROR(r.Path(idx[i].c_str(), base_dir, out[i]));
      }
      break;
    }
    case DataFormat::kCsv:
      RETURN_IF_ERROR(r.Require("train_path", variant));
      RETURN_IF_ERROR(r.Path("train_path", base_dir, &d->train_path));
      RETURN_IF_ERROR(r.Require("test_path", variant));
      RETURN_IF_ERROR(r.Path("test_path", base_dir, &d->test_path));
      RETURN_IF_ERROR(r.Bool("header", &d->csv_header));
      break;
    case DataFormat::kSynthetic:
      RETURN_IF_ERROR(r.Int("train_samples", 1, &d->synthetic_train));
      RETURN_IF_ERROR(r.Int("test_samples", 1, &d->synthetic_test));
      RETURN_IF_ERROR(r.Uint("seed", &d->synthetic_seed));
      break;
  }
  RETURN_IF_ERROR(r.Number("scale", kPositive, &d->scale));
  RETURN_IF_ERROR(r.Bool("shuffle", &d->shuffle));
  RETURN_IF_ERROR(r.Int("num_classes", 1, &d->num_classes));
  return absl::OkStatus();
}

}  // namespace job_spec_internal
}  // namespace lockstep
