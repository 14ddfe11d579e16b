// The CUDA GpuReplicas's update and its traffic with the host (see
// gpu_replicas_internal.h): the update over runs of the flat buffers,
// the ring layout's gradient sum through pinned host memory, and the
// parameters and optimizer slots between the GPUs and the host.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "core/gpu/gpu_replicas_internal.h"
#include "core/train/optimizer.h"
#include "kernels/cuda/layers/batch_norm.h"
#include "kernels/cuda/optimizer.h"

namespace lockstep {
namespace cuda {

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

std::vector<UpdateRun> UpdateRuns(const GpuModel& model,
                                  const OptimizerSpec& spec) {
  const std::vector<Param*>& params = model.host_model().params();
  std::vector<UpdateRun> runs;
  for (size_t i = 0; i < params.size(); ++i) {
    const Param& p = *params[i];
    const int64_t begin = model.param_offset(static_cast<int>(i));
    const int64_t end = i + 1 < params.size()
                            ? model.param_offset(static_cast<int>(i + 1))
                            : model.flat_floats();
    const bool decay =
        p.update == ParamUpdate::kOptimizer && DecaysWeights(spec, p.name);
    if (!runs.empty() && runs.back().update == p.update &&
        runs.back().momentum == p.momentum && runs.back().decay == decay) {
      runs.back().end = end;
    } else {
      runs.push_back(UpdateRun{p.update, p.momentum, decay, begin, end});
    }
  }
  if (!runs.empty()) runs.front().begin = 0;
  return runs;
}

std::vector<FlatRun> FlatRuns(const std::vector<UpdateRun>& runs) {
  std::vector<FlatRun> out;
  for (const UpdateRun& r : runs) {
    out.push_back(FlatRun{r.begin, r.end,
                          r.update == ParamUpdate::kOptimizer ? 1 : 0,
                          r.decay ? 1 : 0});
  }
  return out;
}

int OptimizerRuns(const std::vector<UpdateRun>& runs) {
  return static_cast<int>(std::count_if(
      runs.begin(), runs.end(),
      [](const UpdateRun& r) { return r.update == ParamUpdate::kOptimizer; }));
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

absl::Status CudaGpuReplicas::PullState(const std::vector<Param*>& params,
                                        Optimizer& optimizer) {
  // After Abort the state a rank keeps for a rejoin, when intact.
  if (!StateIntact()) RETURN_IF_ERROR(Usable());
  const Lane& lane = lanes_[0];
  RETURN_IF_ERROR(AnnotateStatus(
      lane.model->CopyParamsToHost(params),
      absl::StrCat("pulling the parameters from ", Where(lane))));
  ASSIGN_OR_RETURN(std::vector<Tensor*> states, MatchState(params, optimizer));
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

absl::Status CudaGpuReplicas::PushState(const std::vector<Param*>& params,
                                        Optimizer& optimizer) {
  RETURN_IF_ERROR(Usable());
  ASSIGN_OR_RETURN(std::vector<Tensor*> states, MatchState(params, optimizer));
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

absl::Status CudaGpuReplicas::Update(Lane& lane, double lr,
                                     int64_t global_samples) {
  GpuModel& model = *lane.model;
  if (model.flat_floats() == 0) return absl::OkStatus();
  CUDA_RETURN_IF_ERROR(cudaSetDevice(model.device()));
  float* m = lane.first ? lane.first->get() : nullptr;
  float* v = lane.second ? lane.second->get() : nullptr;
  const OptimizerSpec& o = optimizer_;
  SgdStep sgd = MakeSgdStep(lr, o.momentum, o.nesterov, o.weight_decay);
  AdamStep adam = MakeAdamStep(lr, o.beta_1, o.beta_2, o.epsilon,
                               o.weight_decay, iterations_);
  const int64_t n = model.flat_floats();
  const FlatRun* runs = lane.runs->get();
  const int count = static_cast<int>(runs_.size());
  if (lane.norm) {
    // The global norm over the summed gradients of the optimizer's params,
    // ahead of the update that reads it (one stream: in order): for
    // clipping, and for fp16 the test that skips an overflowed step.
    double* partials = lane.norm->get();
    CUDA_RETURN_IF_ERROR(SumSquaresPartials(
        n, runs, count, model.device_grads(), partials, model.stream()));
    CUDA_RETURN_IF_ERROR(SumPartials(kNormBlocks, partials,
                                     partials + kNormBlocks, model.stream()));
    sgd.clip = adam.clip =
        GradientClip{o.global_clipnorm, partials + kNormBlocks,
                     loss_scale_.unscale(), loss_scale_.enabled()};
  }
  if (OptimizerRuns(runs_) > 0) {
    float* w = model.device_params();
    const float* g = model.device_grads();
    if (o.type == OptimizerType::kSgd) {
      CUDA_RETURN_IF_ERROR(
          SgdUpdate(n, runs, count, sgd, w, m, g, model.stream()));
    } else {
      CUDA_RETURN_IF_ERROR(
          AdamUpdate(n, runs, count, adam, w, m, v, g, model.stream()));
    }
  }
  for (const UpdateRun& run : runs_) {
    if (run.update != ParamUpdate::kMovingAverage || global_samples <= 0) {
      continue;
    }
    CUDA_RETURN_IF_ERROR(cuda::MovingAverageUpdate(
        run.end - run.begin, run.momentum,
        1.0 / static_cast<double>(global_samples),
        model.device_params() + run.begin, model.device_grads() + run.begin,
        model.stream()));
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> CudaGpuReplicas::GradientsFinite(const Lane& lane) const {
  if (!lane.norm) return true;
  double sum = 0;
  CUDA_RETURN_IF_ERROR(cudaSetDevice(lane.model->device()));
  // After the step's wait: the stream has written it.
  CUDA_RETURN_IF_ERROR(cudaMemcpy(&sum, lane.norm->get() + kNormBlocks,
                                  sizeof(sum), cudaMemcpyDeviceToHost));
  return std::isfinite(sum);
}

absl::StatusOr<std::vector<Tensor*>> CudaGpuReplicas::MatchState(
    const std::vector<Param*>& params, Optimizer& optimizer) const {
  const GpuModel& m0 = *lanes_[0].model;
  if (static_cast<int>(params.size()) != m0.num_params()) {
    return absl::InvalidArgumentError(
        absl::StrCat("GpuReplicas: ", params.size(),
                     " params given, the model has ", m0.num_params()));
  }
  const std::vector<std::string> want = SlotNames(optimizer_, params);
  const std::vector<int> opt = OptimizerParams(params);
  std::vector<std::pair<std::string, Tensor*>> have = optimizer.StateTensors();
  if (have.size() != want.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("GpuReplicas: the optimizer has ", have.size(),
                     " state tensors, the devices ", want.size()));
  }
  std::vector<Tensor*> out;
  for (size_t k = 0; k < want.size(); ++k) {
    const int i = opt[k % opt.size()];
    if (have[k].first != want[k] ||
        have[k].second->size() != m0.param_size(i)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "GpuReplicas: optimizer state ", k, " is ", have[k].first, " (",
          have[k].second->size(), " floats), the devices' is ", want[k], " (",
          m0.param_size(i), " floats)"));
    }
    out.push_back(have[k].second);
  }
  return out;
}

absl::Status CudaGpuReplicas::Copy(const Lane& lane, void* dst, const void* src,
                                   cudaMemcpyKind kind) {
  const GpuModel& model = *lane.model;
  CUDA_RETURN_IF_ERROR(cudaSetDevice(model.device()));
  CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
      dst, src, model.flat_floats() * sizeof(float), kind, model.stream()));
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(model.stream()));
  return absl::OkStatus();
}

absl::Status CudaGpuReplicas::SumToHost(Lane& lane, int64_t step) {
  const GpuModel& model = *lane.model;
  const absl::Status s =
      CUDA_STATUS(cudaMemcpyAsync(host_sum_.data(), model.device_grads(),
                                  model.flat_floats() * sizeof(float),
                                  cudaMemcpyDeviceToHost, model.stream()));
  return AnnotateStatus(s, absl::StrCat("copying step ", step,
                                        "'s gradients from ", Where(lane)));
}

absl::Status CudaGpuReplicas::LaneApplyHostSum(Lane& lane, int64_t step,
                                               double lr,
                                               int64_t global_samples) {
  GpuModel& model = *lane.model;
  CUDA_RETURN_IF_ERROR(cudaSetDevice(model.device()));
  const absl::Status s =
      CUDA_STATUS(cudaMemcpyAsync(model.device_grads(), host_sum_.data(),
                                  model.flat_floats() * sizeof(float),
                                  cudaMemcpyHostToDevice, model.stream()));
  RETURN_IF_ERROR(
      AnnotateStatus(s, absl::StrCat("copying step ", step,
                                     "'s summed gradients to ", Where(lane))));
  return LaneFinish(lane, step, &lr, global_samples);
}

}  // namespace cuda
}  // namespace lockstep
