// NCCL data parallelism over the local GPUs (see device_data_parallel.h): a
// step is forward/backward, one in-place all-reduce of the whole flat
// gradient buffer, and one fused optimizer launch over the flat parameter
// buffer, on every local GPU in parallel (one StepPool lane each).
#include "core/gpu/device_data_parallel.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "core/collective/replica_sum.h"
#include "core/gpu/gpu_model.h"
#include "core/random.h"
#include "core/step_pool.h"
#include "core/tensor.h"
#include "kernels/cuda/cuda_memory.h"
#include "kernels/cuda/cuda_status.h"
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

// A zeroed float buffer on one GPU, laid out like GpuModel's flat buffers:
// one optimizer slot (momentum, m or v) for every parameter.
class DeviceSlot {
 public:
  static absl::StatusOr<std::unique_ptr<DeviceSlot>> Create(int device,
                                                            int64_t floats) {
    CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
    std::unique_ptr<DeviceSlot> slot(new DeviceSlot(device));
    const size_t bytes = std::max<int64_t>(floats, 1) * sizeof(float);
    void* p = nullptr;
    CUDA_RETURN_IF_ERROR(cudaMalloc(&p, bytes));
    slot->ptr_ = static_cast<float*>(p);
    CUDA_RETURN_IF_ERROR(cudaMemset(slot->ptr_, 0, bytes));
    return slot;
  }
  ~DeviceSlot() {
    if (ptr_ == nullptr) return;
    cudaSetDevice(device_);
    cudaFree(ptr_);
  }
  DeviceSlot(const DeviceSlot&) = delete;
  DeviceSlot& operator=(const DeviceSlot&) = delete;

  float* get() const { return ptr_; }

 private:
  explicit DeviceSlot(int device) : device_(device) {}
  const int device_;
  float* ptr_ = nullptr;
};

// One local GPU. Members are destroyed bottom-up: the communicator before
// the buffers its pending work might touch.
struct Lane {
  int64_t replica = 0;  // global replica index = NCCL rank
  std::unique_ptr<GpuModel> model;
  // The batch staged for global step `staged_step` (-1: none).
  GpuModel::StagedInput staged;
  int64_t staged_step = -1;
  std::unique_ptr<DeviceSlot> first;   // SGD momentum or Adam m; null if none
  std::unique_ptr<DeviceSlot> second;  // Adam v; null if none
  std::unique_ptr<NcclCommunicator> comm;
};

int SlotCount(const OptimizerSpec& spec) {
  if (spec.type == OptimizerType::kSgd) return spec.momentum > 0 ? 1 : 0;
  return 2;
}

// The indices of the params the optimizer updates (and keeps state for):
// every one but batch norm's running statistics and frozen layers'.
std::vector<int> OptimizerParams(const std::vector<Param*>& params) {
  std::vector<int> out;
  for (size_t i = 0; i < params.size(); ++i) {
    if (params[i]->update == ParamUpdate::kOptimizer) {
      out.push_back(static_cast<int>(i));
    }
  }
  return out;
}

// A run of the flat buffers whose params are updated alike: [begin, end)
// in floats, padding included.
struct UpdateRun {
  ParamUpdate update = ParamUpdate::kOptimizer;
  float momentum = 0;  // kMovingAverage
  int64_t begin = 0, end = 0;
};

// The model's params as runs of one update kind (one run, the whole
// buffer, for a model whose params all belong to the optimizer).
std::vector<UpdateRun> UpdateRuns(const GpuModel& model) {
  const std::vector<Param*>& params = model.host_model().params();
  std::vector<UpdateRun> runs;
  for (size_t i = 0; i < params.size(); ++i) {
    const Param& p = *params[i];
    const int64_t begin = model.param_offset(static_cast<int>(i));
    const int64_t end = i + 1 < params.size()
                            ? model.param_offset(static_cast<int>(i + 1))
                            : model.flat_floats();
    if (!runs.empty() && runs.back().update == p.update &&
        runs.back().momentum == p.momentum) {
      runs.back().end = end;
    } else {
      runs.push_back(UpdateRun{p.update, p.momentum, begin, end});
    }
  }
  if (!runs.empty()) runs.front().begin = 0;
  return runs;
}

