// The global batch sequence as a pure function of (seed, epoch, step): a
// seeded permutation of the dataset per epoch, cut into global batches of
// the job's global batch size; of R replicas, replica r takes the
// contiguous block [floor(r*G/R), floor((r+1)*G/R)) of each global batch
// (r*b..(r+1)*b when G = b*R). The global batches do not depend on R, so a
// restart at any step, with any number of replicas (an elastic job's new
// world), neither repeats nor skips a sample (DESIGN "Data sharding").
#ifndef LOCKSTEP_CORE_DATA_SHARD_PLAN_H_
#define LOCKSTEP_CORE_DATA_SHARD_PLAN_H_

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace lockstep {

// Thread-safe: the permutation of the most recently used epoch is cached
// under a mutex; any other epoch is recomputed on demand.
class ShardPlan {
 public:
  // global_batch_size and total_replicas must be > 0; num_samples >= 0.
  ShardPlan(int64_t num_samples, int64_t global_batch_size,
            int64_t total_replicas, uint64_t seed, bool shuffle);

  ShardPlan(const ShardPlan&) = delete;
  ShardPlan& operator=(const ShardPlan&) = delete;

  int64_t num_samples() const { return num_samples_; }
  int64_t total_replicas() const { return replicas_; }
  // The largest replica share of a full global batch: ceil(G / R).
  int64_t max_replica_share() const {
    return (global_ + replicas_ - 1) / replicas_;
  }
  // ceil(num_samples / global_batch_size): every sample once per epoch; the
  // last global batch of an epoch may be short. 0 for an empty dataset.
  int64_t steps_per_epoch() const { return steps_per_epoch_; }
  int64_t global_batch_size() const { return global_; }

  // The epoch's order of sample indices: a Fisher–Yates shuffle seeded from
  // MixSeed(seed, epoch), or 0..n-1 when !shuffle.
  std::vector<int64_t> Permutation(int64_t epoch) const;

  // Sample indices of global batch `step_in_epoch` (0 <= it <
  // steps_per_epoch(); empty otherwise) of `epoch`.
  std::vector<int64_t> GlobalBatch(int64_t epoch, int64_t step_in_epoch) const;
  // Number of samples in that global batch.
  int64_t GlobalBatchCount(int64_t epoch, int64_t step_in_epoch) const;
  // Replica r's slice: positions [floor(r*G/R), floor((r+1)*G/R)) of the
  // global batch, cut at its count. May be short, or empty, in the last
  // batch of an epoch.
  std::vector<int64_t> ReplicaSlice(int64_t epoch, int64_t step_in_epoch,
                                    int64_t replica) const;
  // Where that slice lies in the epoch's Permutation: positions [first,
  // second) ({0, 0} for a replica outside the plan).
  std::pair<int64_t, int64_t> ReplicaPositions(int64_t epoch,
                                               int64_t step_in_epoch,
                                               int64_t replica) const;

 private:
  // Positions [begin, end) of the epoch's permutation.
  std::vector<int64_t> Range(int64_t epoch, int64_t begin, int64_t end) const;
  std::shared_ptr<const std::vector<int64_t>> EpochOrder(int64_t epoch) const;

  const int64_t num_samples_;
  const int64_t global_;
  const int64_t replicas_;
  const uint64_t seed_;
  const bool shuffle_;
  const int64_t steps_per_epoch_;

  mutable absl::Mutex mu_;
  mutable int64_t cached_epoch_ ABSL_GUARDED_BY(mu_) = -1;
  mutable std::shared_ptr<const std::vector<int64_t>> cached_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_DATA_SHARD_PLAN_H_
