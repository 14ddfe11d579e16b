// What a layer's CUDA pass is handed: the device, the stream every kernel is
// enqueued on, the cuBLAS and cuDNN handles bound to it, and a shared
// scratch buffer. Knows nothing of layers or models.
#ifndef LOCKSTEP_KERNELS_CUDA_LAYERS_DEVICE_CONTEXT_H_
#define LOCKSTEP_KERNELS_CUDA_LAYERS_DEVICE_CONTEXT_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>

#include "absl/status/statusor.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/layers/conv.h"

namespace lockstep {
namespace cuda {

struct DeviceContext {
  int device = 0;
  cudaStream_t stream = nullptr;
  const CublasHandle* cublas = nullptr;
  const CudnnHandle* cudnn = nullptr;
  GemmOptions gemm;
  ConvOptions conv;
  // Device scratch of at least `bytes`, shared by every call on `stream`:
  // valid for the work a call enqueues (the next call may reuse or move
  // it, which the stream orders after that work).
  std::function<absl::StatusOr<void*>(size_t bytes)> workspace;
};

}  // namespace cuda
}  // namespace lockstep

#endif  // LOCKSTEP_KERNELS_CUDA_LAYERS_DEVICE_CONTEXT_H_
