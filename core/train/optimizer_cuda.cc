// The optimizer on a GPU (see optimizer_cuda.h): the runs and slots of a
// flat parameter buffer, the fused update, and the slots' traffic with the
// host optimizer's state tensors.
#include "core/train/optimizer_cuda.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/layers/batch_norm.h"

namespace lockstep {
namespace cuda {

int SlotCount(const OptimizerSpec& spec) {
  if (spec.type == OptimizerType::kSgd) return spec.momentum > 0 ? 1 : 0;
  return 2;
}

std::vector<int> OptimizerParams(const std::vector<Param*>& params) {
  std::vector<int> out;
  for (size_t i = 0; i < params.size(); ++i) {
    if (params[i]->update == ParamUpdate::kOptimizer) {
      out.push_back(static_cast<int>(i));
    }
  }
  return out;
}

std::vector<UpdateRun> UpdateRuns(const std::vector<Param*>& params,
                                  const FlatLayout& layout,
                                  const OptimizerSpec& spec) {
  std::vector<UpdateRun> runs;
  for (size_t i = 0; i < params.size(); ++i) {
    const Param& p = *params[i];
    const int64_t begin = layout.offsets[i];
    const int64_t end =
        i + 1 < params.size() ? layout.offsets[i + 1] : layout.floats;
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

absl::StatusOr<std::unique_ptr<DeviceOptimizer>> DeviceOptimizer::Create(
    int device, const OptimizerSpec& spec, const std::vector<Param*>& params,
    const FlatLayout& layout, bool norm) {
  if (layout.offsets.size() != params.size() ||
      layout.sizes.size() != params.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("DeviceOptimizer: a layout of ", layout.offsets.size(),
                     " params for ", params.size()));
  }
  std::unique_ptr<DeviceOptimizer> o(new DeviceOptimizer());
  o->spec_ = spec;
  o->device_ = device;
  o->layout_ = layout;
  o->params_ = OptimizerParams(params);
  o->names_ = SlotNames(spec, params);
  o->runs_ = UpdateRuns(params, layout, spec);
  o->optimizer_runs_ = OptimizerRuns(o->runs_);
  const int slots = SlotCount(spec);
  if (slots >= 1) {
    ASSIGN_OR_RETURN(o->first_,
                     DeviceBuffer<float>::Create(device, layout.floats));
  }
  if (slots >= 2) {
    ASSIGN_OR_RETURN(o->second_,
                     DeviceBuffer<float>::Create(device, layout.floats));
  }
  if (norm) {
    ASSIGN_OR_RETURN(o->norm_,
                     DeviceBuffer<double>::Create(device, kNormBlocks + 1));
  }
  const std::vector<FlatRun> runs = FlatRuns(o->runs_);
  ASSIGN_OR_RETURN(
      o->flat_runs_,
      DeviceBuffer<FlatRun>::Create(device, static_cast<int64_t>(runs.size())));
  CUDA_RETURN_IF_ERROR(cudaMemcpy(o->flat_runs_->get(), runs.data(),
                                  runs.size() * sizeof(FlatRun),
                                  cudaMemcpyHostToDevice));
  // From pageable memory the copy may return before its DMA lands, and the
  // models' non-blocking streams do not wait for it.
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(nullptr));
  return o;
}

absl::Status DeviceOptimizer::Update(double lr, int64_t iterations,
                                     float unscale, bool skip_nonfinite,
                                     int64_t global_samples, float* w,
                                     const float* g, cudaStream_t stream) {
  if (layout_.floats == 0) return absl::OkStatus();
  if (skip_nonfinite && !norm_) {
    // The overflow test reads the global norm's sum, which only a
    // DeviceOptimizer created with `norm` keeps.
    return absl::FailedPreconditionError(
        "DeviceOptimizer::Update: skipping overflowed steps needs the global "
        "norm's buffers (created without norm)");
  }
  CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  float* m = first_ ? first_->get() : nullptr;
  float* v = second_ ? second_->get() : nullptr;
  const OptimizerSpec& o = spec_;
  SgdStep sgd = MakeSgdStep(lr, o.momentum, o.nesterov, o.weight_decay);
  AdamStep adam = MakeAdamStep(lr, o.beta_1, o.beta_2, o.epsilon,
                               o.weight_decay, iterations);
  const int64_t n = layout_.floats;
  const FlatRun* runs = flat_runs_->get();
  const int count = static_cast<int>(runs_.size());
  // Loss scaling's unscale applies with or without the norm's buffers.
  sgd.clip.unscale = adam.clip.unscale = unscale;
  if (norm_) {
    // The global norm over the summed gradients of the optimizer's params,
    // ahead of the update that reads it (one stream: in order): for
    // clipping, and for fp16 the test that skips an overflowed step.
    double* partials = norm_->get();
    CUDA_RETURN_IF_ERROR(
        SumSquaresPartials(n, runs, count, g, partials, stream));
    CUDA_RETURN_IF_ERROR(
        SumPartials(kNormBlocks, partials, partials + kNormBlocks, stream));
    sgd.clip = adam.clip = GradientClip{
        o.global_clipnorm, partials + kNormBlocks, unscale, skip_nonfinite};
  }
  if (optimizer_runs_ > 0) {
    if (o.type == OptimizerType::kSgd) {
      CUDA_RETURN_IF_ERROR(SgdUpdate(n, runs, count, sgd, w, m, g, stream));
    } else {
      CUDA_RETURN_IF_ERROR(
          AdamUpdate(n, runs, count, adam, w, m, v, g, stream));
    }
  }
  last_unscale_ = unscale;
  // A skipped step (fp16's overflow) leaves the moving averages too.
  const double* skip = norm_ && skip_nonfinite ? sgd.clip.sum_squares : nullptr;
  for (const UpdateRun& run : runs_) {
    if (run.update != ParamUpdate::kMovingAverage || global_samples <= 0) {
      continue;
    }
    CUDA_RETURN_IF_ERROR(MovingAverageUpdate(
        run.end - run.begin, run.momentum,
        1.0 / static_cast<double>(global_samples), w + run.begin, g + run.begin,
        stream, skip, unscale));
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> DeviceOptimizer::GradientsFinite() const {
  if (!norm_) return true;
  double sum = 0;
  CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  // After the step's wait: the stream has written it.
  CUDA_RETURN_IF_ERROR(cudaMemcpy(&sum, norm_->get() + kNormBlocks, sizeof(sum),
                                  cudaMemcpyDeviceToHost));
  return !GradientsOverflowed(sum, last_unscale_);
}

absl::StatusOr<std::vector<Tensor*>> DeviceOptimizer::Match(
    Optimizer& optimizer) const {
  std::vector<std::pair<std::string, Tensor*>> have = optimizer.StateTensors();
  if (have.size() != names_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("GpuReplicas: the optimizer has ", have.size(),
                     " state tensors, the devices ", names_.size()));
  }
  std::vector<Tensor*> out;
  for (size_t k = 0; k < names_.size(); ++k) {
    const int i = params_[k % params_.size()];
    if (have[k].first != names_[k] ||
        have[k].second->size() != layout_.sizes[i]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "GpuReplicas: optimizer state ", k, " is ", have[k].first, " (",
          have[k].second->size(), " floats), the devices' is ", names_[k], " (",
          layout_.sizes[i], " floats)"));
    }
    out.push_back(have[k].second);
  }
  return out;
}

absl::Status DeviceOptimizer::Copy(void* dst, const void* src,
                                   cudaMemcpyKind kind,
                                   cudaStream_t stream) const {
  CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(dst, src, layout_.floats * sizeof(float), kind, stream));
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  return absl::OkStatus();
}