// Optimizer::StateTensors' names for `params`, in its order.
std::vector<std::string> SlotNames(const OptimizerSpec& spec,
                                   const std::vector<Param*>& all) {
  std::vector<const Param*> params;
  for (int i : OptimizerParams(all)) params.push_back(all[i]);
  const bool sgd = spec.type == OptimizerType::kSgd;
  const char* prefix = sgd                                 ? "sgd"
                       : spec.type == OptimizerType::kAdam ? "adam"
                                                           : "adamw";
  std::vector<std::string> names;
  const int slots = SlotCount(spec);
  if (slots >= 1) {
    for (const Param* p : params) {
      names.push_back(
          absl::StrCat(prefix, sgd ? "/momentum/" : "/m/", p->name));
    }
  }
  if (slots >= 2) {
    for (const Param* p : params) {
      names.push_back(absl::StrCat(prefix, "/v/", p->name));
    }
  }
  return names;
}

class CudaDeviceDataParallel final : public DeviceDataParallel {
 public:
  CudaDeviceDataParallel(const DeviceDataParallelConfig& config,
                         std::vector<Lane> lanes, PinnedHostBuffer host_sum)
      : optimizer_(config.spec.optimizer),
        world_(config.world_replicas),
        host_all_reduce_(config.host_all_reduce),
        lanes_(std::move(lanes)),
        pool_(static_cast<int>(lanes_.size())),
        host_sum_(std::move(host_sum)),
        runs_(UpdateRuns(*lanes_[0].model)),
        pass_sum_fn_(config.pass_sum) {
    if (lanes_[0].model->host_model().graph().sums_across_replicas()) {
      pass_sum_ = std::make_unique<ReplicaSum>(static_cast<int>(lanes_.size()));
      for (size_t i = 0; i < lanes_.size(); ++i) {
        lanes_[i].model->SetPassCollective(
            pass_sum_->For(static_cast<int>(i)));
      }
    }
  }

  absl::StatusOr<BatchLoss> Step(Batch& batch, const Batch* next, LossType loss,
                                 uint64_t seed, double lr) override {
    RETURN_IF_ERROR(Usable());
    if (!broken_.ok()) return broken_;
    if (batch.replicas.size() != lanes_.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("DeviceDataParallel::Step: ", batch.replicas.size(),
                       " replica batches for ", lanes_.size(), " GPUs"));
    }
    if (next != nullptr && next->replicas.size() != lanes_.size()) {
      next = nullptr;
    }
    const int64_t step = batch.global_step;
    const float scale =
        batch.global_labels > 0 ? 1.0f / batch.global_labels : 0;
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
    pool_.Run([&](int i) {
      Lane& lane = lanes_[i];
      absl::Status s = LaneCompute(
          lane, batch.replicas[i], step,
          next != nullptr ? &next->replicas[i] : nullptr,
          next != nullptr ? next->global_step : -1, loss, scale, seed);
      if (pass_sum_ != nullptr) {
        pass_sum_->Finished(i);
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
      losses[i] = s.ok()
                      ? absl::StatusOr<BatchLoss>(lane.model->LossAfterSync())
                      : absl::StatusOr<BatchLoss>(s);
      // The other local lanes may wait in the all-reduce for this one.
      if (!s.ok()) AbortCommunicators();
    });
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
    if (!total.ok()) {
      if (aborted_.load()) return Cancelled();
      broken_ = total.status();  // the GPUs may disagree now
      return broken_;
    }
    ++iterations_;
    return total;
  }

