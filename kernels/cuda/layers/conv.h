// NHWC 2-D convolution on the GPU through cuDNN 9's (legacy) convolution API,
// with the contract of kernels/cpu/conv.h: Keras' kernel layout [KH, KW, C, F],
// TF 'same'/'valid' padding (Conv2DGeometry), bias + activation fused after.
// Only deterministic algorithms are used, so a step's gradients are the same
// bytes on every run; FP32 math (no TF32) unless ConvOptions says otherwise.
//
// Padding: cuDNN pads symmetrically. TF's 'same' puts the odd extra row or
// column after (pad_before != pad_after). Then the input is zero-padded
// explicitly into the workspace and a valid convolution runs on it (dx is
// computed padded and cropped back); symmetric padding goes to cuDNN as is.
// (The test is "cuDNN's symmetric output size differs from the geometry's",
// which is exactly the asymmetric case.)
#ifndef LOCKSTEP_KERNELS_CUDA_LAYERS_CONV_H_
#define LOCKSTEP_KERNELS_CUDA_LAYERS_CONV_H_

#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <cstddef>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/cpu/conv.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cuda/elementwise.h"

namespace lockstep {
namespace cuda {

// A cuDNN handle on the device current at Create; move-only, destroys
// itself. Not thread-safe: one per thread (or stream) that runs convolutions.
class CudnnHandle {
 public:
  // kFailedPrecondition without a usable GPU or driver.
  static absl::StatusOr<CudnnHandle> Create();

  CudnnHandle() = default;
  CudnnHandle(CudnnHandle&& other) noexcept;
  CudnnHandle& operator=(CudnnHandle&& other) noexcept;
  CudnnHandle(const CudnnHandle&) = delete;
  CudnnHandle& operator=(const CudnnHandle&) = delete;
  ~CudnnHandle();

  cudnnHandle_t get() const { return handle_; }

 private:
  explicit CudnnHandle(cudnnHandle_t handle) : handle_(handle) {}
  cudnnHandle_t handle_ = nullptr;
};

struct ConvOptions {
  // Let cuDNN pick TF32 tensor-core algorithms (about 1e-3 relative error).
  bool allow_tf32 = false;
  // A job's 16-bit precision: x, the kernel and dy are rounded to it (in the
  // workspace) and the convolutions run on TF32 tensor cores, whose 10-bit
  // mantissa holds a bfloat16 or half value exactly: the products exact,
  // the sums float32, as the 16-bit GEMMs' (kernels/cuda/gemm.h).
  InputRounding inputs = InputRounding::kNone;
  bool tensor_cores() const {
    return allow_tf32 || inputs != InputRounding::kNone;
  }
};

// One geometry's descriptors, chosen algorithms and workspace size. Build one
// per batch size; move-only.
class CudnnConv2D {
 public:
  // Chooses deterministic forward, backward-data and backward-filter
  // algorithms. kInvalidArgument for a geometry with an empty output,
  // kFailedPrecondition without a device, kUnimplemented when cuDNN offers no
  // deterministic algorithm. A batch of 0 is valid (the calls do nothing but
  // zero the gradients). `groups` (Keras' and PyTorch's) splits the
  // channels and the filters into that many independent convolutions
  // (cuDNN's group count): g is then the whole layer's (all C and F), the
  // kernel [KH, KW, C / groups, F], filter f reading group f / (F / groups);
  // kInvalidArgument unless groups divides both.
  static absl::StatusOr<CudnnConv2D> Create(const CudnnHandle& handle,
                                            const Conv2DGeometry& g,
                                            const ConvOptions& options = {},
                                            int64_t groups = 1);

  CudnnConv2D();
  CudnnConv2D(CudnnConv2D&&) noexcept;
  CudnnConv2D& operator=(CudnnConv2D&&) noexcept;
  ~CudnnConv2D();

  const Conv2DGeometry& geometry() const { return g_; }
  // Device scratch Forward and Backward need (one buffer serves both; it
  // holds nothing between calls, so layers may share it on one stream).
  size_t workspace_bytes() const { return workspace_bytes_; }
  // Whether the input is padded explicitly (see the file comment).
  bool explicit_padding() const { return explicit_padding_; }

  // y [N, OH, OW, F] = act(conv(x [N, H, W, C], kernel [KH, KW, C /
  // groups, F]) + bias); bias may be null. Device pointers; `workspace` holds
  // workspace_bytes(). Enqueues on `stream` (binds the handle to it).
  absl::Status Forward(const CudnnHandle& handle, cudaStream_t stream,
                       const float* x, const float* kernel, const float* bias,
                       ActivationKind act, float* y, void* workspace) const;

  // Given dy [N, OH, OW, F] (the gradient before the activation, as
  // kernels/cpu's Conv2DBackward), overwrites dkernel, dbias (if not null)
  // and dx (if not null). Enqueues on `stream`.
  absl::Status Backward(const CudnnHandle& handle, cudaStream_t stream,
                        const float* x, const float* kernel, const float* dy,
                        float* dkernel, float* dbias, float* dx,
                        void* workspace) const;

 private:
  struct Descriptors;
  struct Layout {  // byte offsets into the workspace
    size_t filter = 0, dfilter = 0, padded_x = 0, padded_dx = 0, rounded_x = 0,
           rounded_dy = 0, cudnn = 0;
  };
  // x as cuDNN reads it: padded into the workspace when explicit_padding_,
  // rounded there when inputs_ asks (the padded copy in place).
  absl::StatusOr<const float*> Input(const float* x, char* ws,
                                     cudaStream_t stream) const;

  Conv2DGeometry g_;
  InputRounding inputs_ = InputRounding::kNone;
  int64_t groups_ = 1;
  // Floats of one filter: KH * KW * C / groups.
  int64_t filter_patch() const { return g_.patch_size() / groups_; }
  int64_t padded_h_ = 0, padded_w_ = 0;  // the input cuDNN sees
  bool explicit_padding_ = false;
  size_t cudnn_workspace_bytes_ = 0;
  size_t workspace_bytes_ = 0;
  Layout layout_;
  std::unique_ptr<Descriptors> d_;
};

}  // namespace cuda
}  // namespace lockstep

#endif  // LOCKSTEP_KERNELS_CUDA_LAYERS_CONV_H_
