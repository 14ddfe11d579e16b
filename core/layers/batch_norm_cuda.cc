// batch_norm on a GPU: kernels/cuda/layers/batch_norm.h (the CPU's bits),
// then the activation; the batch mean, variance and rstd live in the
// layer's scratch from the forward to the backward of a pass.
#include <algorithm>

#include "core/layers/batch_norm.h"
#include "core/layers/device_layer.h"
#include "core/status_macros.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/layers/activation.h"
#include "kernels/cuda/layers/batch_norm.h"
#include "kernels/cuda/layers/device_context.h"

namespace lockstep {
namespace {

// Scratch: [mean | var | rstd], channels floats each.
struct Stats {
  float* mean;
  float* var;
  float* rstd;
};

Stats InScratch(const BatchNormLayer& l, const LayerIO& io) {
  float* s = static_cast<float*>(io.scratch);
  const int64_t c = l.channels();
  return Stats{s, s + c, s + 2 * c};
}

absl::StatusOr<double*> Workspace(const BatchNormLayer& l, int64_t rows,
                                  cuda::DeviceContext& dc) {
  const int64_t doubles = cuda::BatchNormWorkspaceDoubles(rows, l.channels());
  // The doubles, then 3 * channels coefficient floats.
  ASSIGN_OR_RETURN(void* ws,
                   dc.workspace(std::max<size_t>(
                       doubles * sizeof(double) +
                           3 * l.channels() * sizeof(float),
                       16)));
  return static_cast<double*>(ws);
}

absl::Status Forward(Layer& layer, DeviceLayerState*, const LayerIO& io,
                     const PassContext& ctx, cuda::DeviceContext& dc) {
  const auto& l = static_cast<const BatchNormLayer&>(layer);
  const int64_t rows = l.Rows(io.n), c = l.channels();
  if (rows == 0) return absl::OkStatus();
  const Stats st = InScratch(l, io);
  const float* mean = io.w[2];
  const float* var = io.w[3];
  if (ctx.training) {
    ASSIGN_OR_RETURN(double* ws, Workspace(l, rows, dc));
    CUDA_RETURN_IF_ERROR(cuda::BatchNormStatistics(rows, c, io.x[0], st.mean,
                                                   st.var, ws, dc.stream));
    mean = st.mean;
    var = st.var;
  }
  CUDA_RETURN_IF_ERROR(
      cuda::BatchNormRstd(c, var, l.epsilon(), st.rstd, dc.stream));
  CUDA_RETURN_IF_ERROR(cuda::BatchNormForward(
      rows, c, io.x[0], mean, st.rstd, io.w[0], io.w[1], io.y, dc.stream));
  CUDA_RETURN_IF_ERROR(cuda::BiasActivationForward(rows, c, nullptr, l.act(),
                                                   io.y, dc.stream));
  return absl::OkStatus();
}

absl::Status Backward(Layer& layer, DeviceLayerState*, const LayerIO& io,
                      const PassContext& ctx, cuda::DeviceContext& dc) {
  const auto& l = static_cast<const BatchNormLayer&>(layer);
  const int64_t rows = l.Rows(io.n), c = l.channels();
  if (rows == 0) return absl::OkStatus();
  const Stats st = InScratch(l, io);
  CUDA_RETURN_IF_ERROR(cuda::ActivationBackwardBiasGrad(
      rows, c, l.act(), io.y, io.dy, nullptr, dc.stream));
  ASSIGN_OR_RETURN(double* ws, Workspace(l, rows, dc));
  float* coef = reinterpret_cast<float*>(
      ws + cuda::BatchNormWorkspaceDoubles(rows, c));
  const float* mean = ctx.training ? st.mean : io.w[2];
  CUDA_RETURN_IF_ERROR(cuda::BatchNormBackward(
      rows, c, io.x[0], io.dy, mean, st.rstd, io.w[0], ctx.training, io.dw[0],
      io.dw[1], io.dx[0], ws, coef, dc.stream));
  if (!ctx.training) return absl::OkStatus();
  const double bessel =
      rows > 1 ? static_cast<double>(rows) / static_cast<double>(rows - 1)
               : 1.0;
  CUDA_RETURN_IF_ERROR(cuda::BatchNormAddStatistics(
      c, static_cast<float>(io.n), bessel, st.mean, st.var, io.dw[2],
      io.dw[3], dc.stream));
  return absl::OkStatus();
}

DeviceLayer Impl() {
  DeviceLayer d;
  d.supports = [](const Layer& layer) {
    return layer.SumsAcrossReplicas()
               ? absl::UnimplementedError(
                     "sync: true (statistics across replicas) has no CUDA "
                     "path yet")
               : absl::OkStatus();
  };
  d.scratch_bytes = [](const Layer& layer, int64_t) -> int64_t {
    return 3 * static_cast<const BatchNormLayer&>(layer).channels() *
           static_cast<int64_t>(sizeof(float));
  };
  d.forward = &Forward;
  d.backward = &Backward;
  return d;
}

LOCKSTEP_REGISTER_DEVICE_LAYER(batch_norm, "batch_norm", Impl());

}  // namespace
}  // namespace lockstep
