// The job file's enum names.
#include "core/job/job_spec_internal.h"

namespace lockstep {
namespace job_spec_internal {
const Table<LossType>& Losses() {
  static const auto* t =
      new Table<LossType>{{"sparse_categorical_crossentropy",
                           LossType::kSparseCategoricalCrossentropy},
                          {"mse", LossType::kMse},
                          {"binary_crossentropy",
                           LossType::kBinaryCrossentropy}};
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

const Table<ParamNaming>& ParamNamings() {
  static const auto* t = new Table<ParamNaming>{{"keras", ParamNaming::kKeras},
                                                {"torch", ParamNaming::kTorch}};
  return *t;
}

}  // namespace job_spec_internal
}  // namespace lockstep
