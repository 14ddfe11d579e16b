// The sample audit (a job's "audit": {"samples": true}): every rank's
// record of the sample positions each step consumed, kept as JSON lines in
// STORAGE/jobs/NAME/audit.jsonl beside the generations' starts (the check
// that reads them back is audit_check.h).
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

// The merged position ranges [first, second) of the epoch's permutation
// that `plan` gives `replicas` at (epoch, step_in_epoch), appended to
// *positions, and (when `indices` is not null) their sample indices.
void PlanPositions(const ShardPlan& plan, int64_t epoch, int64_t step_in_epoch,
                   const std::vector<int64_t>& replicas,
                   std::vector<std::pair<int64_t, int64_t>>* positions,
                   std::vector<int64_t>* indices);

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

 private:
  AuditLog(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  absl::Status Line(const std::string& json);

  const std::string path_;
  absl::Mutex mu_;
  int fd_ ABSL_GUARDED_BY(mu_);
};

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_AUDIT_SAMPLE_AUDIT_H_
