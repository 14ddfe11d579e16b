// The canonical JSON form of a JobSpec (JobSpecToJson, every default filled
// in) and field-by-field equality, which ParseJobSpec(JobSpecToJson(s)) == s.
#include <string>
#include <tuple>

#include "core/job/job_spec.h"
#include "core/job/job_spec_internal.h"
#include "core/json_util.h"
#include "core/layers/registry.h"

namespace lockstep {
namespace {

using job_spec_internal::Collectives;
using job_spec_internal::Compressions;
using job_spec_internal::Json;
using job_spec_internal::LossTable;
using job_spec_internal::NameOf;
using job_spec_internal::OptimizerTypes;
using job_spec_internal::ParamNamings;
using job_spec_internal::ScheduleTypes;
using job_spec_internal::ScheduleUnits;
using job_spec_internal::ShardModes;

Json SpecToJson(const JobSpec& s) {
  Json j;
  j["name"] = s.name;
  j["seed"] = s.seed;
  j["model"] = job_spec_internal::ModelToJson(s.model);
  j["loss"] = s.loss->name;

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
  // Written only when set, so jobs from before these fields keep their
  // canonical form.
  if (!o.exclude_from_weight_decay.empty()) {
    opt["exclude_from_weight_decay"] = o.exclude_from_weight_decay;
  }
  if (o.global_clipnorm > 0) opt["global_clipnorm"] = o.global_clipnorm;
  if (o.scale_with_replicas) opt["scale_with_replicas"] = true;
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

  j["data"] = DataSpecToJson(s.data);

  j["batch_size_per_replica"] = s.batch_size_per_replica;
  j["gradient_accumulation_steps"] = s.gradient_accumulation_steps;
  if (s.steps > 0) {
    j["steps"] = s.steps;
  } else {
    j["epochs"] = s.epochs;
  }
  j["checkpoint"] = {{"every_steps", s.checkpoint.every_steps},
                     {"keep", s.checkpoint.keep}};
  j["summary"] = {{"every_steps", s.summary.every_steps}};
  j["cluster"] = {
      {"workers", s.elastic() ? Json{{"min", s.cluster.min_workers},
                                      {"max", s.cluster.workers}}
                              : Json(s.cluster.workers)},
      {"replicas_per_worker", s.cluster.replicas_per_worker},
      {"collective", NameOf(Collectives(), s.cluster.collective)},
      {"bucket_kib", s.cluster.bucket_kib},
      {"ring_chunk_kib", s.cluster.ring_chunk_kib},
      {"ring_streams", s.cluster.ring_streams},
      {"compression", NameOf(Compressions(), s.cluster.compression)},
      {"fingerprint_every_steps", s.cluster.fingerprint_every_steps},
      {"ring_checksum", s.cluster.ring_checksum},
      {"allow_tf32", s.cluster.allow_tf32}};
  // Written only when on, as audit: other jobs' canonical JSON is as it was.
  if (s.cluster.shard != ShardMode::kNone) {
    j["cluster"]["shard"] = NameOf(ShardModes(), s.cluster.shard);
    j["cluster"]["copies"] = s.cluster.copies;
  }
  if (s.elastic()) {
    j["cluster"]["start_grace_seconds"] = s.cluster.start_grace_seconds;
    j["cluster"]["rejoin_grace_seconds"] = s.cluster.rejoin_grace_seconds;
  }
  j["restart"] = {
      {"max_restarts", s.restart.max_restarts},
      {"backoff_seconds", s.restart.backoff_seconds},
      {"replacement_timeout_seconds", s.restart.replacement_timeout_seconds}};
  // Written only when on: the canonical JSON of other jobs (and the
  // checkpoints that store it) stays as it was.
  if (s.audit.samples) j["audit"] = {{"samples", true}};
  if (s.precision != Precision::kFp32) {
    j["precision"] = NameOf(job_spec_internal::Precisions(), s.precision);
  }
  return j;
}

}  // namespace

bool operator==(const OptimizerSpec& a, const OptimizerSpec& b) {
  auto t = [](const OptimizerSpec& o) {
    return std::tie(o.type, o.learning_rate, o.momentum, o.nesterov, o.beta_1,
                    o.beta_2, o.epsilon, o.weight_decay,
                    o.exclude_from_weight_decay, o.global_clipnorm,
                    o.scale_with_replicas);
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
bool operator==(const CheckpointSpec& a, const CheckpointSpec& b) {
  return a.every_steps == b.every_steps && a.keep == b.keep;
}
bool operator==(const SummarySpec& a, const SummarySpec& b) {
  return a.every_steps == b.every_steps;
}
bool operator==(const ClusterSpec& a, const ClusterSpec& b) {
  return a.workers == b.workers && a.min_workers == b.min_workers &&
         a.start_grace_seconds == b.start_grace_seconds &&
         a.rejoin_grace_seconds == b.rejoin_grace_seconds &&
         a.replicas_per_worker == b.replicas_per_worker &&
         a.collective == b.collective && a.bucket_kib == b.bucket_kib &&
         a.ring_chunk_kib == b.ring_chunk_kib &&
         a.ring_streams == b.ring_streams && a.compression == b.compression &&
         a.fingerprint_every_steps == b.fingerprint_every_steps &&
         a.ring_checksum == b.ring_checksum && a.allow_tf32 == b.allow_tf32 &&
         a.shard == b.shard && a.copies == b.copies;
}
bool operator==(const RestartSpec& a, const RestartSpec& b) {
  return a.max_restarts == b.max_restarts &&
         a.backoff_seconds == b.backoff_seconds &&
         a.replacement_timeout_seconds == b.replacement_timeout_seconds;
}
bool operator==(const AuditSpec& a, const AuditSpec& b) {
  return a.samples == b.samples;
}
bool operator==(const JobSpec& a, const JobSpec& b) {
  return a.name == b.name && a.seed == b.seed && a.model == b.model &&
         a.loss == b.loss && a.optimizer == b.optimizer &&
         a.lr_schedule == b.lr_schedule && a.data == b.data &&
         a.batch_size_per_replica == b.batch_size_per_replica &&
         a.gradient_accumulation_steps == b.gradient_accumulation_steps &&
         a.epochs == b.epochs && a.steps == b.steps &&
         a.checkpoint == b.checkpoint && a.summary == b.summary &&
         a.cluster == b.cluster && a.restart == b.restart &&
         a.audit == b.audit && a.precision == b.precision;
}

namespace job_spec_internal {

Json ModelToJson(const ModelSpec& m) {
  if (!m.onnx_path.empty()) {
    Json j;
    j["onnx"] = m.onnx_path;
    if (!m.onnx_input.empty()) j["input"] = m.onnx_input;
    if (m.inputs.size() > 1 ||
        (m.inputs.size() == 1 && m.inputs[0].name != "input")) {
      Json names = Json::array();
      for (const ModelInput& in : m.inputs) names.push_back(in.name);
      j["input"] = names;
    }
    if (!m.onnx_output.empty()) j["output"] = m.onnx_output;
    j["param_names"] = NameOf(ParamNamings(), m.param_names);
    if (!m.init_safetensors.empty()) {
      j["init"] = {{"safetensors", m.init_safetensors}};
      if (m.init_allow_missing) j["init"]["allow_missing"] = true;
    }
    return j;
  }
  Json layers = Json::array();
  for (const LayerSpec& l : m.layers) layers.push_back(LayerSpecToJson(l));
  Json j;
  // A stack model keeps the form it has always had.
  const bool stack = m.inputs.size() == 1 && m.inputs[0].name == "input" &&
                     m.param_names == ParamNaming::kKeras;
  if (stack) {
    j["input_shape"] = m.inputs[0].shape;
  } else {
    Json inputs = Json::array();
    for (const ModelInput& in : m.inputs) {
      inputs.push_back({{"name", in.name}, {"shape", in.shape}});
    }
    j["inputs"] = inputs;
  }
  j["layers"] = layers;
  if (!stack) j["param_names"] = NameOf(ParamNamings(), m.param_names);
  if (!m.init_safetensors.empty()) {
    j["init"] = {{"safetensors", m.init_safetensors}};
    if (m.init_allow_missing) j["init"]["allow_missing"] = true;
  }
  return j;
}

}  // namespace job_spec_internal

std::string JobSpecToJson(const JobSpec& spec) {
  return DumpJson(SpecToJson(spec), 2) + "\n";
}

}  // namespace lockstep