  absl::StatusOr<BatchLoss> Evaluate(const Dataset& data,
                                     LossType loss) override {
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

  absl::Status PullState(const std::vector<Param*>& params,
                         Optimizer& optimizer) override {
    RETURN_IF_ERROR(Usable());
    const Lane& lane = lanes_[0];
    RETURN_IF_ERROR(AnnotateStatus(
        lane.model->CopyParamsToHost(params),
        absl::StrCat("pulling the parameters from ", Where(lane))));
    ASSIGN_OR_RETURN(std::vector<Tensor*> states,
                     MatchState(params, optimizer));
    const std::vector<int> opt = OptimizerParams(params);
    const size_t np = opt.size();
    std::vector<float> flat(lane.model->flat_floats());
    for (size_t k = 0; k < states.size(); ++k) {
      if (k % np == 0) {
        const DeviceSlot& slot = *(k < np ? lane.first : lane.second);
        RETURN_IF_ERROR(AnnotateStatus(
            Copy(lane, flat.data(), slot.get(), cudaMemcpyDeviceToHost),
            absl::StrCat("pulling the optimizer state from ", Where(lane))));
      }
      const int i = opt[k % np];
      std::memcpy(states[k]->data(), flat.data() + lane.model->param_offset(i),
                  sizeof(float) * lane.model->param_size(i));
    }
    optimizer.set_iterations(iterations_);
    return absl::OkStatus();
  }

  absl::Status PushState(const std::vector<Param*>& params,
                         Optimizer& optimizer) override {
    RETURN_IF_ERROR(Usable());
    ASSIGN_OR_RETURN(std::vector<Tensor*> states,
                     MatchState(params, optimizer));
    const std::vector<int> opt = OptimizerParams(params);
    const size_t np = opt.size();
    const GpuModel& m0 = *lanes_[0].model;
    // Slot k / np laid out flat (zero padding), then onto every GPU.
    std::vector<std::vector<float>> flats(np == 0 ? 0 : states.size() / np);
    for (size_t k = 0; k < states.size(); ++k) {
      std::vector<float>& flat = flats[k / np];
      if (flat.empty()) flat.assign(m0.flat_floats(), 0.0f);
      const int i = opt[k % np];
      std::memcpy(flat.data() + m0.param_offset(i), states[k]->data(),
                  sizeof(float) * m0.param_size(i));
    }
    for (Lane& lane : lanes_) {
      const std::string where =
          absl::StrCat("pushing the state to ", Where(lane));
      RETURN_IF_ERROR(
          AnnotateStatus(lane.model->CopyParamsFromHost(params), where));
      for (size_t s = 0; s < flats.size(); ++s) {
        float* dev = (s == 0 ? lane.first : lane.second)->get();
        RETURN_IF_ERROR(AnnotateStatus(
            Copy(lane, dev, flats[s].data(), cudaMemcpyHostToDevice), where));
      }
    }
    iterations_ = optimizer.iterations();
    return absl::OkStatus();
  }

  void Abort() override {
    aborted_.store(true);
    AbortCommunicators();
    if (pass_sum_ != nullptr) pass_sum_->Abort(Cancelled());
  }

 private:
  static absl::Status Cancelled() {
    return absl::CancelledError("DeviceDataParallel was aborted");
  }
  absl::Status Usable() const {
    return aborted_.load() ? Cancelled() : absl::OkStatus();
  }
  // Thread-safe: lanes_ never changes after construction.
  void AbortCommunicators() {
    for (Lane& lane : lanes_) lane.comm->Abort();
  }
  std::string Where(const Lane& lane) const {
    return absl::StrCat("cuda:", lane.model->device(), " (rank ", lane.replica,
                        " of ", world_, ")");
  }

  // Copies one replica batch toward lane's GPU (GpuModel::StageInputs).
  absl::StatusOr<GpuModel::StagedInput> Stage(Lane& lane,
                                              const ReplicaBatch& rb,
                                              int64_t step) {
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
      return AnnotateStatus(staged.status(),
                            absl::StrCat("copying the batch of step ", step,
                                         " to ", Where(lane)));
    }
    return staged;
  }

