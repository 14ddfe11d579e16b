// Bucket assembly and the communication thread (see gradient_buckets.h).
#include "core/collective/gradient_buckets.h"

#include <algorithm>
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
                                 RingOptions ring, BucketSharding sharding)
    : params_(params),
      transport_(transport),
      ring_(ring),
      shard_(sharding.shard),
      copies_(sharding.shard && sharding.copies),
      release_(sharding.shard && sharding.release) {
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
  stats_.released_bytes = 0;
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
      shard_ ? RingReduceScatter(*transport_, tag, data, bucket.elements, ring_)
             : RingAllReduce(*transport_, tag, data, bucket.elements, ring_),
      absl::StrFormat("%s of gradient bucket %d (%d values)",
                      shard_ ? "reduce-scatter" : "all-reduce", b,
                      bucket.elements)));
  if (copies_) {
    // The owned sums to the next rank, which keeps a copy of this rank's
    // part: float32, so the copy has the owner's bits whatever the wire.
    RingOptions pass = ring_;
    pass.wire = WireType::kFloat32;
    tag.bucket = kGradCopyBucket + b;
    RETURN_IF_ERROR(AnnotateStatus(
        RingPassOwned(*transport_, tag, data, bucket.elements, pass),
        absl::StrFormat("the pass of gradient bucket %d's sums to the next "
                        "rank (%d values)",
                        b, bucket.elements)));
  }
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

int64_t GradientBuckets::Release(int b) {
  const Bucket& bucket = buckets_[b];
  const int world = transport_->world_size();
  const int rank = transport_->rank();
  // The segments kept, in bucket order: this rank's and, with copies, the
  // previous rank's (the segment before it on the ring, wrapping).
  std::vector<RingSegment> kept = {
      RingSegmentBounds(bucket.elements, world, RingOwnedSegment(rank, world))};
  if (copies_ && world > 1) {
    kept.push_back(
        RingSegmentBounds(bucket.elements, world,
                          RingOwnedSegment((rank + world - 1) % world, world)));
  }
  std::sort(kept.begin(), kept.end(),
            [](const RingSegment& x, const RingSegment& y) {
              return x.begin < y.begin;
            });
  int64_t released = 0;
  // Bucket elements [from, to) of every param in it.
  auto release = [&](int64_t from, int64_t to) {
    int64_t at = 0;
    for (int i : bucket.params) {
      Tensor& g = params_[i]->grad;
      const int64_t begin = std::max(from, at);
      const int64_t end = std::min(to, at + g.size());
      if (begin < end)
        released += ReleasePages(g.data() + begin - at, end - begin);
      at += g.size();
    }
  };
  int64_t from = 0;
  for (const RingSegment& k : kept) {
    release(from, k.begin);
    from = std::max(from, k.begin + k.size);
  }
  release(from, bucket.elements);
  return released;
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
    int64_t released = 0;
    // What it throws (std::bad_alloc) FinishStep rethrows; the step fails.
    if (thrown_.Run([&] {
          if (!failed) s = Reduce(b);
          if (s.ok() && !failed && release_) released = Release(b);
        })) {
      s = absl::InternalError("the bucket's all-reduce threw");
    }
    const double dt = Seconds(t0);
    absl::MutexLock lock(&mu_);
    stats_.released_bytes += released;
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
  absl::Status error;
  {
    absl::MutexLock lock(&mu_);
    while (done_ < num_buckets()) cv_.Wait(&mu_);
    active_ = false;
    stats_.wait_seconds = Seconds(t0);
    error = error_;
  }
  thrown_.RethrowIfAny();
  return error;
}

std::vector<ParamRange> GradientBuckets::CopyRanges() const {
  const int world = transport_->world_size();
  if (world == 1) return {};
  return OwnedRanges((transport_->rank() + world - 1) % world);
}

std::vector<ParamRange> GradientBuckets::OwnedRanges(int rank) const {
  std::vector<ParamRange> out;
  const int world = transport_->world_size();
  for (const Bucket& bucket : buckets_) {
    const RingSegment own = RingSegmentBounds(bucket.elements, world,
                                              RingOwnedSegment(rank, world));
    int64_t at = 0;  // the param's first element in the bucket
    for (int i : bucket.params) {
      const int64_t n = params_[i]->value.size();
      const int64_t begin = std::max(at, own.begin);
      const int64_t end = std::min(at + n, own.begin + own.size);
      if (begin < end) out.push_back({i, begin - at, end - begin});
      // An empty param's (empty) state: rank 0's, so that some rank
      // names it in a checkpoint.
      if (n == 0 && rank == 0) out.push_back({i, 0, 0});
      at += n;
    }
  }
  std::sort(out.begin(), out.end(),
            [](const ParamRange& a, const ParamRange& b) {
              return a.param < b.param;
            });
  return out;
}

absl::Status GradientBuckets::GatherParams(int64_t generation, int64_t step) {
  RingOptions ring = ring_;
  ring.wire = WireType::kFloat32;
  for (int b = 0; b < num_buckets(); ++b) {
    Bucket& bucket = buckets_[b];
    const CollectiveTag tag{generation, step, kParamGatherBucket + b, 0};
    float* data = params_[bucket.params[0]]->value.data();
    if (!bucket.fused.empty()) {
      float* dst = bucket.fused.data();
      for (int i : bucket.params) {
        const Tensor& v = params_[i]->value;
        std::memcpy(dst, v.data(), sizeof(float) * v.size());
        dst += v.size();
      }
      data = bucket.fused.data();
    }
    RETURN_IF_ERROR(AnnotateStatus(
        RingAllGather(*transport_, tag, data, bucket.elements, ring),
        absl::StrFormat("all-gather of the parameters of bucket %d (%d values)",
                        b, bucket.elements)));
    if (!bucket.fused.empty()) {
      const float* src = bucket.fused.data();
      for (int i : bucket.params) {
        Tensor& v = params_[i]->value;
        std::memcpy(v.data(), src, sizeof(float) * v.size());
        src += v.size();
      }
    }
  }
  return absl::OkStatus();
}

BucketStats GradientBuckets::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

}  // namespace lockstep
