// NCCL data parallelism over the local GPUs (see gpu_replicas_internal.h): a
// step is forward/backward, one in-place all-reduce of the whole flat
// gradient buffer, and one fused optimizer launch over the flat parameter
// buffer, on every local GPU in parallel (one StepPool lane each); the
// update and everything that crosses to the host are
// gpu_replicas_host.cc.
#include "core/gpu/gpu_replicas_cuda.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstring>
#include <exception>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "core/collective/replica_sum.h"
#include "core/data/batch_prefetcher.h"
#include "core/gpu/gpu_model.h"
#include "core/gpu/gpu_replicas_internal.h"
#include "core/random.h"
#include "core/step_pool.h"
#include "core/tensor.h"
#include "kernels/cuda/cuda_memory.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/layers/batch_norm.h"
#include "kernels/cuda/nccl_communicator.h"
#include "kernels/cuda/optimizer.h"

namespace lockstep {
namespace cuda {
namespace {

// Evaluation chunks: activations under about 256 MB of device memory.
int64_t EvalChunk(const GpuModel& m) {
  int64_t per_sample = 1;
  for (const GraphNode& node : m.host_model().graph().nodes()) {
    per_sample += node.size;
  }
  return std::clamp<int64_t>((int64_t{1} << 26) / per_sample, 1, 1000);
}

}  // namespace

CudaGpuReplicas::CudaGpuReplicas(const GpuReplicasConfig& config,
                                 std::vector<Lane> lanes,
                                 PinnedHostBuffer host_sum)
    : optimizer_(config.spec.optimizer),
      world_(config.world_replicas),
      micros_(std::max<int32_t>(config.micros, 1)),
      micro_size_(config.spec.batch_size_per_replica),
      host_all_reduce_(config.host_all_reduce),
      lanes_(std::move(lanes)),
      pool_(static_cast<int>(lanes_.size())),
      host_sum_(std::move(host_sum)),
      loss_scale_(config.spec.precision == Precision::kFp16),
      keep_state_(config.keep_state),
      pass_sum_fn_(config.pass_sum) {
  if (lanes_[0].model->host_model().graph().sums_across_replicas()) {
    pass_sum_ = std::make_unique<ReplicaSum>(static_cast<int>(lanes_.size()));
    for (size_t i = 0; i < lanes_.size(); ++i) {
      lanes_[i].model->SetPassCollective(pass_sum_->For(static_cast<int>(i)));
    }
  }
}

absl::StatusOr<BatchLoss> CudaGpuReplicas::Step(Batch& batch, const Batch* next,
                                                const Loss& loss, uint64_t seed,
                                                double lr) {
  RETURN_IF_ERROR(Usable());
  if (!broken_.ok()) return broken_;
  if (batch.replicas.size() != lanes_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("GpuReplicas::Step: ", batch.replicas.size(),
                     " replica batches for ", lanes_.size(), " GPUs"));
  }
  if (next != nullptr &&
      (next->replicas.size() != lanes_.size() || micros_ > 1)) {
    next = nullptr;  // micro-batches are staged one by one
  }
  // Gradient accumulation: the step's micro-batches, every GPU's share.
  std::vector<Batch> micro;
  for (int32_t k = 0; micros_ > 1 && k < micros_; ++k) {
    micro.push_back(MicroBatch(batch, k, micros_, micro_size_));
  }
  std::vector<BatchLoss> earlier(lanes_.size());
  const int64_t step = batch.global_step;
  updating_.store(false);
  // fp16: the loss's gradient times the loss scale (a power of two).
  const float scale =
      batch.global_labels > 0
          ? static_cast<float>(loss_scale_.scale() / batch.global_labels)
          : 0;
  const bool via_host = static_cast<bool>(host_all_reduce_);
  std::vector<absl::StatusOr<BatchLoss>> losses(lanes_.size());
  if (pass_sum_ != nullptr) {
    ReplicaSum::CrossSum cross;
    if (pass_sum_fn_) {
      cross = [this, step](int32_t key, float* data, int64_t count) {
        return pass_sum_fn_(step, key, data, count);
      };
    }
    pass_sum_->BeginStep(std::move(cross));
  }
  // Every lane: forward/backward and the NCCL sum enqueued; without the
  // host leg the update too, then one wait.
  try {
    pool_.Run([&](int i) {
      Lane& lane = lanes_[i];
      // What the lane throws (std::bad_alloc) fails it as an error does,
      // so the other lanes are released from their waits, and is rethrown
      // for StepPool::Run to carry to the caller.
      std::exception_ptr thrown;
      bool finished = false;
      absl::Status s;
      try {
        s = LaneCompute(lane, batch.replicas[i], step,
                        next != nullptr ? &next->replicas[i] : nullptr,
                        next != nullptr ? next->global_step : -1, loss, scale,
                        seed, micro, i, &earlier[i]);
        if (pass_sum_ != nullptr) {
          pass_sum_->Finished(i);
          finished = true;
          // A failed sum left this lane's statistics unspecified.
          if (s.ok()) {
            s = AnnotateStatus(pass_sum_->status(),
                               "the sums across replicas in the pass (sync "
                               "batch norm)");
          }
        }
        if (s.ok() && via_host && i == 0) s = SumToHost(lane, step);
        if (s.ok()) {
          s = LaneFinish(lane, step, via_host ? nullptr : &lr,
                         batch.global_count);
        }
        if (s.ok()) {
          BatchLoss l = earlier[i];  // the micro-batches' in order
          l += lane.model->LossAfterSync();
          losses[i] = l;
        }
      } catch (...) {
        thrown = std::current_exception();
        s = absl::InternalError("the lane threw");
      }
      if (pass_sum_ != nullptr && !finished) pass_sum_->Finished(i);
      if (!s.ok()) {
        losses[i] = s;
        // The other local lanes may wait in the all-reduce for this one.
        AbortCommunicators();
        // And this lane's own sum may still be enqueued (a failed pass sum
        // fails the lane after LaneCompute enqueued it): waiting on the
        // aborted communicator aborts NCCL, so its kernels quit and a later
        // pull of the state (CopyState) does not wait on them forever.
        lane.comm->WaitStream(lane.model->stream()).IgnoreError();
      }
      if (thrown) std::rethrow_exception(thrown);
    });
  } catch (...) {
    // The communicators are aborted and the GPUs may disagree: no later
    // step runs on them.
    broken_ =
        absl::InternalError("a replica's step threw (out of host memory?)");
    throw;
  }
  absl::StatusOr<BatchLoss> total = Sum(losses);
  if (total.ok() && via_host) {
    // The gRPC ring over the workers, then the sum back to every GPU and
    // the update there.
    absl::Status s = host_all_reduce_(step, host_sum_.as<float>(),
                                      lanes_[0].model->flat_floats());
    if (s.ok()) {
      std::vector<absl::StatusOr<BatchLoss>> applied(lanes_.size());
      pool_.Run([&](int i) {
        absl::Status a =
            LaneApplyHostSum(lanes_[i], step, lr, batch.global_count);
        applied[i] = a.ok() ? absl::StatusOr<BatchLoss>(BatchLoss())
                            : absl::StatusOr<BatchLoss>(a);
      });
      s = Sum(applied).status();
    }
    if (!s.ok()) total = s;
  }
  bool applied = true;
  if (total.ok() && loss_scale_.enabled()) {
    // Every GPU updated from the same sums, so any lane's say; the update
    // kernels already skipped a step that was not finite.
    absl::StatusOr<bool> finite = lanes_[0].optimizer->GradientsFinite();
    if (finite.ok()) {
      applied = loss_scale_.Update(*finite);
    } else {
      total = finite.status();
    }
  }
  if (!total.ok()) {
    if (aborted_.load()) return Cancelled();
    broken_ = total.status();  // the GPUs may disagree now
    return broken_;
  }
  if (applied) ++iterations_;
  updating_.store(false);  // every device holds this step's state
  return total;
}

absl::StatusOr<BatchLoss> CudaGpuReplicas::Evaluate(const Dataset& data,
                                                    const Loss& loss) {
  RETURN_IF_ERROR(Usable());
  GpuModel& model = *lanes_[0].model;
  // Evaluation stages its chunks through the same slots: a batch staged
  // for the next step may be overwritten, so that step stages it again.
  lanes_[0].staged_step = -1;
  const int64_t n = data.num_samples;
  const int64_t per = NumElements(data.sample_shape);
  const int64_t lps = data.labels_per_sample;
  const int64_t chunk = EvalChunk(model);
  std::vector<float> x;
  std::vector<int32_t> labels;
  BatchLoss total;
  for (int64_t begin = 0; begin < n; begin += chunk) {
    const int64_t count = std::min(chunk, n - begin);
    x.resize(count * per);
    labels.resize(count * lps);
    for (int64_t i = 0; i < count; ++i) {
      data.Fill(kEvalEpoch, begin + i, x.data() + i * per,
                labels.data() + i * lps);
    }
    absl::StatusOr<BatchLoss> l =
        model.Evaluate(x.data(), labels.data(), count, loss);
    if (!l.ok()) {
      return AnnotateStatus(l.status(),
                            absl::StrCat("evaluation on ", Where(lanes_[0])));
    }
    total += *l;  // chunk order, as ReplicaSet::Evaluate
  }
  return total;
}

void CudaGpuReplicas::Abort() {
  aborted_.store(true);
  AbortCommunicators();
  if (pass_sum_ != nullptr) pass_sum_->Abort(Cancelled());
}

absl::Status CudaGpuReplicas::Cancelled() {
  return absl::CancelledError("GpuReplicas was aborted");
}

absl::Status CudaGpuReplicas::Usable() const {
  return aborted_.load() ? Cancelled() : absl::OkStatus();
}

void CudaGpuReplicas::AbortCommunicators() {
  for (Lane& lane : lanes_) lane.comm->Abort();
}

std::string CudaGpuReplicas::Where(const Lane& lane) const {
  return absl::StrCat("cuda:", lane.model->device(), " (rank ", lane.replica,
                      " of ", world_, ")");
}

absl::StatusOr<GpuModel::StagedInput> CudaGpuReplicas::Stage(
    Lane& lane, const ReplicaBatch& rb, int64_t step) {
  const int64_t n = rb.x.shape().empty() ? 0 : rb.x.dim(0);
  const int64_t lps = lane.model->labels_per_sample();
  if (static_cast<int64_t>(rb.labels.size()) != n * lps) {
    return absl::InvalidArgumentError(absl::StrCat(
        "step ", step, " on ", Where(lane), ": ", n, " samples of ", lps,
        " labels but ", rb.labels.size(), " labels"));
  }
  absl::StatusOr<GpuModel::StagedInput> staged =
      lane.model->StageInputs(rb.x.data(), rb.labels.data(), n);
  if (!staged.ok()) {
    return AnnotateStatus(
        staged.status(),
        absl::StrCat("copying the batch of step ", step, " to ", Where(lane)));
  }
  return staged;
}

absl::Status CudaGpuReplicas::LaneCompute(
    Lane& lane, ReplicaBatch& rb, int64_t step, const ReplicaBatch* next,
    int64_t next_step, const Loss& loss, float scale, uint64_t seed,
    const std::vector<Batch>& micro, int index, BatchLoss* earlier) {
  GpuModel& model = *lane.model;
  // As ReplicaSet::ComputeGradients, so the masks match the CPU path's.
  const uint64_t dropout_seed = MixSeed(MixSeed(seed, step), lane.replica);
  const int32_t micros = static_cast<int32_t>(micro.size());
  const int64_t floats = model.flat_floats();
  for (int32_t k = 0; k + 1 < micros; ++k) {
    const std::string what =
        absl::StrCat("forward/backward of step ", step, ", micro-batch ", k,
                     ", on ", Where(lane));
    ASSIGN_OR_RETURN(GpuModel::StagedInput part,
                     Stage(lane, micro[k].replicas[index], step));
    RETURN_IF_ERROR(AnnotateStatus(
        model.EnqueueTrainStep(part, loss, scale,
                               k > 0 ? MixSeed(dropout_seed, k) : dropout_seed),
        what));
    // Kept as ReplicaSet::Keep: the first copied, the others added.
    CUDA_RETURN_IF_ERROR(
        k == 0 ? cudaMemcpyAsync(lane.kept->get(), model.device_grads(),
                                 floats * sizeof(float),
                                 cudaMemcpyDeviceToDevice, model.stream())
               : Axpy(floats, 1.0f, model.device_grads(), lane.kept->get(),
                      model.stream()));
    absl::StatusOr<BatchLoss> l = model.FinishStep();
    if (!l.ok()) return AnnotateStatus(l.status(), what);
    *earlier += *l;
  }
  GpuModel::StagedInput in = lane.staged;
  if (micros > 1) {
    ASSIGN_OR_RETURN(in, Stage(lane, micro[micros - 1].replicas[index], step));
  } else if (lane.staged_step != step) {
    ASSIGN_OR_RETURN(in, Stage(lane, rb, step));
  }
  lane.staged_step = -1;
  RETURN_IF_ERROR(AnnotateStatus(
      model.EnqueueTrainStep(
          in, loss, scale,
          micros > 1 ? MixSeed(dropout_seed, micros - 1) : dropout_seed),
      absl::StrCat("forward/backward of step ", step, " on ", Where(lane))));
  if (micros > 1) {
    // The last micro-batch's gradients plus the kept sum (ReplicaSet's
    // g += kept), before the sum over GPUs.
    CUDA_RETURN_IF_ERROR(Axpy(floats, 1.0f, lane.kept->get(),
                              model.device_grads(), model.stream()));
  }
  if (next != nullptr) {
    ASSIGN_OR_RETURN(lane.staged, Stage(lane, *next, next_step));
    lane.staged_step = next_step;
  }
  // Every rank has the same model, hence the same flat size: all skip or
  // all call. NCCL hands every rank the same bytes.
  if (model.flat_floats() > 0) {
    RETURN_IF_ERROR(AnnotateStatus(
        lane.comm->EnqueueAllReduceSum(model.device_grads(),
                                       model.flat_floats(), model.stream()),
        absl::StrCat("NCCL all-reduce of step ", step, " on ", Where(lane))));
  }
  return absl::OkStatus();
}

absl::Status CudaGpuReplicas::LaneFinish(Lane& lane, int64_t step,
                                         const double* lr,
                                         int64_t global_samples) {
  if (lr != nullptr) {
    if (keep_state_ && !host_all_reduce_) {
      // The NCCL sum first: a failed collective leaves the state as it
      // was (over the ring the update already follows the ring's sum).
      RETURN_IF_ERROR(
          AnnotateStatus(lane.comm->WaitStream(lane.model->stream()),
                         absl::StrCat("the sum over GPUs of step ", step,
                                      " on ", Where(lane))));
    }
    updating_.store(true);
    RETURN_IF_ERROR(AnnotateStatus(
        Update(lane, *lr, global_samples),
        absl::StrCat("optimizer update of step ", step, " on ", Where(lane))));
  }
  return AnnotateStatus(lane.comm->WaitStream(lane.model->stream()),
                        absl::StrCat("step ", step, " on ", Where(lane)));
}

absl::StatusOr<BatchLoss> CudaGpuReplicas::Sum(
    const std::vector<absl::StatusOr<BatchLoss>>& losses) {
  BatchLoss total;
  absl::Status first_error;
  for (const absl::StatusOr<BatchLoss>& l : losses) {
    if (l.ok()) {
      total += *l;
    } else if (first_error.ok() ||
               (first_error.code() == absl::StatusCode::kCancelled &&
                l.status().code() != absl::StatusCode::kCancelled)) {
      first_error = l.status();
    }
  }
  if (!first_error.ok()) return first_error;
  return total;
}

namespace {

absl::Status CheckConfig(const GpuReplicasConfig& c) {
  if (c.devices.empty()) {
    return absl::InvalidArgumentError("GpuReplicas: no local devices");
  }
  if (c.devices.size() != c.replica_indices.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("GpuReplicas: ", c.devices.size(), " devices but ",
                     c.replica_indices.size(), " replica indices"));
  }
  if (c.world_replicas < 1 || c.world_replicas > INT_MAX) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GpuReplicas: bad world of ", c.world_replicas, " replicas"));
  }
  for (int64_t r : c.replica_indices) {
    if (r < 0 || r >= c.world_replicas) {
      return absl::InvalidArgumentError(
          absl::StrCat("GpuReplicas: replica index ", r,
                       " outside the world of ", c.world_replicas));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<GpuReplicas>> MakeCudaGpuReplicas(
    const GpuReplicasConfig& config) {
  RETURN_IF_ERROR(CheckConfig(config));
  const size_t n = config.devices.size();
  std::vector<Lane> lanes(n);
  for (size_t i = 0; i < n; ++i) {
    const int device = config.devices[i];
    const std::string where = absl::StrCat("cuda:", device);
    Lane& lane = lanes[i];
    lane.replica = config.replica_indices[i];
    GpuModelOptions options;
    options.device = device;
    options.allow_tf32 = config.spec.cluster.allow_tf32;
    options.inputs =
        config.spec.precision == Precision::kBf16   ? InputRounding::kBf16
        : config.spec.precision == Precision::kFp16 ? InputRounding::kFp16
                                                    : InputRounding::kNone;
    absl::StatusOr<std::unique_ptr<GpuModel>> model =
        GpuModel::Create(config.spec.model, config.spec.seed, options);
    if (!model.ok()) return AnnotateStatus(model.status(), where);
    lane.model = *std::move(model);
    // Its optimizer: the slots, the update runs, the global norm when
    // clipping or loss scaling needs it.
    absl::StatusOr<std::unique_ptr<DeviceOptimizer>> opt =
        DeviceOptimizer::Create(device, config.spec.optimizer,
                                lane.model->host_model().params(),
                                LayoutOf(*lane.model),
                                config.spec.optimizer.global_clipnorm > 0 ||
                                    config.spec.precision == Precision::kFp16);
    if (!opt.ok()) return AnnotateStatus(opt.status(), where);
    lane.optimizer = *std::move(opt);
    if (config.micros > 1) {
      absl::StatusOr<std::unique_ptr<DeviceBuffer<float>>> k =
          DeviceBuffer<float>::Create(device, lane.model->flat_floats());
      if (!k.ok()) return AnnotateStatus(k.status(), where);
      lane.kept = *std::move(k);
    }
  }
  // The ring layout's NCCL spans the local GPUs only (rank = local index).
  const bool local = static_cast<bool>(config.host_all_reduce);
  const int nccl_world =
      local ? static_cast<int>(n) : static_cast<int>(config.world_replicas);
  auto nccl_rank = [&](size_t i) {
    return local ? static_cast<int>(i)
                 : static_cast<int>(config.replica_indices[i]);
  };
  PinnedHostBuffer host_sum;
  if (local) {
    ASSIGN_OR_RETURN(host_sum,
                     PinnedHostBuffer::Create(
                         std::max<int64_t>(lanes[0].model->flat_floats(), 1) *
                         sizeof(float)));
  }
  // NCCL's init is collective over every rank, the local ones included:
  // join them all at once. One failure cancels the others' waits.
  std::atomic<bool> cancel{false};
  std::vector<absl::StatusOr<std::unique_ptr<NcclCommunicator>>> comms(n);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      comms[i] =
          NcclCommunicator::Create(config.nccl_id, nccl_world, nccl_rank(i),
                                   config.devices[i], config.timeout, &cancel);
      if (!comms[i].ok()) cancel.store(true);
    });
  }
  for (std::thread& t : threads) t.join();
  absl::Status first_error;
  for (size_t i = 0; i < n; ++i) {
    if (comms[i].ok()) {
      lanes[i].comm = *std::move(comms[i]);
      continue;
    }
    if (first_error.ok() ||
        (first_error.code() == absl::StatusCode::kCancelled &&
         comms[i].status().code() != absl::StatusCode::kCancelled)) {
      first_error = AnnotateStatus(
          comms[i].status(),
          absl::StrCat(
              "joining the NCCL communicator on cuda:", config.devices[i],
              " (rank ", nccl_rank(i), " of ", nccl_world, ")"));
    }
  }
  if (!first_error.ok()) return first_error;
  return std::unique_ptr<GpuReplicas>(
      new CudaGpuReplicas(config, std::move(lanes), std::move(host_sum)));
}

}  // namespace cuda
}  // namespace lockstep
