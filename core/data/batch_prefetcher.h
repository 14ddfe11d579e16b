// Reads and batches the training data on a background thread, ahead of
// compute: batch s+1..s+depth are assembled while step s runs.
#ifndef LOCKSTEP_CORE_DATA_BATCH_PREFETCHER_H_
#define LOCKSTEP_CORE_DATA_BATCH_PREFETCHER_H_

#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/data/dataset.h"
#include "core/data/shard_plan.h"
#include "core/step_pool.h"
#include "core/tensor.h"

namespace lockstep {

struct ReplicaBatch {
  Tensor x;  // [n, input_shape...]; n may be 0
  // n * labels_per_sample; negative: no label there (an unmasked position).
  std::vector<int32_t> labels;
};

struct Batch {
  int64_t global_step = 0;  // 0-based, counted across epochs
  int64_t epoch = 0;
  int64_t step_in_epoch = 0;
  int64_t global_count = 0;  // samples in the whole global batch
  // Labels (>= 0) in the whole global batch: the loss is their mean, so
  // every replica scales its gradient by 1 / this. The samples for
  // classification; the masked tokens for a masked language model.
  int64_t global_labels = 0;
  std::vector<ReplicaBatch> replicas;  // one per entry of replica_indices
  // The sample indices filled, replica after replica (the audit's record
  // of what the step consumed; empty in micro-batches).
  std::vector<int64_t> indices;
  // Micro-batch `micro` of the step's `micros` (job
  // gradient_accumulation_steps); 0 of 1 for a whole step's batch. The
  // replicas keep their gradients until the last; `micro` varies the
  // dropout masks and keeps the micro-batches' collectives inside the pass
  // apart.
  int32_t micro = 0;
  int32_t micros = 1;
};

// Micro-batch `k` of `count` of a step's batch, `size` samples of every
// replica's share: samples [k * size, (k + 1) * size) of it (short or
// empty at the end of an epoch). The global counts stay the step's, so
// gradients are scaled for the whole global batch and the micro-batches'
// gradients sum to the step's.
Batch MicroBatch(const Batch& step, int32_t k, int32_t count, int64_t size);

// Builds the Batch of `global_step` directly, on the calling thread (and
// `fill`'s lanes, when given, sharing the samples): what the prefetcher
// produces, and what tests compare it with.
Batch MakeBatch(const Dataset& data, const ShardPlan& plan,
                const std::vector<int64_t>& replica_indices,
                const Shape& input_shape, int64_t global_step,
                StepPool* fill = nullptr);

// Threads that make a batch's samples: 1 for stored samples; for made ones
// (decoded images, masked text) a quarter of the cores, 1 to 8.
int FillThreads(const Dataset& data);

class BatchPrefetcher {
 public:
  // Produces batches for global steps [start_step, end_step) for the given
  // global replica indices, each sample reshaped to `input_shape` (whose
  // NumElements must equal the dataset's per-sample count: the caller
  // checks). At most `depth` (>= 1) batches are held ready ahead of Next().
  // `data` and `plan` are borrowed and must outlive this object. Starts its
  // thread at once; the destructor stops and joins it.
  BatchPrefetcher(const Dataset* data, const ShardPlan* plan,
                  std::vector<int64_t> replica_indices, Shape input_shape,
                  int64_t start_step, int64_t end_step, int depth = 4);
  ~BatchPrefetcher();

  BatchPrefetcher(const BatchPrefetcher&) = delete;
  BatchPrefetcher& operator=(const BatchPrefetcher&) = delete;

  // Blocks until the next batch is ready. kOutOfRange once end_step is
  // reached, kCancelled after Stop(), kFailedPrecondition when the plan has
  // no steps (empty dataset) but steps were asked for. What making a batch
  // threw on the prefetch thread (std::bad_alloc) is rethrown here, on the
  // consumer's, where that batch would have been returned.
  absl::StatusOr<Batch> Next();

  // The batch the next Next() will return if it is ready now, else null
  // (never blocks): for copying it toward a device while the current step
  // runs. Valid until that Next() or Stop(); call from the consumer's
  // thread.
  const Batch* PeekReady();

  // Stops production and joins the thread; idempotent, does not block on a
  // full queue. Call from the consumer's thread (or any thread other than a
  // blocked Next(), which it wakes with kCancelled).
  void Stop();

 private:
  void Run();
  bool CanProduce() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool CanConsume() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Dataset* const data_;
  const ShardPlan* const plan_;
  const std::vector<int64_t> replica_indices_;
  const Shape input_shape_;
  const int64_t start_step_;
  const int64_t end_step_;
  const size_t depth_;
  std::unique_ptr<StepPool> fill_pool_;  // null: one thread fills

  absl::Mutex mu_;
  std::deque<Batch> ready_ ABSL_GUARDED_BY(mu_);
  int64_t next_to_return_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::exception_ptr error_ ABSL_GUARDED_BY(mu_);  // production ended by it

  absl::Mutex join_mu_;  // serializes joining between Stop() callers
  std::thread thread_;
};

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_DATA_BATCH_PREFETCHER_H_
