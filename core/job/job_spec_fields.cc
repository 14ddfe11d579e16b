// The job file's enum names and the keys of its fixed objects.
#include <initializer_list>

#include "core/job/job_spec_internal.h"

namespace lockstep {
namespace job_spec_internal {
const Table<const Loss*>& LossTable() {
  static const auto* t = [] {
    auto* table = new Table<const Loss*>;
    for (const Loss* l : Losses()) table->push_back({l->name.c_str(), l});
    return table;
  }();
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
const Table<Precision>& Precisions() {
  static const auto* t = new Table<Precision>{{"fp32", Precision::kFp32},
                                              {"bf16", Precision::kBf16},
                                              {"fp16", Precision::kFp16}};
  return *t;
}

const Table<Collective>& Collectives() {
  static const auto* t = new Table<Collective>{{"ring", Collective::kRing},
                                               {"nccl", Collective::kNccl},
                                               {"auto", Collective::kAuto}};
  return *t;
}

const Table<Compression>& Compressions() {
  static const auto* t = new Table<Compression>{{"none", Compression::kNone},
                                                {"bf16", Compression::kBf16}};
  return *t;
}

const Table<ShardMode>& ShardModes() {
  static const auto* t =
      new Table<ShardMode>{{"none", ShardMode::kNone},
                           {"optimizer", ShardMode::kOptimizer},
                           {"gradients", ShardMode::kGradients}};
  return *t;
}

const Table<ParamNaming>& ParamNamings() {
  static const auto* t = new Table<ParamNaming>{{"keras", ParamNaming::kKeras},
                                                {"torch", ParamNaming::kTorch}};
  return *t;
}

namespace {
const Keys& Listed(std::initializer_list<const char*> keys) {
  auto* k = new Keys();
  for (const char* key : keys) k->push_back(key);
  return *k;
}
}  // namespace

const Keys& RootKeys() {
  static const Keys& k =
      Listed({"name", "seed", "model", "loss", "optimizer", "lr_schedule",
              "data", "batch_size_per_replica", "gradient_accumulation_steps",
              "epochs", "steps", "checkpoint", "summary", "cluster", "restart",
              "audit", "precision"});
  return k;
}
const Keys& AuditKeys() {
  static const Keys& k = Listed({"samples"});
  return k;
}
const Keys& CheckpointKeys() {
  static const Keys& k = Listed({"every_steps", "keep"});
  return k;
}
const Keys& SummaryKeys() {
  static const Keys& k = Listed({"every_steps"});
  return k;
}
const Keys& ClusterKeys() {
  static const Keys& k =
      Listed({"workers", "replicas_per_worker", "collective", "bucket_kib",
              "ring_chunk_kib", "ring_streams", "compression", "ring_checksum",
              "fingerprint_every_steps", "allow_tf32", "start_grace_seconds",
              "rejoin_grace_seconds", "shard", "copies"});
  return k;
}
const Keys& ElasticWorkersKeys() {
  static const Keys& k = Listed({"min", "max"});
  return k;
}
const Keys& RestartKeys() {
  static const Keys& k = Listed(
      {"max_restarts", "backoff_seconds", "replacement_timeout_seconds"});
  return k;
}
const Keys& ModelKeys() {
  static const Keys& k =
      Listed({"input_shape", "inputs", "layers", "preset", "onnx", "input",
              "output", "param_names", "init"});
  return k;
}
const Keys& ModelInputKeys() {
  static const Keys& k = Listed({"name", "shape"});
  return k;
}
const Keys& ModelInitKeys() {
  static const Keys& k = Listed({"safetensors", "allow_missing"});
  return k;
}
const Keys& OptimizerKeys() {
  static const Keys& k =
      Listed({"type", "learning_rate", "weight_decay", "momentum", "nesterov",
              "beta_1", "beta_2", "epsilon", "exclude_from_weight_decay",
              "global_clipnorm", "scale_with_replicas"});
  return k;
}
const Keys& ScheduleKeys() {
  static const Keys& k =
      Listed({"type", "warmup_steps", "unit", "boundaries", "values",
              "decay_steps", "end_learning_rate", "power"});
  return k;
}

}  // namespace job_spec_internal
}  // namespace lockstep
