// The background batching thread and its bounded queue.
#include "core/data/batch_prefetcher.h"

#include <algorithm>
#include <cstring>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace lockstep {

Batch MakeBatch(const Dataset& data, const ShardPlan& plan,
                const std::vector<int64_t>& replica_indices,
                const Shape& input_shape, int64_t global_step,
                StepPool* fill) {
  Batch b;
  const int64_t spe = plan.steps_per_epoch();
  b.global_step = global_step;
  b.epoch = spe > 0 ? global_step / spe : 0;
  b.step_in_epoch = spe > 0 ? global_step % spe : 0;
  b.global_count = plan.GlobalBatchCount(b.epoch, b.step_in_epoch);
  b.global_labels = b.global_count * data.labels_per_sample;
  if (data.maker != nullptr) {
    b.global_labels = 0;
    for (int64_t i : plan.GlobalBatch(b.epoch, b.step_in_epoch)) {
      b.global_labels += data.LabelCount(i);
    }
  }
  const int64_t per = NumElements(data.sample_shape);
  const int64_t lps = data.labels_per_sample;
  b.replicas.resize(replica_indices.size());
  // Every sample of the batch: (replica, position in its slice, index).
  struct Slot {
    size_t replica;
    int64_t pos, index;
  };
  std::vector<Slot> slots;
  for (size_t r = 0; r < replica_indices.size(); ++r) {
    const std::vector<int64_t> idx =
        plan.ReplicaSlice(b.epoch, b.step_in_epoch, replica_indices[r]);
    const int64_t n = static_cast<int64_t>(idx.size());
    ReplicaBatch& rb = b.replicas[r];
    Shape shape;
    shape.reserve(input_shape.size() + 1);
    shape.push_back(n);
    shape.insert(shape.end(), input_shape.begin(), input_shape.end());
    rb.x = Tensor(std::move(shape));
    rb.labels.resize(n * lps);
    for (int64_t i = 0; i < n; ++i) slots.push_back({r, i, idx[i]});
    b.indices.insert(b.indices.end(), idx.begin(), idx.end());
  }
  auto fill_one = [&](const Slot& s) {
    ReplicaBatch& rb = b.replicas[s.replica];
    data.Fill(b.epoch, s.index, rb.x.data() + s.pos * per,
              rb.labels.data() + s.pos * lps);
  };
  if (fill == nullptr || fill->lanes() == 1) {
    for (const Slot& s : slots) fill_one(s);
  } else {
    // Each sample is a pure function of (epoch, index) written to its own
    // place: the lanes' interleaving changes nothing.
    const size_t lanes = static_cast<size_t>(fill->lanes());
    fill->Run([&](int lane) {
      for (size_t k = static_cast<size_t>(lane); k < slots.size(); k += lanes) {
        fill_one(slots[k]);
      }
    });
  }
  return b;
}

Batch MicroBatch(const Batch& step, int32_t k, int32_t count, int64_t size) {
  Batch b;
  b.global_step = step.global_step;
  b.epoch = step.epoch;
  b.step_in_epoch = step.step_in_epoch;
  b.global_count = step.global_count;
  b.global_labels = step.global_labels;
  b.micro = k;
  b.micros = count;
  b.replicas.resize(step.replicas.size());
  for (size_t r = 0; r < step.replicas.size(); ++r) {
    const ReplicaBatch& from = step.replicas[r];
    const int64_t n = from.x.rank() > 0 ? from.x.shape()[0] : 0;
    const int64_t begin = std::min(n, k * size);
    const int64_t take = std::min(n, begin + size) - begin;
    const int64_t per = n > 0 ? from.x.size() / n : 0;
    const int64_t lps = n > 0 ? static_cast<int64_t>(from.labels.size()) / n : 0;
    Shape shape = from.x.shape();
    if (shape.empty()) shape.push_back(0);
    shape[0] = take;
    ReplicaBatch& rb = b.replicas[r];
    rb.x = Tensor(std::move(shape));
    if (take > 0) {
      std::memcpy(rb.x.data(), from.x.data() + begin * per,
                  sizeof(float) * take * per);
    }
    rb.labels.assign(from.labels.begin() + begin * lps,
                     from.labels.begin() + (begin + take) * lps);
  }
  return b;
}

int FillThreads(const Dataset& data) {
  if (data.maker == nullptr) return 1;  // a copy: no work to share
  const int cores =
      static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::clamp(cores / 4, 1, 8);
}

BatchPrefetcher::BatchPrefetcher(const Dataset* data, const ShardPlan* plan,
                                 std::vector<int64_t> replica_indices,
                                 Shape input_shape, int64_t start_step,
                                 int64_t end_step, int depth)
    : data_(data),
      plan_(plan),
      replica_indices_(std::move(replica_indices)),
      input_shape_(std::move(input_shape)),
      start_step_(start_step),
      end_step_(std::max(start_step, end_step)),
      depth_(static_cast<size_t>(std::max(depth, 1))),
      next_to_return_(start_step) {
  // Samples made when batched (decoded images, masked text) are made on
  // several threads where the machine has cores to spare.
  const int lanes = FillThreads(*data_);
  if (lanes > 1) fill_pool_ = std::make_unique<StepPool>(lanes);
  if (plan_->steps_per_epoch() > 0) thread_ = std::thread([this] { Run(); });
}

BatchPrefetcher::~BatchPrefetcher() { Stop(); }

bool BatchPrefetcher::CanProduce() const {
  return stop_ || ready_.size() < depth_;
}

bool BatchPrefetcher::CanConsume() const {
  return stop_ || !ready_.empty() || error_ != nullptr;
}

void BatchPrefetcher::Run() {
  for (int64_t step = start_step_; step < end_step_; ++step) {
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &BatchPrefetcher::CanProduce));
      if (stop_) return;
    }
    Batch b;
    try {
      b = MakeBatch(*data_, *plan_, replica_indices_, input_shape_, step,
                    fill_pool_.get());
    } catch (...) {
      absl::MutexLock lock(&mu_);
      error_ = std::current_exception();
      return;
    }
    absl::MutexLock lock(&mu_);
    if (stop_) return;
    try {
      ready_.push_back(std::move(b));
    } catch (...) {
      error_ = std::current_exception();
      return;
    }
  }
}

absl::StatusOr<Batch> BatchPrefetcher::Next() {
  std::exception_ptr error;
  {
    absl::MutexLock lock(&mu_);
    if (stop_) return absl::CancelledError("batch prefetcher was stopped");
    if (next_to_return_ >= end_step_) {
      return absl::OutOfRangeError(
          absl::StrCat("no batches after step ", end_step_));
    }
    if (plan_->steps_per_epoch() == 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "no batches: the dataset is empty (", data_->source, ")"));
    }
    mu_.Await(absl::Condition(this, &BatchPrefetcher::CanConsume));
    if (stop_) return absl::CancelledError("batch prefetcher was stopped");
    if (!ready_.empty()) {
      Batch b = std::move(ready_.front());
      ready_.pop_front();
      ++next_to_return_;
      return b;
    }
    error = error_;
  }
  std::rethrow_exception(error);
}

const Batch* BatchPrefetcher::PeekReady() {
  absl::MutexLock lock(&mu_);
  // Only the producer adds to ready_, at the back: a reference to the front
  // stays valid until the consumer's own Next() or Stop().
  if (stop_ || ready_.empty()) return nullptr;
  return &ready_.front();
}

void BatchPrefetcher::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    ready_.clear();
  }
  absl::MutexLock join_lock(&join_mu_);
  if (thread_.joinable()) thread_.join();
}

}  // namespace lockstep
