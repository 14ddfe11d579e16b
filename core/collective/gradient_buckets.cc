// Bucket assembly and the communication thread (see gradient_buckets.h).
#include "core/collective/gradient_buckets.h"

#include <chrono>
#include <cstring>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"

namespace lockstep {
namespace {

double Seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
      .count();
}

}  // namespace

GradientBuckets::GradientBuckets(const std::vector<Param*>& params,
                                 int64_t bucket_bytes, Transport* transport,
                                 RingOptions ring)
    : params_(params), transport_(transport), ring_(ring) {
  bucket_of_.assign(params.size(), -1);
  Bucket current;
  for (int i = static_cast<int>(params.size()) - 1; i >= 0; --i) {
    if (params[i]->update == ParamUpdate::kFrozen) continue;  // never sent
    current.params.push_back(i);
    current.elements += params[i]->grad.size();
    if (current.elements * static_cast<int64_t>(sizeof(float)) >=
        bucket_bytes) {
      buckets_.push_back(std::move(current));
      current = Bucket();
    }
  }
  if (!current.params.empty()) buckets_.push_back(std::move(current));
  for (size_t b = 0; b < buckets_.size(); ++b) {
    for (int i : buckets_[b].params) bucket_of_[i] = static_cast<int>(b);
    if (buckets_[b].params.size() > 1) {
      buckets_[b].fused.resize(buckets_[b].elements);
    }
  }
  {
    absl::MutexLock lock(&mu_);
    pending_.assign(buckets_.size(), 0);
  }
  thread_ = std::thread([this] { Loop(); });
}

GradientBuckets::~GradientBuckets() {
  {
    absl::MutexLock lock(&mu_);
    shutdown_ = true;
    cv_.SignalAll();
  }
  thread_.join();
}

void GradientBuckets::BeginStep(int64_t generation, int64_t step) {
  absl::MutexLock lock(&mu_);
  generation_ = generation;
  step_ = step;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    pending_[b] = static_cast<int>(buckets_[b].params.size());
  }
  next_ = 0;
  done_ = 0;
  active_ = true;
  error_ = absl::OkStatus();
  stats_.allreduce_seconds = 0;
  stats_.bytes = 0;
  cv_.SignalAll();
}

void GradientBuckets::ParamReady(int param_index) {
  absl::MutexLock lock(&mu_);
  const int b = bucket_of_[param_index];
  if (b < 0) return;  // frozen
  if (--pending_[b] == 0) cv_.SignalAll();
}

absl::Status GradientBuckets::Reduce(int b) {
  Bucket& bucket = buckets_[b];
  CollectiveTag tag;
  {
    absl::MutexLock lock(&mu_);
    tag.generation = generation_;
    tag.step = step_;
  }
  tag.bucket = b;
  float* data;
  if (bucket.fused.empty()) {
    data = params_[bucket.params[0]]->grad.data();
  } else {
    float* dst = bucket.fused.data();
    for (int i : bucket.params) {
      const Tensor& g = params_[i]->grad;
      std::memcpy(dst, g.data(), sizeof(float) * g.size());
      dst += g.size();
    }
    data = bucket.fused.data();
  }
  RETURN_IF_ERROR(AnnotateStatus(
      RingAllReduce(*transport_, tag, data, bucket.elements, ring_),
      absl::StrFormat("all-reduce of gradient bucket %d (%d values)", b,
                      bucket.elements)));
  if (!bucket.fused.empty()) {
    const float* src = bucket.fused.data();
    for (int i : bucket.params) {
      Tensor& g = params_[i]->grad;
      std::memcpy(g.data(), src, sizeof(float) * g.size());
      src += g.size();
    }
  }
  return absl::OkStatus();
}

void GradientBuckets::Loop() {
  while (true) {
    int b;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return shutdown_ ||
               (active_ && next_ < num_buckets() && pending_[next_] == 0);
      };
      while (!ready()) cv_.Wait(&mu_);
      if (shutdown_) return;
      b = next_++;
    }
    bool failed;
    {
      absl::MutexLock lock(&mu_);
      failed = !error_.ok();
    }
    // After a failure the rest of the step is skipped: the step is lost.
    absl::Status s;
    const auto t0 = std::chrono::steady_clock::now();
    if (!failed) s = Reduce(b);
    const double dt = Seconds(t0);
    absl::MutexLock lock(&mu_);
    if (!s.ok() && error_.ok()) error_ = s;
    stats_.allreduce_seconds += dt;
    stats_.bytes += buckets_[b].elements * static_cast<int64_t>(sizeof(float));
    if (++done_ == num_buckets()) {
      active_ = false;
      cv_.SignalAll();
    }
  }
}

absl::Status GradientBuckets::FinishStep() {
  const auto t0 = std::chrono::steady_clock::now();
  absl::MutexLock lock(&mu_);
  while (done_ < num_buckets()) cv_.Wait(&mu_);
  active_ = false;
  stats_.wait_seconds = Seconds(t0);
  return error_;
}

BucketStats GradientBuckets::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

}  // namespace lockstep
