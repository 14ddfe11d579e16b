// Job file parsing and validation: JSON in, a trusted JobSpec out, with every
// error naming the JSON path of the offending field.
//
// Schema (README "Job file"); "?" marks an optional field and its default.
//
// name                    string, required, [A-Za-z0-9_.-]{1,64}, not . or ..
// seed                    integer >= 0 ? 0
// model                   object, required
//   input_shape           array of integers >= 1, required, non-empty
//   layers                array of layer objects, required, non-empty
//     type                required: dense | conv2d | max_pool2d | flatten |
//                         dropout
//     name                string ? "<stem>", "<stem>_1", ... per type, Keras
//                         stems (dense, conv2d, max_pooling2d, flatten,
//                         dropout), skipping names given explicitly;
//                         [A-Za-z0-9_.-]{1,64}, unique within the model
//     dense:      units (integer >= 1, required), activation ? linear,
//                 use_bias ? true
//     conv2d:     filters (integer >= 1, required), kernel_size (integer >= 1
//                 or [h, w], required), strides (same form) ? 1,
//                 padding (valid | same) ? valid, activation ? linear,
//                 use_bias ? true
//     max_pool2d: pool_size (integer >= 1 or [h, w]) ? 2, strides (same form)
//                 ? pool_size, padding (valid | same) ? valid
//     flatten:    nothing else
//     dropout:    rate (number in [0, 1), required)
//     activation: relu | tanh | sigmoid | softmax | linear
// loss                    sparse_categorical_crossentropy | mse
//                         ? sparse_categorical_crossentropy
// optimizer               object ? {"type": "adam"}
//   type                  required: sgd | adam | adamw
//   learning_rate         number > 0 ? 0.001
//   weight_decay          number >= 0 ? 0 (adamw: 0.004); decoupled, as Keras
//   sgd:        momentum (number in [0, 1]) ? 0, nesterov (bool) ? false
//   adam/adamw: beta_1, beta_2 (numbers in [0, 1)) ? 0.9, 0.999;
//               epsilon (number > 0) ? 1e-07
// lr_schedule             object ? {"type": "constant"}
//   type                  required: constant | piecewise | polynomial
//   warmup_steps          integer >= 0 ? 0 (lr * min(1, (step + 1) / warmup))
//   piecewise:  unit (epoch | step) ? epoch; boundaries (numbers >= 0,
//               strictly increasing, required); values (numbers > 0, exactly
//               one more than boundaries, required). The values replace
//               optimizer.learning_rate.
//   polynomial: decay_steps (integer >= 1, required), end_learning_rate
//               (number >= 0) ? 0.0001, power (number > 0) ? 1
// data                    object, required
//   format                required: mnist_idx | csv | synthetic
//   scale                 number > 0 ? 1 (features are divided by it)
//   shuffle               bool ? true
//   num_classes           integer >= 1 ? 10
//   mnist_idx:  train_images, train_labels, test_images, test_labels
//               (non-empty strings, required; .gz or raw)
//   csv:        train_path, test_path (non-empty strings, required),
//               header (bool) ? false
//   synthetic:  train_samples (integer >= 1) ? 8192, test_samples (integer
//               >= 1) ? 2048, seed (integer >= 0) ? 1234
//   Relative paths are resolved against the job file's folder.
// batch_size_per_replica  integer >= 1 ? 32
// epochs | steps          integer >= 1; exactly one of the two is required
// checkpoint              object ? {}
//   every_steps           integer >= 0 ? 0 (0: at the end of each epoch)
//   keep                  integer >= 1 ? 3
// summary                 object ? {}
//   every_steps           integer >= 1 ? 100
// cluster                 object ? {}
//   workers               integer >= 1 ? 1
//   replicas_per_worker   integer >= 1 ? 1
//   collective            ring | nccl | auto ? ring
//
// Unknown fields are rejected everywhere, as are fields that belong to
// another variant (`optimizer.momentum: unknown field for optimizer type
// "adam"`).
#include "core/job_spec.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <limits>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/json_util.h"
#include "core/status_macros.h"

