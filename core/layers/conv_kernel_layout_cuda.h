// ConvKernelLayout on a GPU: a torch-layout kernel is converted to Keras'
// in the first half of the layer's device scratch (LayerIO::scratch), its
// gradient computed in the second half and converted back.
#ifndef LOCKSTEP_CORE_LAYERS_CONV_KERNEL_LAYOUT_CUDA_H_
#define LOCKSTEP_CORE_LAYERS_CONV_KERNEL_LAYOUT_CUDA_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/statusor.h"
#include "core/layers/conv_kernel_layout.h"
#include "core/layers/layer.h"

namespace lockstep {

// DeviceLayer::scratch_bytes for a layer with this kernel layout.
int64_t ConvKernelScratchBytes(const ConvKernelLayout& layout);
// io.w[0] in Keras' layout on the device.
absl::StatusOr<const float*> DeviceKerasKernel(const ConvKernelLayout& layout,
                                               const LayerIO& io,
                                               cudaStream_t stream);
// Where the Keras-layout kernel gradient goes: io.dw[0] or scratch.
float* DeviceKerasGrad(const ConvKernelLayout& layout, const LayerIO& io);
// Moves it into io.dw[0] in the parameter's layout (nothing for Keras').
absl::Status DeviceFinishGrad(const ConvKernelLayout& layout,
                              const LayerIO& io, cudaStream_t stream);

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_LAYERS_CONV_KERNEL_LAYOUT_CUDA_H_
