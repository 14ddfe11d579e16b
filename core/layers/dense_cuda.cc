// dense on a GPU: cuBLAS GEMMs in either weight layout, the bias and
// activation kernels, and GELU keeping its pre-activation in the layer's
// scratch for backward.
#include "base/status_macros.h"
#include "core/layers/dense.h"
#include "core/layers/device_layer.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/gelu.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/layers/activation.h"
#include "kernels/cuda/layers/device_context.h"

namespace lockstep {
namespace {

absl::Status Forward(Layer& layer, DeviceLayerState*, const LayerIO& io,
                     const PassContext& ctx, cuda::DeviceContext& dc) {
  const DenseLayer& l = static_cast<const DenseLayer&>(layer);
  const int64_t rows = l.Rows(io.n), units = l.units(), in = l.in();
  RETURN_IF_ERROR(cuda::Gemm(*dc.cublas, dc.stream, dc.gemm, false, l.out_in(),
                             rows, units, in, 1.0f, io.x[0], in, io.w[0],
                             l.out_in() ? in : units, 0.0f, io.y, units));
  const float* bias = l.config().use_bias ? io.w[1] : nullptr;
  if (!l.gelu()) {
    CUDA_RETURN_IF_ERROR(cuda::BiasActivationForward(
        rows, units, bias, l.Act(ctx), io.y, dc.stream));
    return absl::OkStatus();
  }
  float* pre = static_cast<float*>(io.scratch);
  CUDA_RETURN_IF_ERROR(cuda::BiasActivationForward(
      rows, units, bias, ActivationKind::kLinear, io.y, dc.stream));
  CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(pre, io.y, rows * units * sizeof(float),
                                       cudaMemcpyDeviceToDevice, dc.stream));
  CUDA_RETURN_IF_ERROR(cuda::GeluForward(rows * units, pre, io.y, dc.stream));
  return absl::OkStatus();
}

absl::Status Backward(Layer& layer, DeviceLayerState*, const LayerIO& io,
                      const PassContext& ctx, cuda::DeviceContext& dc) {
  const DenseLayer& l = static_cast<const DenseLayer&>(layer);
  const int64_t rows = l.Rows(io.n), units = l.units(), in = l.in();
  float* dz = io.dy;
  float* db = l.config().use_bias ? io.dw[1] : nullptr;
  ASSIGN_OR_RETURN(
      void* ws,
      dc.workspace(
          std::max<int64_t>(cuda::BiasGradWorkspaceFloats(rows, units), 1) *
          sizeof(float)));
  if (l.gelu()) {
    CUDA_RETURN_IF_ERROR(
        cuda::GeluBackward(rows * units, static_cast<const float*>(io.scratch),
                           dz, dz, dc.stream));
    if (db != nullptr) {
      CUDA_RETURN_IF_ERROR(cuda::BiasGrad(rows, units, dz, db, dc.stream,
                                          static_cast<float*>(ws)));
    }
  } else {
    CUDA_RETURN_IF_ERROR(
        cuda::ActivationBackwardBiasGrad(rows, units, l.Act(ctx), io.y, dz, db,
                                         dc.stream, static_cast<float*>(ws)));
  }
  // The weight gradient accumulates: a tied table gets the embedding's too.
  if (l.out_in()) {
    RETURN_IF_ERROR(cuda::Gemm(*dc.cublas, dc.stream, dc.gemm, true, false,
                               units, in, rows, 1.0f, dz, units, io.x[0], in,
                               1.0f, io.dw[0], in));
  } else {
    RETURN_IF_ERROR(cuda::Gemm(*dc.cublas, dc.stream, dc.gemm, true, false, in,
                               units, rows, 1.0f, io.x[0], in, dz, units, 1.0f,
                               io.dw[0], units));
  }
  if (io.dx[0] != nullptr) {
    RETURN_IF_ERROR(cuda::Gemm(
        *dc.cublas, dc.stream, dc.gemm, false, !l.out_in(), rows, in, units,
        1.0f, dz, units, io.w[0], l.out_in() ? in : units, 0.0f, io.dx[0], in));
  }
  return absl::OkStatus();
}

DeviceLayer Impl() {
  DeviceLayer d;
  d.scratch_bytes = [](const Layer& layer, int64_t n) -> int64_t {
    const DenseLayer& l = static_cast<const DenseLayer&>(layer);
    return l.gelu() ? l.Rows(n) * l.units() * sizeof(float) : 0;
  };
  d.forward = &Forward;
  d.backward = &Backward;
  return d;
}

LOCKSTEP_REGISTER_DEVICE_LAYER(dense, "dense", Impl());

}  // namespace
}  // namespace lockstep
