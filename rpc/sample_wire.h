// The one conversion between a sample audit record (core/audit) and its
// SampleRecord message: the worker's RecordSamples call and the
// coordinator's answer to it.
#ifndef LOCKSTEP_RPC_SAMPLE_WIRE_H_
#define LOCKSTEP_RPC_SAMPLE_WIRE_H_

#include <string>

#include "absl/status/statusor.h"
#include "core/audit/sample_audit.h"
#include "proto/cluster.pb.h"

namespace lockstep {

// Every field of `record`; worker_id and job are the caller's.
lockstep::v1::SampleRecord SampleRecordToWire(const SampleRecord& record);
// InvalidArgument, naming it, for positions that are not [begin, end) pairs.
absl::StatusOr<SampleRecord> SampleRecordFromWire(
    const lockstep::v1::SampleRecord& msg);

}  // namespace lockstep

#endif  // LOCKSTEP_RPC_SAMPLE_WIRE_H_
