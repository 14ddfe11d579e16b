// NcclCommunicator over a non-blocking NCCL communicator: every wait is a
// poll of ncclCommGetAsyncError against a deadline and an abort flag, and a
// failed wait aborts the communicator so its GPU kernels quit.
#include "kernels/cuda/nccl_communicator.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "kernels/cuda/cuda_status.h"

namespace lockstep {
namespace cuda {
namespace {

constexpr absl::Duration kPollInterval = absl::Milliseconds(1);
// Waits on the GPU spin (yielding the core) this long, then nap from
// kFirstNap up to kPollInterval.
constexpr absl::Duration kSpinFor = absl::Milliseconds(5);
constexpr absl::Duration kFirstNap = absl::Microseconds(50);
// ncclCommFinalize flushes pending work; a peer that is gone can stall it.
constexpr absl::Duration kFinalizeTimeout = absl::Seconds(10);

std::string WhoText(int rank, int world, int device) {
  return absl::StrFormat("rank %d of world %d on cuda:%d", rank, world, device);
}

}  // namespace

absl::StatusOr<std::string> NewNcclUniqueId() {
  ncclUniqueId id;
  const absl::Status s = NCCL_STATUS(ncclGetUniqueId(&id));
  if (!s.ok()) {
    return AnnotateStatus(s, "while making rank 0's NCCL unique id");
  }
  return std::string(id.internal, sizeof(id.internal));
}

absl::StatusOr<std::unique_ptr<NcclCommunicator>> NcclCommunicator::Create(
    absl::string_view unique_id, int world, int rank, int device,
    absl::Duration timeout, const std::atomic<bool>* cancel) {
  if (unique_id.size() != kNcclUniqueIdBytes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("an NCCL unique id is %d bytes, got %d",
                        kNcclUniqueIdBytes, unique_id.size()));
  }
  if (world < 1 || rank < 0 || rank >= world || device < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "no NCCL communicator has rank %d of world %d on cuda:%d", rank, world,
        device));
  }
  const std::string who = WhoText(rank, world, device);
  const std::string context =
      absl::StrCat("while joining the NCCL communicator as ", who);
  const absl::Status set = CUDA_STATUS(cudaSetDevice(device));
  if (!set.ok()) {
    cudaGetLastError();  // not sticky: later calls should not report it
    return AnnotateStatus(set, context);
  }

  ncclUniqueId id;
  std::memcpy(id.internal, unique_id.data(), kNcclUniqueIdBytes);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // init returns at once; we poll with a deadline
  ncclComm_t comm = nullptr;
  const ncclResult_t started =
      ncclCommInitRankConfig(&comm, world, id, rank, &config);
  // Every failure below aborts the half-made communicator (NCCL's own
  // threads stop) after its error text has been read.
  auto fail = [&](absl::Status why) {
    if (comm != nullptr) ncclCommAbort(comm);
    return AnnotateStatus(why, context);
  };
  if (started != ncclSuccess && started != ncclInProgress) {
    return fail(NcclStatus(started, "ncclCommInitRankConfig", __FILE__,
                           __LINE__, comm));
  }
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    ncclResult_t state = ncclInProgress;
    const ncclResult_t polled = ncclCommGetAsyncError(comm, &state);
    if (polled != ncclSuccess) {
      return fail(NcclStatus(polled, "ncclCommGetAsyncError", __FILE__,
                             __LINE__, comm));
    }
    if (state == ncclSuccess) break;
    if (state != ncclInProgress) {
      return fail(NcclStatus(state, "ncclCommInitRankConfig (asynchronous)",
                             __FILE__, __LINE__, comm));
    }
    if (cancel != nullptr && cancel->load()) {
      return fail(absl::CancelledError("cancelled before every rank joined"));
    }
    if (absl::Now() >= deadline) {
      return fail(absl::DeadlineExceededError(absl::StrFormat(
          "not all %d ranks joined within %s (a rank is missing, slow, or "
          "holds another unique id)",
          world, absl::FormatDuration(timeout))));
    }
    absl::SleepFor(kPollInterval);
  }
  return std::unique_ptr<NcclCommunicator>(
      new NcclCommunicator(comm, world, rank, device));
}

NcclCommunicator::NcclCommunicator(ncclComm_t comm, int world, int rank,
                                   int device)
    : world_(world), rank_(rank), device_(device), comm_(comm) {}

NcclCommunicator::~NcclCommunicator() {
  absl::MutexLock lock(&mu_);
  if (comm_ == nullptr) return;  // already aborted
  cudaSetDevice(device_);
  bool clean = !aborted_.load();
  if (clean) {
    const ncclResult_t started = ncclCommFinalize(comm_);
    clean = started == ncclSuccess || started == ncclInProgress;
  }
  const absl::Time deadline = absl::Now() + kFinalizeTimeout;
  while (clean) {
    ncclResult_t state = ncclInProgress;
    if (ncclCommGetAsyncError(comm_, &state) != ncclSuccess) clean = false;
    if (!clean || state == ncclSuccess) break;
    if (state != ncclInProgress || aborted_.load() || absl::Now() >= deadline) {
      clean = false;
      break;
    }
    absl::SleepFor(kPollInterval);
  }
  if (clean) {
    ncclCommDestroy(comm_);
  } else {
    ncclCommAbort(comm_);
  }
  comm_ = nullptr;
}

