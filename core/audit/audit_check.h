// The check `lockstep audit` runs over a sample audit (sample_audit.h):
// per epoch, the samples the accepted history saw 0, 1 or more times
// (steps that a generation change threw away left out), each record
// checked against the shard plan.
#ifndef LOCKSTEP_CORE_AUDIT_AUDIT_CHECK_H_
#define LOCKSTEP_CORE_AUDIT_AUDIT_CHECK_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/audit/sample_audit.h"

namespace lockstep {

// What CheckAudit found.
struct AuditReport {
  struct Epoch {
    int64_t epoch = 0;
    int64_t samples = 0;  // the epoch's training samples
    int64_t never = 0, once = 0, more = 0;
    int64_t steps = 0;      // accepted steps of the epoch seen
    int64_t steps_due = 0;  // steps of a whole epoch
    // The accepted history spans the whole epoch: it started at or before
    // the epoch's first step and reached its last (a step missing in
    // between leaves samples never seen).
    bool complete = false;
  };
  std::string job;
  std::vector<Epoch> epochs;
  int64_t records = 0;      // record lines read
  int64_t accepted = 0;     // records in the accepted history
  int64_t thrown_away = 0;  // records of steps a later generation redid
  int64_t duplicates = 0;   // the same record twice (a retried call)
  int64_t first_step = 0;   // the first generation's start
  // Generation -> (from_step, world_replicas), as the file says.
  std::vector<std::pair<int64_t, std::pair<int64_t, int64_t>>> generations;
  // Records that contradict the plan or each other, steps whose replicas
  // are missing or doubled: each a sentence.
  std::vector<std::string> problems;
  // Every complete epoch saw each sample exactly once and nothing
  // contradicts the plan.
  bool exactly_once() const;
};

// Reads and checks an audit file. An unreadable or malformed file is an
// error naming the file and line; what the records show is the report's.
absl::StatusOr<AuditReport> CheckAudit(const std::string& path);

// The report for people: one line per epoch, then the problems.
std::string FormatAudit(const AuditReport& report);

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_AUDIT_AUDIT_CHECK_H_
