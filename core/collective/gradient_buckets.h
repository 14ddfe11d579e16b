// Gradients travel in buckets (DESIGN "A step"): params grouped in the order
// backward produces them (last layer first), fused up to a size; a
// communication thread all-reduces bucket 0, 1, ... in that fixed order as
// each becomes ready, so the ring runs while backward is still computing.
#ifndef LOCKSTEP_CORE_COLLECTIVE_GRADIENT_BUCKETS_H_
#define LOCKSTEP_CORE_COLLECTIVE_GRADIENT_BUCKETS_H_

#include <cstdint>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "base/first_exception.h"
#include "core/collective/ring_allreduce.h"
#include "core/collective/transport.h"
#include "core/tensor.h"

namespace lockstep {

struct BucketStats {
  int64_t bytes = 0;             // gradient bytes all-reduced per step
  int64_t released_bytes = 0;    // handed back, last step (release)
  double allreduce_seconds = 0;  // summed over buckets, last step
  double wait_seconds = 0;       // time FinishStep waited after backward ended
};

// What a sharded step does with the gradients (cluster.shard, copies).
struct BucketSharding {
  // Each bucket is reduce-scattered instead of all-reduced, so after
  // FinishStep only the OwnedRanges() hold the sums (the all-reduce's
  // bits), and GatherParams brings every rank the parameters their owners
  // updated (sharded optimizer state).
  bool shard = false;
  // Sharded: each bucket's owned sums are also passed to the next rank
  // (RingPassOwned, float32), which keeps a copy of this rank's part of the
  // optimizer state: after FinishStep CopyRanges() hold the previous
  // rank's sums too, bit for bit.
  bool copies = false;
  // Sharded (cluster.shard "gradients", ZeRO-2): once a bucket is done,
  // the pages of its gradients outside OwnedRanges() and CopyRanges() are
  // handed back to the kernel (ReleasePages): they read as zeros until
  // backward writes them again.
  bool release = false;
};

class GradientBuckets {
 public:
  // `params` in model order (not owned, must outlive this); buckets close
  // once they hold >= bucket_bytes. `transport` is not owned.
  GradientBuckets(const std::vector<Param*>& params, int64_t bucket_bytes,
                  Transport* transport, RingOptions ring,
                  BucketSharding sharding = {});
  ~GradientBuckets();  // stops and joins the communication thread
  GradientBuckets(const GradientBuckets&) = delete;
  GradientBuckets& operator=(const GradientBuckets&) = delete;

  int num_buckets() const { return static_cast<int>(buckets_.size()); }
  // Param indices of bucket b, in the order they are packed.
  const std::vector<int>& bucket_params(int b) const {
    return buckets_[b].params;
  }

  // Starts a step: buckets are tagged (generation, step, b).
  void BeginStep(int64_t generation, int64_t step);
  // Param i's (locally summed) grad is final. Thread-safe; cheap.
  void ParamReady(int param_index);
  // Blocks until every bucket of the step is all-reduced and the grads hold
  // the sums; returns the first error (with the bucket named). What a
  // bucket's all-reduce threw on the bucket thread (std::bad_alloc) is
  // rethrown here, on the caller's.
  absl::Status FinishStep();
  BucketStats stats() const;

  // Sharded: the elements of `params` this rank owns, the ring segment
  // RingOwnedSegment(rank) of each bucket, in model order of the params.
  std::vector<ParamRange> OwnedRanges() const {
    return OwnedRanges(transport_->rank());
  }
  // Sharded with copies: the ranges the previous rank owns (empty in a
  // world of one).
  std::vector<ParamRange> CopyRanges() const;
  // The ranges rank `rank` of this world owns.
  std::vector<ParamRange> OwnedRanges(int rank) const;
  // Sharded, after the owners updated their ranges: every bucket's
  // parameter values all-gathered (float32 whatever the gradients' wire,
  // so every rank holds its owners' bits). Blocks; errors name the bucket.
  absl::Status GatherParams(int64_t generation, int64_t step);

 private:
  struct Bucket {
    std::vector<int> params;
    int64_t elements = 0;
    std::vector<float> fused;  // empty for a one-param bucket (in place)
  };
  void Loop();
  absl::Status Reduce(int b);
  // BucketSharding::release: bucket b's gradients outside the segments
  // this rank keeps; returns the bytes handed back.
  int64_t Release(int b);

  const std::vector<Param*>& params_;
  Transport* const transport_;
  const RingOptions ring_;
  const bool shard_;
  const bool copies_;
  const bool release_;
  std::vector<Bucket> buckets_;
  std::vector<int> bucket_of_;  // param index -> bucket

  mutable absl::Mutex mu_;
  absl::CondVar cv_;
  std::vector<int> pending_ ABSL_GUARDED_BY(mu_);  // params left per bucket
  int next_ ABSL_GUARDED_BY(mu_) = 0;  // next bucket the thread reduces
  int done_ ABSL_GUARDED_BY(mu_) = 0;  // buckets finished this step
  bool active_ ABSL_GUARDED_BY(mu_) = false;
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  int64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t step_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  FirstException thrown_;  // what a bucket's all-reduce threw
  BucketStats stats_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_COLLECTIVE_GRADIENT_BUCKETS_H_
