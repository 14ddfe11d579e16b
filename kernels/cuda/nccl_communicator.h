// One rank's NCCL communicator: created without blocking forever (non-blocking
// init polled against a deadline), and an in-place sum all-reduce whose wait
// turns a lost peer, a deadline or Abort() into a Status instead of a hang
// (STYLE rule 5). The unique id reaches the ranks through the coordinator
// (worker/nccl_bootstrap.h); this file only moves GPU buffers.
#ifndef LOCKSTEP_KERNELS_CUDA_NCCL_COMMUNICATOR_H_
#define LOCKSTEP_KERNELS_CUDA_NCCL_COMMUNICATOR_H_

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace lockstep {
namespace cuda {

// NCCL_UNIQUE_ID_BYTES: the size of the id rank 0 makes and the others fetch.
inline constexpr size_t kNcclUniqueIdBytes = NCCL_UNIQUE_ID_BYTES;

// ncclGetUniqueId as 128 bytes, to be published by rank 0. Opens the
// bootstrap root's listening socket (no GPU needed); the socket lives until
// the ranks have joined. Unavailable when NCCL finds no usable network
// interface (ncclSystemError).
absl::StatusOr<std::string> NewNcclUniqueId();

class NcclCommunicator {
 public:
  // Joins the communicator `unique_id` (kNcclUniqueIdBytes from
  // NewNcclUniqueId on rank 0) as `rank` of `world` on GPU `device`. Blocks
  // until every rank has joined, `timeout` passes (DeadlineExceeded naming
  // rank and world; the half-made communicator is aborted) or `*cancel`
  // (when not null) becomes true (Cancelled). FailedPrecondition without a
  // usable GPU, InvalidArgument for a bad id, world or rank.
  static absl::StatusOr<std::unique_ptr<NcclCommunicator>> Create(
      absl::string_view unique_id, int world, int rank, int device,
      absl::Duration timeout, const std::atomic<bool>* cancel = nullptr);

  // Finalizes and destroys the communicator (waiting up to 10 s for its
  // pending work), or aborts it when it is broken, aborted or stuck.
  ~NcclCommunicator();
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  // Sums `count` floats at `device_buf` (on this communicator's GPU) across
  // the ranks, in place, on `stream`; every rank must make the same calls in
  // the same order. Blocks until the stream has finished the all-reduce
  // (EnqueueAllReduceSum, then WaitStream):
  //   Cancelled          Abort() was called (before or during the call);
  //   Aborted            a peer failed (ncclRemoteError);
  //   Unavailable        a socket or system error (ncclSystemError);
  //   DeadlineExceeded   `timeout` passed (NCCL cannot say which peer lags);
  // after any of these the communicator is aborted and every later call
  // fails with the same error: make a new one (next generation). Calls are
  // serialized; the caller owns the buffer and the stream.
  absl::Status AllReduceSum(float* device_buf, size_t count,
                            cudaStream_t stream,
                            absl::Duration timeout = absl::InfiniteDuration());
  // The same sum, only enqueued: returns once NCCL has put it on `stream`
  // (work enqueued on `stream` after it sees the sum). Errors as above, for
  // the enqueue; the GPU's part is waited for by WaitStream.
  absl::Status EnqueueAllReduceSum(
      float* device_buf, size_t count, cudaStream_t stream,
      absl::Duration timeout = absl::InfiniteDuration());
  // Blocks until `stream` has run everything enqueued on it, the NCCL work
  // included, polling the stream, NCCL's asynchronous error and the abort
  // flag (spinning for the first 5 ms, then napping up to 1 ms). Errors as
  // AllReduceSum's.
  absl::Status WaitStream(cudaStream_t stream,
                          absl::Duration timeout = absl::InfiniteDuration());

  // Makes the pending and every later AllReduceSum fail with Cancelled.
  // Thread-safe and non-blocking: the waiting call aborts the NCCL
  // communicator itself (so the GPU kernels quit), never this thread.
  void Abort();

  int rank() const { return rank_; }
  int world() const { return world_; }
  int device() const { return device_; }

 private:
  NcclCommunicator(ncclComm_t comm, int world, int rank, int device);

  // "rank R of world W on cuda:D" for messages.
  std::string Who() const;
  std::string AllReduceWhat(size_t count) const;
  static absl::Status Cancelled(const std::string& what);
  // Until NCCL has no operation in progress and (when not null) `stream` is
  // idle; errors (annotated with what()) break the communicator.
  absl::Status Poll(cudaStream_t stream, absl::Duration timeout,
                    const std::function<std::string()>& what)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Aborts comm_ (the GPU kernels stop) and remembers `why` for later calls.
  absl::Status Break(absl::Status why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int world_, rank_, device_;
  std::atomic<bool> aborted_{false};
  absl::Mutex mu_;                        // one NCCL call sequence at a time
  ncclComm_t comm_ ABSL_GUARDED_BY(mu_);  // null once aborted
  absl::Status broken_ ABSL_GUARDED_BY(mu_);
};

}  // namespace cuda
}  // namespace lockstep

#endif  // LOCKSTEP_KERNELS_CUDA_NCCL_COMMUNICATOR_H_
