#include "core/layers/conv_kernel_layout_cuda.h"

#include "base/status_macros.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/layers/conv_transform.h"

namespace lockstep {

int64_t ConvKernelScratchBytes(const ConvKernelLayout& layout) {
  return layout.torch() ? 2 * layout.floats() * int64_t{sizeof(float)} : 0;
}

absl::StatusOr<const float*> DeviceKerasKernel(const ConvKernelLayout& layout,
                                               const LayerIO& io,
                                               cudaStream_t stream) {
  if (!layout.torch()) return io.w[0];
  float* keras = static_cast<float*>(io.scratch);
  CUDA_RETURN_IF_ERROR(cuda::TorchToKerasConvKernel(
      layout.filters(), layout.channels(), layout.taps(), io.w[0], keras,
      stream));
  return keras;
}

float* DeviceKerasGrad(const ConvKernelLayout& layout, const LayerIO& io) {
  if (!layout.torch()) return io.dw[0];
  return static_cast<float*>(io.scratch) + layout.floats();
}

absl::Status DeviceFinishGrad(const ConvKernelLayout& layout,
                              const LayerIO& io, cudaStream_t stream) {
  if (!layout.torch()) return absl::OkStatus();
  CUDA_RETURN_IF_ERROR(cuda::KerasToTorchConvKernel(
      layout.filters(), layout.channels(), layout.taps(),
      DeviceKerasGrad(layout, io), io.dw[0], stream));
  return absl::OkStatus();
}

}  // namespace lockstep