namespace lockstep {
namespace {

using Json = nlohmann::ordered_json;
using Keys = std::vector<std::string>;

constexpr int64_t kMaxInt = std::numeric_limits<int64_t>::max();

template <typename T>
using Table = std::vector<std::pair<const char*, T>>;

const Table<Activation>& Activations() {
  static const auto* t =
      new Table<Activation>{{"relu", Activation::kRelu},
                            {"tanh", Activation::kTanh},
                            {"sigmoid", Activation::kSigmoid},
                            {"softmax", Activation::kSoftmax},
                            {"linear", Activation::kLinear}};
  return *t;
}
const Table<LayerType>& LayerTypes() {
  static const auto* t =
      new Table<LayerType>{{"dense", LayerType::kDense},
                           {"conv2d", LayerType::kConv2D},
                           {"max_pool2d", LayerType::kMaxPool2D},
                           {"flatten", LayerType::kFlatten},
                           {"dropout", LayerType::kDropout}};
  return *t;
}
const Table<Padding>& Paddings() {
  static const auto* t =
      new Table<Padding>{{"valid", Padding::kValid}, {"same", Padding::kSame}};
  return *t;
}
const Table<LossType>& Losses() {
  static const auto* t =
      new Table<LossType>{{"sparse_categorical_crossentropy",
                           LossType::kSparseCategoricalCrossentropy},
                          {"mse", LossType::kMse}};
  return *t;
}
const Table<OptimizerType>& OptimizerTypes() {
  static const auto* t =
      new Table<OptimizerType>{{"sgd", OptimizerType::kSgd},
                               {"adam", OptimizerType::kAdam},
                               {"adamw", OptimizerType::kAdamW}};
  return *t;
}
const Table<ScheduleType>& ScheduleTypes() {
  static const auto* t =
      new Table<ScheduleType>{{"constant", ScheduleType::kConstant},
                              {"piecewise", ScheduleType::kPiecewise},
                              {"polynomial", ScheduleType::kPolynomial}};
  return *t;
}
const Table<ScheduleUnit>& ScheduleUnits() {
  static const auto* t = new Table<ScheduleUnit>{
      {"epoch", ScheduleUnit::kEpoch}, {"step", ScheduleUnit::kStep}};
  return *t;
}
const Table<DataFormat>& DataFormats() {
  static const auto* t =
      new Table<DataFormat>{{"mnist_idx", DataFormat::kMnistIdx},
                            {"csv", DataFormat::kCsv},
                            {"synthetic", DataFormat::kSynthetic}};
  return *t;
}
const Table<Collective>& Collectives() {
  static const auto* t = new Table<Collective>{{"ring", Collective::kRing},
                                               {"nccl", Collective::kNccl},
                                               {"auto", Collective::kAuto}};
  return *t;
}

template <typename T>
std::string NameOf(const Table<T>& table, T value) {
  for (const auto& [name, v] : table) {
    if (v == value) return name;
  }
  return "?";
}

// The offending value as JSON text, shortened so a message stays one line.
std::string Got(const Json& v) {
  std::string s = DumpJson(v);
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

absl::Status Bad(const std::string& path, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", problem));
}

std::string Child(const std::string& path, absl::string_view key) {
  return path.empty() ? std::string(key) : absl::StrCat(path, ".", key);
}

std::string Index(const std::string& path, size_t i) {
  return absl::StrCat(path, "[", i, "]");
}

bool Contains(const Keys& keys, const std::string& k) {
  for (const std::string& x : keys) {
    if (x == k) return true;
  }
  return false;
}

// What a number must satisfy, and how the error says it.
struct Constraint {
  const char* text;
  bool (*ok)(double);
};
const Constraint kPositive{"must be > 0", [](double d) { return d > 0; }};
const Constraint kNonNegative{"must be >= 0", [](double d) { return d >= 0; }};
const Constraint kUnitOpen{"must be in [0, 1)",
                           [](double d) { return d >= 0 && d < 1; }};
const Constraint kUnitClosed{"must be in [0, 1]",
                             [](double d) { return d >= 0 && d <= 1; }};

absl::Status IntValue(const Json& v, const std::string& path, int64_t min,
                      int64_t max, int64_t* out) {
  bool ok = v.is_number_integer();
  int64_t x = 0;
  if (ok && v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    ok = u <= static_cast<uint64_t>(kMaxInt);
    x = static_cast<int64_t>(u);
  } else if (ok) {
    x = v.get<int64_t>();
  }
  if (!ok || x < min || x > max) {
    std::string want =
        max == kMaxInt
            ? absl::StrCat("must be an integer >= ", min)
            : absl::StrCat("must be an integer in [", min, ", ", max, "]");
    return Bad(path, absl::StrCat(want, ", got ", Got(v)));
  }
  *out = x;
  return absl::OkStatus();
}

absl::Status NumberValue(const Json& v, const std::string& path,
                         const Constraint& c, double* out) {
  if (!v.is_number()) {
    return Bad(path, absl::StrCat("must be a number, got ", Got(v)));
  }
  double d = v.get<double>();
  if (!c.ok(d)) return Bad(path, absl::StrCat(c.text, ", got ", Got(v)));
  *out = d;
  return absl::OkStatus();
}

// "kernel_size": 3 or [3, 5].
absl::Status PairValue(const Json& v, const std::string& path, int64_t* h,
                       int64_t* w) {
  auto fine = [](const Json& x) {
    if (x.is_number_unsigned()) {
      const uint64_t u = x.get<uint64_t>();
      return u >= 1 && u <= static_cast<uint64_t>(kMaxInt);
    }
    return x.is_number_integer() && x.get<int64_t>() >= 1;
  };
  if (fine(v)) {
    *h = *w = v.get<int64_t>();
    return absl::OkStatus();
  }
  if (v.is_array() && v.size() == 2 && fine(v[0]) && fine(v[1])) {
    *h = v[0].get<int64_t>();
    *w = v[1].get<int64_t>();
    return absl::OkStatus();
  }
  return Bad(path, absl::StrCat("must be an integer >= 1 or a pair [h, w] of "
                                "them, got ",
                                Got(v)));
}

// One JSON object under validation; remembers its path for messages.
class Reader {
 public:
  Reader(const Json& obj, std::string path)
      : obj_(obj), path_(std::move(path)) {}

  static absl::Status CheckObject(const Json& v, const std::string& path) {
    if (v.is_object()) return absl::OkStatus();
    return Bad(path, absl::StrCat("must be an object, got ", Got(v)));
  }

  const std::string& path() const { return path_; }
  std::string At(absl::string_view key) const { return Child(path_, key); }
  bool Has(const char* key) const { return obj_.contains(key); }
  const Json& Get(const char* key) const { return obj_.at(key); }

  // Rejects keys outside `allowed`; keys in `elsewhere` belong to another
  // variant, which the message says (`unknown field for <variant>`).
  absl::Status CheckKeys(const Keys& allowed, const Keys& elsewhere = {},
                         absl::string_view variant = "") const {
    for (auto it = obj_.begin(); it != obj_.end(); ++it) {
      if (Contains(allowed, it.key())) continue;
      if (Contains(elsewhere, it.key())) {
        return Bad(At(it.key()), absl::StrCat("unknown field for ", variant));
      }
      return Bad(At(it.key()), "unknown field");
    }
    return absl::OkStatus();
  }

  absl::Status Require(const char* key, absl::string_view why = "") const {
    if (Has(key)) return absl::OkStatus();
    return Bad(At(key), why.empty() ? std::string("required")
                                    : absl::StrCat("required for ", why));
  }

  // The readers below leave *out alone when the key is absent.
  absl::Status Int(const char* key, int64_t min, int64_t* out,
                   int64_t max = kMaxInt) const {
    if (!Has(key)) return absl::OkStatus();
    return IntValue(Get(key), At(key), min, max, out);
  }
  absl::Status Uint(const char* key, uint64_t* out) const {
    if (!Has(key)) return absl::OkStatus();
    const Json& v = Get(key);
    if (v.is_number_unsigned() ||
        (v.is_number_integer() && v.get<int64_t>() >= 0)) {
      *out = v.get<uint64_t>();
      return absl::OkStatus();
    }
    return Bad(At(key),
               absl::StrCat("must be a non-negative integer, got ", Got(v)));
  }
  absl::Status Number(const char* key, const Constraint& c, double* out) const {
    if (!Has(key)) return absl::OkStatus();
    return NumberValue(Get(key), At(key), c, out);
  }
  absl::Status Bool(const char* key, bool* out) const {
    if (!Has(key)) return absl::OkStatus();
    const Json& v = Get(key);
    if (!v.is_boolean()) {
      return Bad(At(key), absl::StrCat("must be true or false, got ", Got(v)));
    }
    *out = v.get<bool>();
    return absl::OkStatus();
  }
  absl::Status String(const char* key, std::string* out) const {
    if (!Has(key)) return absl::OkStatus();
    const Json& v = Get(key);
    if (!v.is_string()) {
      return Bad(At(key), absl::StrCat("must be a string, got ", Got(v)));
    }
    *out = v.get<std::string>();
    return absl::OkStatus();
  }
  absl::Status Path(const char* key, absl::string_view base_dir,
                    std::string* out) const {
    if (!Has(key)) return absl::OkStatus();
    std::string s;
    RETURN_IF_ERROR(String(key, &s));
    if (s.empty()) return Bad(At(key), "must not be empty");
    if (s[0] != '/' && !base_dir.empty()) {
      s = absl::StrCat(base_dir, base_dir.back() == '/' ? "" : "/", s);
    }
    *out = std::move(s);
    return absl::OkStatus();
  }
  template <typename T>
  absl::Status Enum(const char* key, absl::string_view what,
                    const Table<T>& table, T* out) const {
    if (!Has(key)) return absl::OkStatus();
    const Json& v = Get(key);
    if (!v.is_string()) {
      return Bad(At(key), absl::StrCat("must be a string, got ", Got(v)));
    }
    const std::string s = v.get<std::string>();
    std::vector<std::string> names;
    for (const auto& [name, value] : table) {
      if (s == name) {
        *out = value;
        return absl::OkStatus();
      }
      names.push_back(name);
    }
    return Bad(At(key),
               absl::StrCat("unknown ", what, " ", Got(v), "; expected one of ",
                            absl::StrJoin(names, ", ")));
  }
  absl::Status Pair(const char* key, int64_t* h, int64_t* w) const {
    if (!Has(key)) return absl::OkStatus();
    return PairValue(Get(key), At(key), h, w);
  }

 private:
  const Json& obj_;
  std::string path_;
};

// Names a folder or a checkpoint key, so it must be a plain file name.
absl::Status CheckName(const std::string& name, const std::string& path) {
  bool ok = !name.empty() && name.size() <= 64;
  for (char c : name) {
    ok = ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-');
  }
  if (!ok) {
    return Bad(path, absl::StrCat("must match [A-Za-z0-9_.-]{1,64}, got ",
                                  Got(Json(name))));
  }
  if (name == "." || name == "..") {
    return Bad(path, absl::StrCat("must not be \".\" or \"..\", got ",
                                  Got(Json(name))));
  }
  return absl::OkStatus();
}

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

absl::Status ParseRoot(const Json& v, absl::string_view base_dir,
                       JobSpec* spec) {
  RETURN_IF_ERROR(Reader::CheckObject(v, "job"));
  Reader r(v, "");
  RETURN_IF_ERROR(
      r.CheckKeys({"name", "seed", "model", "loss", "optimizer", "lr_schedule",
                   "data", "batch_size_per_replica", "epochs", "steps",
                   "checkpoint", "summary", "cluster"}));
  RETURN_IF_ERROR(r.Require("name"));
  RETURN_IF_ERROR(r.String("name", &spec->name));
  RETURN_IF_ERROR(CheckName(spec->name, "name"));
  RETURN_IF_ERROR(r.Uint("seed", &spec->seed));
  RETURN_IF_ERROR(r.Require("model"));
  RETURN_IF_ERROR(ParseModel(r.Get("model"), &spec->model));
  RETURN_IF_ERROR(r.Enum("loss", "loss", Losses(), &spec->loss));
  if (r.Has("optimizer")) {
    RETURN_IF_ERROR(ParseOptimizer(r.Get("optimizer"), &spec->optimizer));
  }
  if (r.Has("lr_schedule")) {
    RETURN_IF_ERROR(ParseSchedule(r.Get("lr_schedule"), &spec->lr_schedule));
  }
  RETURN_IF_ERROR(r.Require("data"));
  RETURN_IF_ERROR(ParseData(r.Get("data"), base_dir, &spec->data));
  RETURN_IF_ERROR(
      r.Int("batch_size_per_replica", 1, &spec->batch_size_per_replica));
  if (r.Has("epochs") == r.Has("steps")) {
    return Bad("epochs", "give exactly one of epochs or steps");
  }
  RETURN_IF_ERROR(r.Int("epochs", 1, &spec->epochs));
  RETURN_IF_ERROR(r.Int("steps", 1, &spec->steps));

  if (r.Has("checkpoint")) {
    RETURN_IF_ERROR(Reader::CheckObject(r.Get("checkpoint"), "checkpoint"));
    Reader c(r.Get("checkpoint"), "checkpoint");
    RETURN_IF_ERROR(c.CheckKeys({"every_steps", "keep"}));
    RETURN_IF_ERROR(c.Int("every_steps", 0, &spec->checkpoint.every_steps));
    RETURN_IF_ERROR(c.Int("keep", 1, &spec->checkpoint.keep));
  }
  if (r.Has("summary")) {
    RETURN_IF_ERROR(Reader::CheckObject(r.Get("summary"), "summary"));
    Reader s(r.Get("summary"), "summary");
    RETURN_IF_ERROR(s.CheckKeys({"every_steps"}));
    RETURN_IF_ERROR(s.Int("every_steps", 1, &spec->summary.every_steps));
  }
  if (r.Has("cluster")) {
    RETURN_IF_ERROR(Reader::CheckObject(r.Get("cluster"), "cluster"));
    Reader c(r.Get("cluster"), "cluster");
    RETURN_IF_ERROR(
        c.CheckKeys({"workers", "replicas_per_worker", "collective"}));
    RETURN_IF_ERROR(c.Int("workers", 1, &spec->cluster.workers));
    RETURN_IF_ERROR(
        c.Int("replicas_per_worker", 1, &spec->cluster.replicas_per_worker));
    RETURN_IF_ERROR(c.Enum("collective", "collective", Collectives(),
                           &spec->cluster.collective));
  }
  return absl::OkStatus();
}

absl::StatusOr<JobSpec> ParseNamed(absl::string_view json_text,
                                   absl::string_view base_dir,
                                   absl::string_view source) {
  ASSIGN_OR_RETURN(Json doc, ParseOrderedJson(json_text, source));
  JobSpec spec;
  try {
    RETURN_IF_ERROR(ParseRoot(doc, base_dir, &spec));
  } catch (const std::exception& e) {
    // Every access above is type-checked first; this is a last line only.
    return absl::InternalError(
        absl::StrCat(source, ": unexpected error while reading: ", e.what()));
  }
  return spec;
}

Json LayerToJson(const LayerSpec& l) {
  Json j;
  j["type"] = NameOf(LayerTypes(), l.type);
  j["name"] = l.name;
  switch (l.type) {
    case LayerType::kDense:
      j["units"] = l.units;
      j["activation"] = NameOf(Activations(), l.activation);
      j["use_bias"] = l.use_bias;
      break;
    case LayerType::kConv2D:
      j["filters"] = l.filters;
      j["kernel_size"] = {l.kernel_h, l.kernel_w};
      j["strides"] = {l.stride_h, l.stride_w};
      j["padding"] = NameOf(Paddings(), l.padding);
      j["activation"] = NameOf(Activations(), l.activation);
      j["use_bias"] = l.use_bias;
      break;
    case LayerType::kMaxPool2D:
      j["pool_size"] = {l.pool_h, l.pool_w};
      j["strides"] = {l.stride_h, l.stride_w};
      j["padding"] = NameOf(Paddings(), l.padding);
      break;
    case LayerType::kFlatten:
      break;
    case LayerType::kDropout:
      j["rate"] = l.rate;
      break;
  }
  return j;
}

Json SpecToJson(const JobSpec& s) {
  Json j;
  j["name"] = s.name;
  j["seed"] = s.seed;
  Json layers = Json::array();
  for (const LayerSpec& l : s.model.layers) layers.push_back(LayerToJson(l));
  j["model"] = {{"input_shape", s.model.input_shape}, {"layers", layers}};
  j["loss"] = NameOf(Losses(), s.loss);

  const OptimizerSpec& o = s.optimizer;
  Json opt;
  opt["type"] = NameOf(OptimizerTypes(), o.type);
  opt["learning_rate"] = o.learning_rate;
  if (o.type == OptimizerType::kSgd) {
    opt["momentum"] = o.momentum;
    opt["nesterov"] = o.nesterov;
  } else {
    opt["beta_1"] = o.beta_1;
    opt["beta_2"] = o.beta_2;
    opt["epsilon"] = o.epsilon;
  }
  opt["weight_decay"] = o.weight_decay;
  j["optimizer"] = opt;

  const ScheduleSpec& ls = s.lr_schedule;
  Json sched;
  sched["type"] = NameOf(ScheduleTypes(), ls.type);
  if (ls.type == ScheduleType::kPiecewise) {
    sched["unit"] = NameOf(ScheduleUnits(), ls.unit);
    sched["boundaries"] = ls.boundaries;
    sched["values"] = ls.values;
  } else if (ls.type == ScheduleType::kPolynomial) {
    sched["decay_steps"] = ls.decay_steps;
    sched["end_learning_rate"] = ls.end_learning_rate;
    sched["power"] = ls.power;
  }
  sched["warmup_steps"] = ls.warmup_steps;
  j["lr_schedule"] = sched;

  const DataSpec& d = s.data;
  Json data;
  data["format"] = NameOf(DataFormats(), d.format);
  switch (d.format) {
    case DataFormat::kMnistIdx:
      data["train_images"] = d.train_images;
      data["train_labels"] = d.train_labels;
      data["test_images"] = d.test_images;
      data["test_labels"] = d.test_labels;
      break;
    case DataFormat::kCsv:
      data["train_path"] = d.train_path;
      data["test_path"] = d.test_path;
      data["header"] = d.csv_header;
      break;
    case DataFormat::kSynthetic:
      data["train_samples"] = d.synthetic_train;
      data["test_samples"] = d.synthetic_test;
      data["seed"] = d.synthetic_seed;
      break;
  }
  data["scale"] = d.scale;
  data["shuffle"] = d.shuffle;
  data["num_classes"] = d.num_classes;
  j["data"] = data;

  j["batch_size_per_replica"] = s.batch_size_per_replica;
  if (s.steps > 0) {
    j["steps"] = s.steps;
  } else {
    j["epochs"] = s.epochs;
  }
  j["checkpoint"] = {{"every_steps", s.checkpoint.every_steps},
                     {"keep", s.checkpoint.keep}};
  j["summary"] = {{"every_steps", s.summary.every_steps}};
  j["cluster"] = {{"workers", s.cluster.workers},
                  {"replicas_per_worker", s.cluster.replicas_per_worker},
                  {"collective", NameOf(Collectives(), s.cluster.collective)}};
  return j;
}

absl::StatusOr<std::string> ReadJobFile(const std::string& path) {
  auto fail = [&path](int err) {
    std::string msg =
        absl::StrCat("cannot read job file \"", path, "\": ", strerror(err));
    if (err == ENOENT) return absl::NotFoundError(msg);
    if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(msg);
    return absl::InvalidArgumentError(msg);
  };
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return fail(errno);
  std::string text;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) text.append(buf, n);
  const bool failed = std::ferror(f) != 0;
  const int err = errno;
  std::fclose(f);
  if (failed) return fail(err);
  return text;
}

}  // namespace

bool operator==(const LayerSpec& a, const LayerSpec& b) {
  auto t = [](const LayerSpec& l) {
    return std::tie(l.type, l.name, l.units, l.filters, l.kernel_h, l.kernel_w,
                    l.stride_h, l.stride_w, l.padding, l.pool_h, l.pool_w,
                    l.activation, l.use_bias, l.rate);
  };
  return t(a) == t(b);
}
bool operator==(const ModelSpec& a, const ModelSpec& b) {
  return a.input_shape == b.input_shape && a.layers == b.layers;
}
bool operator==(const OptimizerSpec& a, const OptimizerSpec& b) {
  auto t = [](const OptimizerSpec& o) {
    return std::tie(o.type, o.learning_rate, o.momentum, o.nesterov, o.beta_1,
                    o.beta_2, o.epsilon, o.weight_decay);
  };
  return t(a) == t(b);
}
bool operator==(const ScheduleSpec& a, const ScheduleSpec& b) {
  auto t = [](const ScheduleSpec& s) {
    return std::tie(s.type, s.unit, s.boundaries, s.values, s.decay_steps,
                    s.end_learning_rate, s.power, s.warmup_steps);
  };
  return t(a) == t(b);
}
bool operator==(const DataSpec& a, const DataSpec& b) {
  auto t = [](const DataSpec& d) {
    return std::tie(d.format, d.train_images, d.train_labels, d.test_images,
                    d.test_labels, d.train_path, d.test_path, d.csv_header,
                    d.scale, d.shuffle, d.num_classes, d.synthetic_train,
                    d.synthetic_test, d.synthetic_seed);
  };
  return t(a) == t(b);
}
bool operator==(const CheckpointSpec& a, const CheckpointSpec& b) {
  return a.every_steps == b.every_steps && a.keep == b.keep;
}
bool operator==(const SummarySpec& a, const SummarySpec& b) {
  return a.every_steps == b.every_steps;
}
bool operator==(const ClusterSpec& a, const ClusterSpec& b) {
  return a.workers == b.workers &&
         a.replicas_per_worker == b.replicas_per_worker &&
         a.collective == b.collective;
}
bool operator==(const JobSpec& a, const JobSpec& b) {
  return a.name == b.name && a.seed == b.seed && a.model == b.model &&
         a.loss == b.loss && a.optimizer == b.optimizer &&
         a.lr_schedule == b.lr_schedule && a.data == b.data &&
         a.batch_size_per_replica == b.batch_size_per_replica &&
         a.epochs == b.epochs && a.steps == b.steps &&
         a.checkpoint == b.checkpoint && a.summary == b.summary &&
         a.cluster == b.cluster;
}

absl::StatusOr<JobSpec> ParseJobSpec(absl::string_view json_text,
                                     absl::string_view base_dir) {
  return ParseNamed(json_text, base_dir, "job");
}

absl::StatusOr<JobSpec> LoadJobSpec(const std::string& path,
                                    const std::string& data_dir) {
  ASSIGN_OR_RETURN(std::string text, ReadJobFile(path));
  if (!data_dir.empty()) return ParseNamed(text, data_dir, path);
  const size_t slash = path.rfind('/');
  const std::string base_dir = slash == std::string::npos ? ""
                               : slash == 0               ? "/"
                                            : path.substr(0, slash);
  return ParseNamed(text, base_dir, path);
}

std::string JobSpecToJson(const JobSpec& spec) {
  try {
    return DumpJson(SpecToJson(spec), 2) + "\n";
  } catch (const std::exception&) {
    return "{}\n";  // only allocation failure can get here
  }
}

}  // namespace lockstep