  // One GPU's forward/backward and NCCL sum, enqueued on its stream (a
  // StepPool lane); the next batch's copy runs beside them on the copy
  // stream.
  absl::Status LaneCompute(Lane& lane, ReplicaBatch& rb, int64_t step,
                           const ReplicaBatch* next, int64_t next_step,
                           LossType loss, float scale, uint64_t seed) {
    GpuModel& model = *lane.model;
    GpuModel::StagedInput in = lane.staged;
    if (lane.staged_step != step) {
      ASSIGN_OR_RETURN(in, Stage(lane, rb, step));
    }
    lane.staged_step = -1;
    // As ReplicaSet::ComputeGradients, so the masks match the CPU path's.
    const uint64_t dropout_seed = MixSeed(MixSeed(seed, step), lane.replica);
    RETURN_IF_ERROR(AnnotateStatus(
        model.EnqueueTrainStep(in, loss, scale, dropout_seed),
        absl::StrCat("forward/backward of step ", step, " on ", Where(lane))));
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

  // Enqueues the update at `*lr` (none when null), then waits for the
  // lane's stream: the step's end, the all-reduce's included, so a peer
  // that is gone shows as an NCCL error here, not as a hang.
  absl::Status LaneFinish(Lane& lane, int64_t step, const double* lr,
                          int64_t global_samples) {
    if (lr != nullptr) {
      RETURN_IF_ERROR(AnnotateStatus(
          Update(lane, *lr, global_samples),
          absl::StrCat("optimizer update of step ", step, " on ",
                       Where(lane))));
    }
    return AnnotateStatus(lane.comm->WaitStream(lane.model->stream()),
                          absl::StrCat("step ", step, " on ", Where(lane)));
  }

  // The ring layout: lane's summed gradients into host_sum_ (enqueued).
  absl::Status SumToHost(Lane& lane, int64_t step) {
    const GpuModel& model = *lane.model;
    const absl::Status s =
        CUDA_STATUS(cudaMemcpyAsync(host_sum_.data(), model.device_grads(),
                                    model.flat_floats() * sizeof(float),
                                    cudaMemcpyDeviceToHost, model.stream()));
    return AnnotateStatus(s, absl::StrCat("copying step ", step,
                                          "'s gradients from ", Where(lane)));
  }

  // The ring layout: the workers' sum from host_sum_ onto lane's GPU, the
  // update, and a wait.
  absl::Status LaneApplyHostSum(Lane& lane, int64_t step, double lr,
                                int64_t global_samples) {
    GpuModel& model = *lane.model;
    CUDA_RETURN_IF_ERROR(cudaSetDevice(model.device()));
    const absl::Status s =
        CUDA_STATUS(cudaMemcpyAsync(model.device_grads(), host_sum_.data(),
                                    model.flat_floats() * sizeof(float),
                                    cudaMemcpyHostToDevice, model.stream()));
    RETURN_IF_ERROR(AnnotateStatus(
        s, absl::StrCat("copying step ", step, "'s summed gradients to ",
                        Where(lane))));
    return LaneFinish(lane, step, &lr, global_samples);
  }

  // The lanes' losses summed, or the first real error (not the lanes
  // cancelled because of it).
  static absl::StatusOr<BatchLoss> Sum(
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

  // Enqueues the updates: SGD/Adam/AdamW over each run of the optimizer's
  // params (one launch over the whole flat buffer for a model without batch
  // norm or frozen layers; the math is elementwise, so this equals
  // core/train/optimizer.cc's per-param loops on every real element, and the
  // padding, gradient and slots zero, updates to values nothing reads), the
  // moving averages of batch norm's statistics (UpdateMovingAverages'
  // math), and nothing for frozen params.
  absl::Status Update(Lane& lane, double lr, int64_t global_samples) {
    GpuModel& model = *lane.model;
    if (model.flat_floats() == 0) return absl::OkStatus();
    CUDA_RETURN_IF_ERROR(cudaSetDevice(model.device()));
    float* m = lane.first ? lane.first->get() : nullptr;
    float* v = lane.second ? lane.second->get() : nullptr;
    const OptimizerSpec& o = optimizer_;
    const SgdStep sgd = MakeSgdStep(lr, o.momentum, o.nesterov, o.weight_decay);
    const AdamStep adam = MakeAdamStep(lr, o.beta_1, o.beta_2, o.epsilon,
                                       o.weight_decay, iterations_);
    for (const UpdateRun& run : runs_) {
      const int64_t n = run.end - run.begin, at = run.begin;
      float* w = model.device_params() + at;
      const float* g = model.device_grads() + at;
      switch (run.update) {
        case ParamUpdate::kOptimizer:
          if (o.type == OptimizerType::kSgd) {
            CUDA_RETURN_IF_ERROR(SgdUpdate(n, sgd, w, m ? m + at : nullptr, g,
                                           model.stream()));
          } else {
            CUDA_RETURN_IF_ERROR(AdamUpdate(n, adam, w, m + at, v + at, g,
                                            model.stream()));
          }
          break;
        case ParamUpdate::kMovingAverage:
          if (global_samples > 0) {
            CUDA_RETURN_IF_ERROR(cuda::MovingAverageUpdate(
                n, run.momentum, 1.0 / static_cast<double>(global_samples), w,
                g, model.stream()));
          }
          break;
        case ParamUpdate::kFrozen:
          break;
      }
    }
    return absl::OkStatus();
  }

  // The optimizer's StateTensors, checked against this optimizer's slots
  // for `params` (names, order and sizes).
  absl::StatusOr<std::vector<Tensor*>> MatchState(
      const std::vector<Param*>& params, Optimizer& optimizer) const {
    const GpuModel& m0 = *lanes_[0].model;
    if (static_cast<int>(params.size()) != m0.num_params()) {
      return absl::InvalidArgumentError(
          absl::StrCat("DeviceDataParallel: ", params.size(),
                       " params given, the model has ", m0.num_params()));
    }
    const std::vector<std::string> want = SlotNames(optimizer_, params);
    const std::vector<int> opt = OptimizerParams(params);
    std::vector<std::pair<std::string, Tensor*>> have =
        optimizer.StateTensors();
    if (have.size() != want.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("DeviceDataParallel: the optimizer has ", have.size(),
                       " state tensors, the devices ", want.size()));
    }
    std::vector<Tensor*> out;
    for (size_t k = 0; k < want.size(); ++k) {
      const int i = opt[k % opt.size()];
      if (have[k].first != want[k] ||
          have[k].second->size() != m0.param_size(i)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "DeviceDataParallel: optimizer state ", k, " is ", have[k].first,
            " (", have[k].second->size(), " floats), the devices' is ", want[k],
            " (", m0.param_size(i), " floats)"));
      }
      out.push_back(have[k].second);
    }
    return out;
  }

  // A whole flat buffer between the host and lane's GPU, ordered after the
  // work on its stream; blocks.
  static absl::Status Copy(const Lane& lane, void* dst, const void* src,
                           cudaMemcpyKind kind) {
    const GpuModel& model = *lane.model;
    CUDA_RETURN_IF_ERROR(cudaSetDevice(model.device()));
    CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
        dst, src, model.flat_floats() * sizeof(float), kind, model.stream()));
    CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(model.stream()));
    return absl::OkStatus();
  }

  const OptimizerSpec optimizer_;
  const int64_t world_;
  const std::function<absl::Status(int64_t, float*, int64_t)> host_all_reduce_;
  std::vector<Lane> lanes_;
  StepPool pool_;
  PinnedHostBuffer host_sum_;  // the ring layout's staging: flat_floats()
  const std::vector<UpdateRun> runs_;  // how each part of the buffers updates
  int64_t iterations_ = 0;     // Optimizer::iterations() of the device state
  std::atomic<bool> aborted_{false};
  absl::Status broken_;  // a failed step's error: every later Step's
  // Set when the model sums across replicas in its passes.
  const std::function<absl::Status(int64_t, int32_t, float*, int64_t)>
      pass_sum_fn_;
  std::unique_ptr<ReplicaSum> pass_sum_;
};

