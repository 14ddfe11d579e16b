// The collective transport interface's shared parts (core/collective/transport.h):
// tag formatting, the in-flight send count, and applying received bytes.
#include "core/collective/transport.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "kernels/cpu/elementwise.h"

namespace lockstep {

std::string TagToString(const CollectiveTag& tag) {
  return absl::StrCat("generation ", tag.generation, " step ", tag.step,
                      " bucket ", tag.bucket, " chunk ", tag.chunk);
}

std::string BucketName(int32_t bucket) {
  if (bucket == kLossBucket) return "the loss all-reduce";
  if (bucket == kEvalBucket) return "the evaluation all-reduce";
  if (bucket == kDrainBucket) return "the drain barrier";
  if (bucket == kNormBucket) return "the gradient norm's sum";
  if (bucket == kUpdateBarrierBucket) return "the barrier before the update";
  if (bucket >= kParamGatherBucket && bucket < kLossBucket) {
    return absl::StrCat("the all-gather of bucket ",
                        bucket - kParamGatherBucket, "'s parameters");
  }
  if (bucket >= kGradCopyBucket && bucket < kParamGatherBucket) {
    return absl::StrCat("the pass of bucket ", bucket - kGradCopyBucket,
                        "'s sums to the next rank");
  }
  if (bucket >= kPassSumBucket) {
    const int32_t micro = (bucket - kPassSumBucket) / kPassSumMicroStride;
    const int32_t key = (bucket - kPassSumBucket) % kPassSumMicroStride;
    return absl::StrCat("sum ", key % 4, " of graph node ", key / 4,
                        " in the pass (sync batch norm)",
                        micro > 0 ? absl::StrCat(", micro-batch ", micro) : "");
  }
  return absl::StrCat("gradient bucket ", bucket);
}

struct SendTracker::State {
  mutable absl::Mutex mu;
  int64_t in_flight ABSL_GUARDED_BY(mu) = 0;
};

SendTracker::SendTracker() : state_(std::make_shared<State>()) {}

void SendTracker::Begin() const {
  absl::MutexLock lock(&state_->mu);
  ++state_->in_flight;
}

void SendTracker::Done() const {
  absl::MutexLock lock(&state_->mu);
  --state_->in_flight;
}

bool SendTracker::WaitIdle(absl::Time deadline) const {
  absl::MutexLock lock(&state_->mu);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_->mu) {
    return state_->in_flight == 0;
  };
  return state_->mu.AwaitWithDeadline(absl::Condition(&idle), deadline);
}

int64_t SendTracker::in_flight() const {
  absl::MutexLock lock(&state_->mu);
  return state_->in_flight;
}

size_t WireElementBytes(WireType type) {
  return type == WireType::kBfloat16 ? 2 : sizeof(float);
}

const char* WireTypeName(WireType type) {
  return type == WireType::kBfloat16 ? "bfloat16" : "float32";
}

void PayloadSink::Apply(const char* bytes, int64_t values) {
  if (values == 0) return;
  if (type_ == WireType::kBfloat16) {
    if (op_ == RecvOp::kCopy) {
      Bf16BytesToFloat(values, bytes, dst_);
    } else {
      AddBf16FromBytes(values, bytes, dst_);
    }
  } else if (op_ == RecvOp::kCopy) {
    std::memcpy(dst_, bytes, static_cast<size_t>(values) * sizeof(float));
  } else {
    AddFromBytes(values, bytes, dst_);
  }
  dst_ += values;
}

void PayloadSink::Append(const char* bytes, size_t n) {
  if (carried_ > 0) {  // finish the value split by the previous piece
    const size_t take = std::min(n, element_ - carried_);
    std::memcpy(carry_ + carried_, bytes, take);
    carried_ += take;
    bytes += take;
    n -= take;
    if (carried_ < element_) return;
    Apply(carry_, 1);
    carried_ = 0;
  }
  const size_t whole = n / element_;
  Apply(bytes, static_cast<int64_t>(whole));
  carried_ = n - whole * element_;
  std::memcpy(carry_, bytes + whole * element_, carried_);
}

absl::Status CheckMessageLength(size_t bytes, int64_t count, WireType type) {
  const size_t expected = static_cast<size_t>(count) * WireElementBytes(type);
  if (bytes == expected) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("expected ", expected, " bytes (", count, " ",
                   WireTypeName(type), " values), received ", bytes, " bytes"));
}

}  // namespace lockstep
