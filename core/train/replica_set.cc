// Local replicas: fork/join over lanes, fixed-order gradient sum, mirroring.
#include "core/train/replica_set.h"

#include <algorithm>
#include <cstring>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "core/collective/transport.h"
#include "core/random.h"
#include "kernels/cpu/threading.h"

namespace lockstep {
namespace {

// Evaluation runs the set in chunks of up to 1,000 samples whose
// activations stay under about 64 MB (a transformer's are ~2 MB a sample).
int64_t EvalChunk(const Model& m) {
  int64_t per_sample = 1;
  for (const GraphNode& node : m.graph().nodes()) per_sample += node.size;
  return std::clamp<int64_t>((int64_t{1} << 24) / per_sample, 1, 1000);
}

}  // namespace

absl::StatusOr<std::unique_ptr<ReplicaSet>> ReplicaSet::Create(
    const JobSpec& spec, std::vector<int64_t> replica_indices, int threads) {
  if (replica_indices.empty()) {
    return absl::InvalidArgumentError("a replica set needs a replica");
  }
  std::unique_ptr<ReplicaSet> set(new ReplicaSet());
  for (size_t r = 0; r < replica_indices.size(); ++r) {
    ASSIGN_OR_RETURN(std::unique_ptr<Replica> replica, MakeCpuReplica(spec));
    set->replicas_.push_back(std::move(replica));
  }
  set->indices_ = std::move(replica_indices);
  const size_t num_params = set->params().size();
  set->ready_counts_ = std::make_unique<std::atomic<int>[]>(num_params);
  ReplicaSet* raw = set.get();
  for (size_t r = 0; r < set->replicas_.size(); ++r) {
    set->replicas_[r]->SetGradReadyCallback(
        [raw](int i) { raw->OnGradReady(i); });
  }
  if (threads <= 0) {
    threads =
        static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  }
  int lanes = static_cast<int>(std::min<int64_t>(set->size(), threads));
  if (set->primary().graph().sums_across_replicas()) {
    set->pass_sum_ = std::make_unique<ReplicaSum>(set->size());
    for (int64_t r = 0; r < set->size(); ++r) {
      set->replicas_[r]->host().SetPassCollective(set->pass_sum_->For(r));
    }
    lanes = static_cast<int>(set->size());
  }
  set->pool_ = std::make_unique<StepPool>(lanes);
  SetNumThreads(lanes > 1 ? 1 : threads);
  return set;
}

void ReplicaSet::OnGradReady(int i) {
  if (keeping_) return;  // an earlier micro-batch: nothing is final yet
  const int64_t n = size();
  if (ready_counts_[i].fetch_add(1, std::memory_order_acq_rel) + 1 != n) {
    return;
  }
  const int64_t count = params()[i]->grad.size();
  if (adding_kept_ && params()[i]->update != ParamUpdate::kFrozen) {
    // The last micro-batch: each replica's own sum over the step's
    // micro-batches first, as a worker holding that replica alone has it.
    for (int64_t r = 0; r < n; ++r) {
      float* g = replicas_[r]->host().params()[i]->grad.data();
      const float* kept = kept_[r][i].data();
      for (int64_t k = 0; k < count; ++k) g[k] += kept[k];
    }
  }
  // Every replica is done with param i: sum in replica order (the same
  // bytes whichever lane gets here last).
  float* dst = params()[i]->grad.data();
  for (int64_t r = 1; r < n && params()[i]->update != ParamUpdate::kFrozen;
       ++r) {
    float* src = replicas_[r]->host().params()[i]->grad.data();
    for (int64_t k = 0; k < count; ++k) dst[k] += src[k];
    if (release_summed_) ReleasePages(src, count);
  }
  if (on_param_summed_ != nullptr && *on_param_summed_) (*on_param_summed_)(i);
}

absl::StatusOr<BatchLoss> ReplicaSet::ComputeGradients(
    Batch& batch, const Loss& loss, uint64_t seed,
    const std::function<void(int param_index)>& on_param_summed) {
  const int lanes = pool_->lanes();
  const int64_t n = size();
  const float scale = batch.global_labels > 0 ? 1.0f / batch.global_labels : 0;
  const size_t num_params = params().size();
  for (size_t i = 0; i < num_params; ++i) {
    ready_counts_[i].store(0, std::memory_order_relaxed);
  }
  on_param_summed_ = &on_param_summed;
  // Gradient accumulation: before the last micro-batch each replica keeps
  // (adds up) its gradients; the last adds them in before the sum.
  keeping_ = batch.micro + 1 < batch.micros;
  adding_kept_ = batch.micros > 1 && !keeping_;
  if (batch.micros > 1) kept_.resize(n);
  if (pass_sum_ != nullptr) {
    ReplicaSum::CrossSum cross;
    if (worker_sum_) {
      cross = [this, step = batch.global_step,
               micro = batch.micro * kPassSumMicroStride](
                  int32_t key, float* data, int64_t count) {
        return worker_sum_(step, key + micro, data, count);
      };
    }
    pass_sum_->BeginStep(std::move(cross));
  }
  std::vector<absl::StatusOr<BatchLoss>> losses(n);
  pool_->Run([&](int lane) {
    for (int64_t r = lane; r < n; r += lanes) {
      ReplicaBatch& rb = batch.replicas[r];
      uint64_t dropout_seed =
          MixSeed(MixSeed(seed, batch.global_step), indices_[r]);
      if (batch.micro > 0) dropout_seed = MixSeed(dropout_seed, batch.micro);
      try {
        losses[r] = replicas_[r]->TrainStep(rb.x, rb.labels.data(), loss, scale,
                                            dropout_seed);
      } catch (...) {
        // Released from the barriers they wait at (sync batch norm) before
        // StepPool::Run carries this to the caller.
        if (pass_sum_ != nullptr) pass_sum_->Finished(static_cast<int>(r));
        throw;
      }
      if (pass_sum_ != nullptr) pass_sum_->Finished(static_cast<int>(r));
      if (keeping_ && losses[r].ok()) Keep(r, batch.micro == 0);
    }
  });
  on_param_summed_ = nullptr;
  if (pass_sum_ != nullptr) {
    RETURN_IF_ERROR(AnnotateStatus(
        pass_sum_->status(), "the sums across replicas in the pass (sync "
                             "batch norm)"));
  }
  BatchLoss total;
  for (int64_t r = 0; r < n; ++r) {
    if (!losses[r].ok()) {
      return AnnotateStatus(losses[r].status(),
                            absl::StrCat("replica ", indices_[r], " on ",
                                         replicas_[r]->device()));
    }
    total += *losses[r];
  }
  return total;
}

void ReplicaSet::Keep(int64_t r, bool first) {
  const std::vector<Param*>& params = replicas_[r]->host().params();
  std::vector<Tensor>& kept = kept_[r];
  kept.resize(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    if (params[i]->update == ParamUpdate::kFrozen) continue;
    const Tensor& g = params[i]->grad;
    if (first) {
      kept[i] = g;
      continue;
    }
    float* dst = kept[i].data();
    const float* src = g.data();
    for (int64_t k = 0; k < g.size(); ++k) dst[k] += src[k];
  }
}

absl::Status ReplicaSet::MirrorParams() {
  const std::vector<Param*>& p0 = params();
  for (int64_t r = 1; r < size(); ++r) {
    const std::vector<Param*>& pr = replicas_[r]->host().params();
    for (size_t i = 0; i < p0.size(); ++i) {
      std::memcpy(pr[i]->value.data(), p0[i]->value.data(),
                  sizeof(float) * p0[i]->value.size());
    }
  }
  for (int64_t r = 0; r < size(); ++r) {
    RETURN_IF_ERROR(AnnotateStatus(
        replicas_[r]->ParamsChanged(),
        absl::StrCat("replica ", indices_[r], " on ", replicas_[r]->device())));
  }
  return absl::OkStatus();
}

absl::StatusOr<BatchLoss> ReplicaSet::Evaluate(const Dataset& data,
                                               const Loss& loss) {
  const int64_t n = data.num_samples;
  const int64_t per = NumElements(data.sample_shape);
  const int64_t lps = data.labels_per_sample;
  const int64_t chunk = EvalChunk(primary());
  const int64_t chunks = (n + chunk - 1) / chunk;
  std::vector<absl::StatusOr<BatchLoss>> results(chunks);
  const int lanes = pool_->lanes();
  pool_->Run([&](int lane) {
    Tensor x;
    std::vector<int32_t> labels;
    for (int64_t c = lane; c < chunks; c += lanes) {
      const int64_t begin = c * chunk;
      const int64_t count = std::min(chunk, n - begin);
      Shape shape = replicas_[lane]->host().input_shape();
      shape.insert(shape.begin(), count);
      x.Resize(shape);
      labels.resize(count * lps);
      for (int64_t i = 0; i < count; ++i) {
        data.Fill(kEvalEpoch, begin + i, x.data() + i * per,
                  labels.data() + i * lps);
      }
      results[c] = replicas_[lane]->Evaluate(x, labels.data(), loss);
    }
  });
  BatchLoss total;
  for (const auto& b : results) {
    if (!b.ok()) return AnnotateStatus(b.status(), "evaluation");
    total += *b;
  }
  return total;
}

}  // namespace lockstep
