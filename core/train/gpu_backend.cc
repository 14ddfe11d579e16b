// The registered GPU backend (see gpu_backend.h).
#include "core/train/gpu_backend.h"

#include <mutex>

#include "absl/strings/str_cat.h"

namespace lockstep {
namespace {

std::mutex& Mu() {
  static std::mutex* mu = new std::mutex;
  return *mu;
}

GpuBackend& Registered() {
  static GpuBackend* b = new GpuBackend;
  return *b;
}

// A copy, so calls run without the lock.
GpuBackend Current() {
  std::lock_guard<std::mutex> lock(Mu());
  return Registered();
}

constexpr char kNoGpuBuild[] =
    "this lockstep was built without GPU support (build it with "
    "--config=cuda)";

}  // namespace

void RegisterGpuBackend(GpuBackend backend) {
  std::lock_guard<std::mutex> lock(Mu());
  Registered() = std::move(backend);
}

bool HaveGpuBackend() { return static_cast<bool>(Current().make_replicas); }

absl::StatusOr<int> VisibleGpus() {
  GpuBackend b = Current();
  if (!b.visible_devices) {
    return absl::FailedPreconditionError(
        absl::StrCat(kNoGpuBuild, "; use cpu:N"));
  }
  return b.visible_devices();
}

absl::StatusOr<std::unique_ptr<GpuReplicas>> MakeGpuReplicas(
    const GpuReplicasConfig& config) {
  GpuBackend b = Current();
  if (!b.make_replicas) {
    return absl::FailedPreconditionError(
        absl::StrCat("GPU replicas: ", kNoGpuBuild, "; use cpu:N"));
  }
  return b.make_replicas(config);
}

absl::StatusOr<std::string> NewNcclId() {
  GpuBackend b = Current();
  if (!b.new_nccl_id) {
    return absl::FailedPreconditionError(
        absl::StrCat("the NCCL all-reduce: ", kNoGpuBuild));
  }
  return b.new_nccl_id();
}

}  // namespace lockstep
