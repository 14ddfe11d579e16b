// The canonical JSON form of a JobSpec (JobSpecToJson, every default filled
// in) and field-by-field equality, which ParseJobSpec(JobSpecToJson(s)) == s.
#include <string>
#include <tuple>

#include "core/job_spec.h"
#include "core/job_spec_internal.h"
#include "core/json_util.h"

namespace lockstep {
namespace {

using job_spec_internal::Activations;
using job_spec_internal::Collectives;
using job_spec_internal::DataFormats;
using job_spec_internal::Json;
using job_spec_internal::LayerTypes;
using job_spec_internal::Losses;
using job_spec_internal::NameOf;
using job_spec_internal::OptimizerTypes;
using job_spec_internal::Paddings;
using job_spec_internal::ScheduleTypes;
using job_spec_internal::ScheduleUnits;

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
  j["cluster"] = {
      {"workers", s.cluster.workers},
      {"replicas_per_worker", s.cluster.replicas_per_worker},
      {"collective", NameOf(Collectives(), s.cluster.collective)},
      {"bucket_kib", s.cluster.bucket_kib},
      {"fingerprint_every_steps", s.cluster.fingerprint_every_steps},
      {"allow_tf32", s.cluster.allow_tf32}};
  j["restart"] = {
      {"max_restarts", s.restart.max_restarts},
      {"backoff_seconds", s.restart.backoff_seconds},
      {"replacement_timeout_seconds", s.restart.replacement_timeout_seconds}};
  return j;
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
         a.collective == b.collective && a.bucket_kib == b.bucket_kib &&
         a.fingerprint_every_steps == b.fingerprint_every_steps &&
         a.allow_tf32 == b.allow_tf32;
}
bool operator==(const RestartSpec& a, const RestartSpec& b) {
  return a.max_restarts == b.max_restarts &&
         a.backoff_seconds == b.backoff_seconds &&
         a.replacement_timeout_seconds == b.replacement_timeout_seconds;
}
bool operator==(const JobSpec& a, const JobSpec& b) {
  return a.name == b.name && a.seed == b.seed && a.model == b.model &&
         a.loss == b.loss && a.optimizer == b.optimizer &&
         a.lr_schedule == b.lr_schedule && a.data == b.data &&
         a.batch_size_per_replica == b.batch_size_per_replica &&
         a.epochs == b.epochs && a.steps == b.steps &&
         a.checkpoint == b.checkpoint && a.summary == b.summary &&
         a.cluster == b.cluster && a.restart == b.restart;
}

std::string JobSpecToJson(const JobSpec& spec) {
  return DumpJson(SpecToJson(spec), 2) + "\n";
}

}  // namespace lockstep