absl::Status DeviceOptimizer::Pull(const std::vector<Tensor*>& states,
                                   cudaStream_t stream) const {
  const size_t np = params_.size();
  std::vector<float> flat(layout_.floats);
  for (size_t k = 0; k < states.size(); ++k) {
    if (k % np == 0) {
      const DeviceBuffer<float>& slot = *(k < np ? first_ : second_);
      RETURN_IF_ERROR(
          Copy(flat.data(), slot.get(), cudaMemcpyDeviceToHost, stream));
    }
    const int i = params_[k % np];
    std::memcpy(states[k]->data(), flat.data() + layout_.offsets[i],
                sizeof(float) * layout_.sizes[i]);
  }
  return absl::OkStatus();
}

absl::Status DeviceOptimizer::Push(const std::vector<Tensor*>& states,
                                   cudaStream_t stream) {
  const size_t np = params_.size();
  // Slot k / np laid out flat (zero padding), then onto the device.
  std::vector<std::vector<float>> flats(np == 0 ? 0 : states.size() / np);
  for (size_t k = 0; k < states.size(); ++k) {
    std::vector<float>& flat = flats[k / np];
    if (flat.empty()) flat.assign(layout_.floats, 0.0f);
    const int i = params_[k % np];
    std::memcpy(flat.data() + layout_.offsets[i], states[k]->data(),
                sizeof(float) * layout_.sizes[i]);
  }
  for (size_t s = 0; s < flats.size(); ++s) {
    float* dev = (s == 0 ? first_ : second_)->get();
    RETURN_IF_ERROR(Copy(dev, flats[s].data(), cudaMemcpyHostToDevice, stream));
  }
  return absl::OkStatus();
}

}  // namespace cuda
}  // namespace lockstep
