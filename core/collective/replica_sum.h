// The PassCollective of a replica set (core/layers/layer.h): sync batch
// norm's sums inside the training pass. The set's replicas run side by side
// on their own lanes; each call is a barrier. The last replica to arrive
// adds every replica's values in replica order (the same bytes whichever
// lane is last), hands the sum to the cross-worker all-reduce when there is
// one, and copies the result back to every replica.
#ifndef LOCKSTEP_CORE_COLLECTIVE_REPLICA_SUM_H_
#define LOCKSTEP_CORE_COLLECTIVE_REPLICA_SUM_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/status/status.h"
#include "core/layers/layer.h"

namespace lockstep {

class ReplicaSum {
 public:
  // The workers' sum of one collective: data[0..count) in place, with the
  // key every replica called with. Run by one lane per worker and call.
  using CrossSum =
      std::function<absl::Status(int32_t key, float* data, int64_t count)>;

  explicit ReplicaSum(int replicas);  // replicas >= 1
  ReplicaSum(const ReplicaSum&) = delete;
  ReplicaSum& operator=(const ReplicaSum&) = delete;

  // Replica r's view (valid for this object's life).
  PassCollective* For(int replica) { return views_[replica].get(); }

  // Before a step: clears the last step's error and sets the workers' sum
  // (null: this process's replicas are all).
  void BeginStep(CrossSum cross);
  // Replica r's pass is over. A replica that ends while others wait at a
  // barrier is out of step: they fail with an error naming both.
  void Finished(int replica);
  // Fails the current step's waits and sums with `reason` (a stop or a
  // cancel); the next BeginStep clears it. Thread-safe.
  void Abort(absl::Status reason);
  // After a step: OK, or the step's first error (a workers' sum failed, a
  // replica out of step).
  absl::Status status();
  // How many replicas wait at the current barrier now. Thread-safe (tests
  // order threads by it instead of by sleeping).
  int waiting();

 private:
  class View;
  absl::Status Sum(int replica, int32_t key, float* data, int64_t count);
  // Fails the step with `error` (the first error wins) and wakes waiters.
  absl::Status Fail(absl::Status error);  // needs mu_

  const int n_;
  std::vector<std::unique_ptr<PassCollective>> views_;
  CrossSum cross_;

  std::mutex mu_;
  std::condition_variable cv_;
  absl::Status error_;       // the step's first error
  int arrived_ = 0;          // at the current barrier
  int finished_ = 0;         // replicas whose pass is over
  int64_t round_ = 0;        // barriers completed
  int32_t key_ = 0;          // the current barrier's key and count
  int64_t count_ = 0;
  int first_replica_ = 0;    // the first to arrive
  std::vector<float*> data_;  // per replica, at the current barrier
  std::vector<float> sum_;
};

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_COLLECTIVE_REPLICA_SUM_H_