absl::Status CheckConfig(const DeviceDataParallelConfig& c) {
  if (c.devices.empty()) {
    return absl::InvalidArgumentError("DeviceDataParallel: no local devices");
  }
  if (c.devices.size() != c.replica_indices.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("DeviceDataParallel: ", c.devices.size(), " devices but ",
                     c.replica_indices.size(), " replica indices"));
  }
  if (c.world_replicas < 1 || c.world_replicas > INT_MAX) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DeviceDataParallel: bad world of ", c.world_replicas, " replicas"));
  }
  for (int64_t r : c.replica_indices) {
    if (r < 0 || r >= c.world_replicas) {
      return absl::InvalidArgumentError(
          absl::StrCat("DeviceDataParallel: replica index ", r,
                       " outside the world of ", c.world_replicas));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<DeviceDataParallel>> MakeCudaDeviceDataParallel(
    const DeviceDataParallelConfig& config) {
  RETURN_IF_ERROR(CheckConfig(config));
  // The fused update runs over one flat buffer with one decay and no norm
  // reduction yet.
  const OptimizerSpec& o = config.spec.optimizer;
  if (o.global_clipnorm > 0 ||
      (o.weight_decay > 0 && !o.exclude_from_weight_decay.empty())) {
    return absl::UnimplementedError(
        "optimizer.global_clipnorm and optimizer.exclude_from_weight_decay "
        "are not yet supported on GPUs (the fused device update); train "
        "this job on CPUs or leave them out");
  }
  const size_t n = config.devices.size();
  const int slots = SlotCount(config.spec.optimizer);
  std::vector<Lane> lanes(n);
  for (size_t i = 0; i < n; ++i) {
    const int device = config.devices[i];
    const std::string where = absl::StrCat("cuda:", device);
    Lane& lane = lanes[i];
    lane.replica = config.replica_indices[i];
    GpuModelOptions options;
    options.device = device;
    options.allow_tf32 = config.spec.cluster.allow_tf32;
    absl::StatusOr<std::unique_ptr<GpuModel>> model =
        GpuModel::Create(config.spec.model, config.spec.seed, options);
    if (!model.ok()) return AnnotateStatus(model.status(), where);
    lane.model = *std::move(model);
    const int64_t floats = lane.model->flat_floats();
    if (slots >= 1) {
      absl::StatusOr<std::unique_ptr<DeviceSlot>> s =
          DeviceSlot::Create(device, floats);
      if (!s.ok()) return AnnotateStatus(s.status(), where);
      lane.first = *std::move(s);
    }
    if (slots >= 2) {
      absl::StatusOr<std::unique_ptr<DeviceSlot>> s =
          DeviceSlot::Create(device, floats);
      if (!s.ok()) return AnnotateStatus(s.status(), where);
      lane.second = *std::move(s);
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
  return std::unique_ptr<DeviceDataParallel>(new CudaDeviceDataParallel(
      config, std::move(lanes), std::move(host_sum)));
}

}  // namespace cuda
}  // namespace lockstep
