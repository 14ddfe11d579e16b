// Shared by the job_spec*.cc files only: the enum name tables and the
// section parsers (the field readers are core/spec_reader.h's).
#ifndef LOCKSTEP_CORE_JOB_JOB_SPEC_INTERNAL_H_
#define LOCKSTEP_CORE_JOB_JOB_SPEC_INTERNAL_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "core/job/job_spec.h"
#include "core/spec_reader.h"

namespace lockstep {
namespace job_spec_internal {

using spec_reader::Bad;
using spec_reader::CheckName;
using spec_reader::Child;
using spec_reader::Constraint;
using spec_reader::Got;
using spec_reader::Index;
using spec_reader::IntValue;
using spec_reader::Json;
using spec_reader::Keys;
using spec_reader::kMaxInt;
using spec_reader::kNonNegative;
using spec_reader::kPositive;
using spec_reader::kUnitClosed;
using spec_reader::kUnitOpen;
using spec_reader::NameOf;
using spec_reader::NumberValue;
using spec_reader::PairValue;
using spec_reader::Reader;
using spec_reader::Table;

// The registered losses by name (core/loss/loss.h).
const Table<const Loss*>& LossTable();
const Table<OptimizerType>& OptimizerTypes();
const Table<ScheduleType>& ScheduleTypes();
const Table<ScheduleUnit>& ScheduleUnits();
const Table<Precision>& Precisions();
const Table<Collective>& Collectives();
const Table<Compression>& Compressions();
const Table<ShardMode>& ShardModes();
const Table<ParamNaming>& ParamNamings();

// The keys each fixed object of the job file may hold: the parser checks
// objects against these lists and JobFieldNames (job_fields.h) lists them,
// so a field cannot be accepted without being listed.
const Keys& RootKeys();
const Keys& CheckpointKeys();
const Keys& SummaryKeys();
const Keys& ClusterKeys();
const Keys& ElasticWorkersKeys();  // cluster.workers as {"min", "max"}
const Keys& RestartKeys();
const Keys& AuditKeys();
const Keys& ModelKeys();           // besides a preset's own fields
const Keys& ModelInputKeys();      // model.inputs[i]
const Keys& ModelInitKeys();       // model.init
const Keys& OptimizerKeys();       // every type's (each type takes some)
const Keys& ScheduleKeys();        // every type's

// Section parsers (job_spec_sections.cc); the schema is in job_spec.cc.
absl::Status ParseModel(const Json& v, absl::string_view base_dir,
                        ModelSpec* model);
absl::Status ParseOptimizer(const Json& v, OptimizerSpec* opt);
absl::Status ParseSchedule(const Json& v, ScheduleSpec* s);
// Model inputs declared without a shape take their data field's
// (DataConfig::FieldShape); errors name the input.
absl::Status ResolveInputShapes(const DataSpec& data, ModelSpec* model);
// The canonical JSON of the model section.
Json ModelToJson(const ModelSpec& m);

}  // namespace job_spec_internal
}  // namespace lockstep

#endif  // LOCKSTEP_CORE_JOB_JOB_SPEC_INTERNAL_H_
