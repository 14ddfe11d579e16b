// GpuModel's private parts, shared by its two source files (gpu_model.cc:
// set-up and the passes; gpu_model_io.cc: staging inputs and copies to and
// from the host). Include nowhere else.
#ifndef LOCKSTEP_CORE_GPU_GPU_MODEL_INTERNAL_H_
#define LOCKSTEP_CORE_GPU_GPU_MODEL_INTERNAL_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "core/gpu/gpu_model.h"
#include "core/layers/device_layer.h"
#include "kernels/cuda/caching_allocator.h"
#include "kernels/cuda/cuda_memory.h"
#include "kernels/cuda/layers/device_context.h"

namespace lockstep {
namespace cuda {


// Each param starts on a 256-byte boundary (cuBLAS/cuDNN alignment).
inline constexpr int64_t kParamAlignFloats = 64;
// A staged batch's inputs and labels each start at this alignment.
inline constexpr size_t kInputAlignBytes = 256;

inline size_t AlignUp(size_t bytes) {
  return (bytes + kInputAlignBytes - 1) / kInputAlignBytes * kInputAlignBytes;
}

struct GpuModel::Node {
  const DeviceLayer* impl = nullptr;
  std::unique_ptr<DeviceLayerState> state;
  Buffer act;      // this layer's output
  Buffer scratch;  // DeviceLayer::scratch_bytes
  LayerIO io;
  PassContext ctx;
  const float* out = nullptr;  // this pass's output
};

// One input staging slot: the batch in pinned host memory and on the
// device (each model input's values, then the labels, at aligned offsets),
// and the events that order its reuse: `copied` on the copy stream after
// its copy, `consumed` on the compute stream after the pass that read it.
struct GpuModel::InputSlot {
  PinnedHostBuffer host;
  void* dev = nullptr;
  size_t bytes = 0;                  // capacity of host and dev
  std::vector<size_t> input_offset;  // this staging's layout
  size_t labels_offset = 0;
  cudaEvent_t copied = nullptr;
  cudaEvent_t consumed = nullptr;
  uint64_t serial = 0;
  int64_t n = 0;
};

struct GpuModel::Handles {
  // First, so it outlives the cuBLAS handle whose scratch it holds.
  std::unique_ptr<CachingAllocator> allocator;
  CublasHandle cublas;
  CudnnHandle cudnn;
  PinnedHostBuffer staging;  // total_floats_ floats
  PinnedHostBuffer sums;     // one DeviceLossSums
  DeviceContext dc;
};

}  // namespace cuda
}  // namespace lockstep

#endif  // LOCKSTEP_CORE_GPU_GPU_MODEL_INTERNAL_H_
