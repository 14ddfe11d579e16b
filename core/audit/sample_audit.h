// The sample audit (a job's "audit": {"samples": true}): every rank's
// record of the sample positions each step consumed, kept as JSON lines in
// STORAGE/jobs/NAME/audit.jsonl beside the generations' starts, and the
// check `lockstep audit` runs over it: per epoch, the samples the accepted
// history saw 0, 1 or more times (steps that a generation change threw away
// left out), each record checked against the shard plan.
#ifndef LOCKSTEP_CORE_AUDIT_SAMPLE_AUDIT_H_
#define LOCKSTEP_CORE_AUDIT_SAMPLE_AUDIT_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/data/batch_prefetcher.h"
#include "core/data/shard_plan.h"
#include "core/job/job_spec.h"

namespace lockstep {

// One rank's samples of one step.
struct SampleRecord {
  int64_t generation = 0;  // the host fills it (1 for a local run)
  int64_t rank = 0;        // the host fills it
  int64_t step = 0;        // the global step, 0-based
  int64_t epoch = 0;
  int64_t epoch_samples = 0;  // the training samples of an epoch
  // The replicas' slices as positions [first, second) of the epoch's
  // permutation (adjacent slices merged).
  std::vector<std::pair<int64_t, int64_t>> positions;
  // CRC32C of the sample indices consumed, in order, as int64 little-endian.
  uint32_t hash = 0;
  int64_t count = 0;              // samples consumed
  std::vector<int64_t> replicas;  // the global replica indices held
  int64_t world_replicas = 0;
};

// CRC32C of `indices` as int64 little-endian.
uint32_t IndicesHash(const std::vector<int64_t>& indices);

// The record of `batch` (the indices its replicas were filled from) for
// the replicas `replicas` of `plan`.
SampleRecord RecordOf(const ShardPlan& plan, const Batch& batch,
                      const std::vector<int64_t>& replicas);

// Appends to an audit file, one JSON line per call, each line written with
// one write(2) (a killed process leaves whole lines). Thread-safe.
class AuditLog {
 public:
  // Opens (creates) `path` for appending; a new file starts with the job's
  // header (name, seed, shuffle, global batch).
  static absl::StatusOr<std::unique_ptr<AuditLog>> Open(const std::string& path,
                                                        const JobSpec& spec);
  ~AuditLog();
  AuditLog(const AuditLog&) = delete;
  AuditLog& operator=(const AuditLog&) = delete;

  // Generation `generation` runs from global step `from_step` on
  // `world_replicas` replicas.
  absl::Status Generation(int64_t generation, int64_t from_step,
                          int64_t world_replicas);
  absl::Status Add(const SampleRecord& r);
  const std::string& path() const { return path_; }
  // The latest generation the file held when opened (0: none).
  int64_t last_generation() const { return last_generation_; }

 private:
  AuditLog(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  absl::Status Line(const std::string& json);

  const std::string path_;
  int64_t last_generation_ = 0;
  absl::Mutex mu_;
  int fd_ ABSL_GUARDED_BY(mu_);
};

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

#endif  // LOCKSTEP_CORE_AUDIT_SAMPLE_AUDIT_H_
