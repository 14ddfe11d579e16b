// Seeded per-epoch permutations cut into global batches and replica slices.
#include "core/data/shard_plan.h"

#include <algorithm>
#include <cassert>
#include <utility>

#include "core/random.h"

namespace lockstep {

ShardPlan::ShardPlan(int64_t num_samples, int64_t global_batch_size,
                     int64_t total_replicas, uint64_t seed, bool shuffle)
    : num_samples_(std::max<int64_t>(num_samples, 0)),
      global_(global_batch_size),
      replicas_(total_replicas),
      seed_(seed),
      shuffle_(shuffle),
      steps_per_epoch_(global_batch_size > 0 && total_replicas > 0
                           ? (num_samples_ + global_batch_size - 1) /
                                 global_batch_size
                           : 0) {
  assert(global_batch_size > 0 && total_replicas > 0);
}

std::vector<int64_t> ShardPlan::Permutation(int64_t epoch) const {
  std::vector<int64_t> order(num_samples_);
  for (int64_t i = 0; i < num_samples_; ++i) order[i] = i;
  if (!shuffle_) return order;
  Rng rng(MixSeed(seed_, static_cast<uint64_t>(epoch)));
  for (int64_t i = num_samples_ - 1; i > 0; --i) {
    const int64_t j = static_cast<int64_t>(rng.UniformInt(i + 1));
    std::swap(order[i], order[j]);
  }
  return order;
}

std::shared_ptr<const std::vector<int64_t>> ShardPlan::EpochOrder(
    int64_t epoch) const {
  {
    absl::MutexLock lock(&mu_);
    if (cached_ != nullptr && cached_epoch_ == epoch) return cached_;
  }
  // Computed outside the lock so readers of the cached epoch never wait on
  // a shuffle; two threads may both compute the same epoch (harmless).
  auto order = std::make_shared<const std::vector<int64_t>>(Permutation(epoch));
  absl::MutexLock lock(&mu_);
  cached_epoch_ = epoch;
  cached_ = order;
  return order;
}

int64_t ShardPlan::GlobalBatchCount(int64_t epoch,
                                    int64_t step_in_epoch) const {
  (void)epoch;
  if (step_in_epoch < 0 || step_in_epoch >= steps_per_epoch_) return 0;
  const int64_t g = global_batch_size();
  return std::min(g, num_samples_ - step_in_epoch * g);
}

std::vector<int64_t> ShardPlan::Range(int64_t epoch, int64_t begin,
                                      int64_t end) const {
  if (begin >= end) return {};
  if (!shuffle_) {
    std::vector<int64_t> out(end - begin);
    for (int64_t i = begin; i < end; ++i) out[i - begin] = i;
    return out;
  }
  std::shared_ptr<const std::vector<int64_t>> order = EpochOrder(epoch);
  return std::vector<int64_t>(order->begin() + begin, order->begin() + end);
}

std::vector<int64_t> ShardPlan::GlobalBatch(int64_t epoch,
                                            int64_t step_in_epoch) const {
  const int64_t count = GlobalBatchCount(epoch, step_in_epoch);
  const int64_t begin = step_in_epoch * global_batch_size();
  return Range(epoch, begin, begin + count);
}

std::pair<int64_t, int64_t> ShardPlan::ReplicaPositions(int64_t epoch,
                                                        int64_t step_in_epoch,
                                                        int64_t replica) const {
  const int64_t count = GlobalBatchCount(epoch, step_in_epoch);
  if (replica < 0 || replica >= replicas_) return {0, 0};
  const int64_t lo = std::min(replica * global_ / replicas_, count);
  const int64_t hi = std::min((replica + 1) * global_ / replicas_, count);
  const int64_t base = step_in_epoch * global_batch_size();
  return {base + lo, base + hi};
}

std::vector<int64_t> ShardPlan::ReplicaSlice(int64_t epoch,
                                             int64_t step_in_epoch,
                                             int64_t replica) const {
  const auto [begin, end] = ReplicaPositions(epoch, step_in_epoch, replica);
  return Range(epoch, begin, end);
}

}  // namespace lockstep