std::string NcclCommunicator::Who() const {
  return WhoText(rank_, world_, device_);
}

void NcclCommunicator::Abort() { aborted_.store(true); }

absl::Status NcclCommunicator::Break(absl::Status why) {
  if (comm_ != nullptr) {
    ncclCommAbort(comm_);  // stops the kernels still waiting on peers
    comm_ = nullptr;
  }
  if (broken_.ok()) broken_ = why;
  return why;
}

absl::Status NcclCommunicator::AllReduceSum(float* device_buf, size_t count,
                                            cudaStream_t stream,
                                            absl::Duration timeout) {
  RETURN_IF_ERROR(EnqueueAllReduceSum(device_buf, count, stream, timeout));
  return WaitStream(stream, timeout);
}

std::string NcclCommunicator::AllReduceWhat(size_t count) const {
  return absl::StrFormat("while all-reducing %d floats over NCCL as %s", count,
                         Who());
}

absl::Status NcclCommunicator::EnqueueAllReduceSum(float* device_buf,
                                                   size_t count,
                                                   cudaStream_t stream,
                                                   absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  if (aborted_.load()) return Break(Cancelled(AllReduceWhat(count)));
  if (!broken_.ok()) return broken_;
  if (count == 0) return absl::OkStatus();
  const absl::Status set = CUDA_STATUS(cudaSetDevice(device_));
  if (!set.ok()) return AnnotateStatus(set, AllReduceWhat(count));

  const ncclResult_t started = ncclAllReduce(
      device_buf, device_buf, count, ncclFloat32, ncclSum, comm_, stream);
  if (started == ncclSuccess) return absl::OkStatus();
  if (started != ncclInProgress) {
    const absl::Status s =
        AnnotateStatus(NcclStatus(started, "ncclAllReduce", __FILE__, __LINE__,
                                  comm_),
                       AllReduceWhat(count));
    // A bad argument is the caller's bug and leaves the communicator whole.
    if (started == ncclInvalidArgument || started == ncclInvalidUsage) {
      return s;
    }
    return Break(s);
  }
  // A non-blocking communicator may still be enqueuing (connecting, the
  // first time): nothing else may go on the stream or the communicator
  // until it has.
  return Poll(nullptr, timeout, [&] { return AllReduceWhat(count); });
}

absl::Status NcclCommunicator::WaitStream(cudaStream_t stream,
                                          absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  if (!broken_.ok()) return broken_;
  const absl::Status set = CUDA_STATUS(cudaSetDevice(device_));
  if (!set.ok()) return set;
  return Poll(stream, timeout, [&] {
    return absl::StrCat("while waiting for the NCCL all-reduce as ", Who());
  });
}

absl::Status NcclCommunicator::Poll(
    cudaStream_t stream, absl::Duration timeout,
    const std::function<std::string()>& what) {
  const absl::Time start = absl::Now();
  const absl::Time deadline = start + timeout;
  absl::Duration nap = kFirstNap;
  while (true) {
    // NCCL first, so an enqueue still in progress is never mistaken for an
    // idle stream.
    ncclResult_t state = ncclInProgress;
    const ncclResult_t polled = ncclCommGetAsyncError(comm_, &state);
    if (polled != ncclSuccess) {
      return Break(AnnotateStatus(
          NcclStatus(polled, "ncclCommGetAsyncError", __FILE__, __LINE__,
                     comm_),
          what()));
    }
    if (state != ncclSuccess && state != ncclInProgress) {
      return Break(AnnotateStatus(
          NcclStatus(state, "NCCL (asynchronous)", __FILE__, __LINE__, comm_),
          what()));
    }
    if (state == ncclSuccess) {
      if (stream == nullptr) return absl::OkStatus();
      const cudaError_t done = cudaStreamQuery(stream);
      if (done == cudaSuccess) return absl::OkStatus();
      if (done != cudaErrorNotReady) {
        return Break(AnnotateStatus(
            CudaStatus(done, "cudaStreamQuery(stream)", __FILE__, __LINE__),
            what()));
      }
    }
    if (aborted_.load()) return Break(Cancelled(what()));
    const absl::Time now = absl::Now();
    if (now >= deadline) {
      return Break(absl::DeadlineExceededError(absl::StrFormat(
          "%s: not finished within %s; NCCL does not say which of the other "
          "%d ranks is slow or gone",
          what(), absl::FormatDuration(timeout), world_ - 1)));
    }
    // A step's GPU work is usually done within a few milliseconds: spin
    // (yielding) that long for the latency, then nap, longer and longer.
    if (now - start < kSpinFor) {
      std::this_thread::yield();
    } else {
      absl::SleepFor(nap);
      nap = std::min(nap * 2, kPollInterval);
    }
  }
}

absl::Status NcclCommunicator::Cancelled(const std::string& what) {
  return absl::CancelledError(
      absl::StrCat(what, ": the communicator was aborted (Abort)"));
}

}  // namespace cuda
}  // namespace lockstep
