// Descriptors and algorithm choice at Create; Forward/Backward only enqueue.
// Algorithms come from cuDNN's heuristics (the *_v7 queries), keeping the
// first that reports CUDNN_DETERMINISTIC and, without TF32, FMA math; with
// 16-bit inputs, one that is no FFT or Winograd.
#include "kernels/cuda/layers/conv.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/layers/activation.h"
#include "kernels/cuda/layers/conv_transform.h"

namespace lockstep {
namespace cuda {
namespace {

size_t AlignUp(size_t bytes) { return (bytes + 255) / 256 * 256; }

// Never CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION: it may convert float32
// tensors down to half, whose range (6e-8..65504) would flush bf16's small
// gradients and overflow large values. TF32 (default math) holds every
// bf16 and half value exactly.
bool MathAllowed(cudnnMathType_t math, const ConvOptions& options) {
  return math == CUDNN_FMA_MATH || math == CUDNN_DEFAULT_MATH ||
         (options.tensor_cores() && math == CUDNN_TENSOR_OP_MATH);
}

// Whether the algorithm multiplies the inputs as they are (a GEMM over
// them), so products of 16-bit-rounded inputs stay exact under TF32;
// FFT and Winograd multiply transforms of them, which TF32 rounds again.
bool MultipliesTheInputs(cudnnConvolutionFwdAlgo_t a) {
  return a != CUDNN_CONVOLUTION_FWD_ALGO_FFT &&
         a != CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING &&
         a != CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD &&
         a != CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED;
}
bool MultipliesTheInputs(cudnnConvolutionBwdDataAlgo_t a) {
  return a != CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT &&
         a != CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING &&
         a != CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD &&
         a != CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED;
}
bool MultipliesTheInputs(cudnnConvolutionBwdFilterAlgo_t a) {
  return a != CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT &&
         a != CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING &&
         a != CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD &&
         a != CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED;
}

// The first deterministic, supported result whose math is allowed (results
// come best first). Prefers FMA math over default math without tensor
// cores; with 16-bit inputs, prefers an algorithm that multiplies the
// rounded inputs themselves (exact products), else the first allowed.
template <typename Perf>
const Perf* PickDeterministic(const Perf* perf, int count,
                              const ConvOptions& options) {
  const Perf* fallback = nullptr;
  const bool sixteen = options.inputs != InputRounding::kNone;
  for (int i = 0; i < count; ++i) {
    const Perf& p = perf[i];
    if (p.status != CUDNN_STATUS_SUCCESS ||
        p.determinism != CUDNN_DETERMINISTIC ||
        !MathAllowed(p.mathType, options)) {
      continue;
    }
    const bool preferred =
        sixteen ? MultipliesTheInputs(p.algo)
                : options.tensor_cores() || p.mathType == CUDNN_FMA_MATH;
    if (preferred) return &p;
    if (fallback == nullptr) fallback = &p;
  }
  return fallback;
}

absl::Status NoAlgorithm(const char* direction, const Conv2DGeometry& g) {
  return absl::UnimplementedError(absl::StrCat(
      "cuDNN offers no deterministic ", direction,
      " convolution algorithm for batch ", g.batch, ", input ", g.in_h, "x",
      g.in_w, "x", g.in_c, ", kernel ", g.k_h, "x", g.k_w, "x", g.filters,
      ", strides ", g.stride_h, "x", g.stride_w));
}

}  // namespace

absl::StatusOr<CudnnHandle> CudnnHandle::Create() {
  cudnnHandle_t handle = nullptr;
  absl::Status status = CUDNN_STATUS(cudnnCreate(&handle));
  if (!status.ok()) {
    cudaGetLastError();  // cuDNN may leave the runtime's error set
    return status;
  }
  return CudnnHandle(handle);
}

CudnnHandle::CudnnHandle(CudnnHandle&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)) {}

CudnnHandle& CudnnHandle::operator=(CudnnHandle&& other) noexcept {
  if (this != &other) {
    if (handle_ != nullptr) cudnnDestroy(handle_);
    handle_ = std::exchange(other.handle_, nullptr);
  }
  return *this;
}

CudnnHandle::~CudnnHandle() {
  if (handle_ != nullptr) cudnnDestroy(handle_);
}

struct CudnnConv2D::Descriptors {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  // One per direction: each carries its algorithm's math type.
  cudnnConvolutionDescriptor_t fwd = nullptr, bwd_data = nullptr,
                               bwd_filter = nullptr;
  cudnnConvolutionFwdAlgo_t fwd_algo{};
  cudnnConvolutionBwdDataAlgo_t bwd_data_algo{};
  cudnnConvolutionBwdFilterAlgo_t bwd_filter_algo{};

  ~Descriptors() {
    if (x != nullptr) cudnnDestroyTensorDescriptor(x);
    if (y != nullptr) cudnnDestroyTensorDescriptor(y);
    if (w != nullptr) cudnnDestroyFilterDescriptor(w);
    for (cudnnConvolutionDescriptor_t c : {fwd, bwd_data, bwd_filter}) {
      if (c != nullptr) cudnnDestroyConvolutionDescriptor(c);
    }
  }
};

CudnnConv2D::CudnnConv2D() = default;
CudnnConv2D::CudnnConv2D(CudnnConv2D&&) noexcept = default;
CudnnConv2D& CudnnConv2D::operator=(CudnnConv2D&&) noexcept = default;
CudnnConv2D::~CudnnConv2D() = default;

absl::StatusOr<CudnnConv2D> CudnnConv2D::Create(const CudnnHandle& handle,
                                                const Conv2DGeometry& g,
                                                const ConvOptions& options,
                                                int64_t groups) {
  if (g.batch < 0 || g.in_h <= 0 || g.in_w <= 0 || g.in_c <= 0 || g.k_h <= 0 ||
      g.k_w <= 0 || g.filters <= 0 || g.stride_h <= 0 || g.stride_w <= 0 ||
      g.out_h <= 0 || g.out_w <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("CudnnConv2D: bad geometry (input ", g.in_h, "x", g.in_w,
                     "x", g.in_c, ", kernel ", g.k_h, "x", g.k_w, ", output ",
                     g.out_h, "x", g.out_w, ")"));
  }
  if (groups < 1 || g.in_c % groups != 0 || g.filters % groups != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("CudnnConv2D: groups ", groups, " must divide the ",
                     g.in_c, " input channels and the ", g.filters,
                     " filters"));
  }
  CudnnConv2D conv;
  conv.g_ = g;
  conv.groups_ = groups;
  conv.inputs_ = options.inputs;
  // cuDNN's output size with symmetric padding (pad_top, pad_left).
  const int64_t sym_h = (g.in_h + 2 * g.pad_top - g.k_h) / g.stride_h + 1;
  const int64_t sym_w = (g.in_w + 2 * g.pad_left - g.k_w) / g.stride_w + 1;
  conv.explicit_padding_ = sym_h != g.out_h || sym_w != g.out_w;
  int pad_h = static_cast<int>(g.pad_top), pad_w = static_cast<int>(g.pad_left);
  conv.padded_h_ = g.in_h;
  conv.padded_w_ = g.in_w;
  if (conv.explicit_padding_) {
    // Just big enough for every window: TF's total padding.
    conv.padded_h_ =
        std::max((g.out_h - 1) * g.stride_h + g.k_h, g.in_h + g.pad_top);
    conv.padded_w_ =
        std::max((g.out_w - 1) * g.stride_w + g.k_w, g.in_w + g.pad_left);
    pad_h = pad_w = 0;
  }
  const size_t filter_bytes = AlignUp(conv.filter_patch() * g.filters * 4);
  const size_t padded_bytes =
      conv.explicit_padding_
          ? AlignUp(g.batch * conv.padded_h_ * conv.padded_w_ * g.in_c * 4)
          : 0;
  conv.layout_.filter = 0;
  conv.layout_.dfilter = filter_bytes;
  conv.layout_.padded_x = 2 * filter_bytes;
  conv.layout_.padded_dx = 2 * filter_bytes + padded_bytes;
  // 16-bit inputs: rounded copies of x (unless the padded copy is rounded
  // in place) and of dy.
  const bool round = options.inputs != InputRounding::kNone;
  const size_t rounded_x_bytes =
      round && !conv.explicit_padding_
          ? AlignUp(g.batch * g.in_h * g.in_w * g.in_c * 4)
          : 0;
  const size_t rounded_dy_bytes =
      round ? AlignUp(g.batch * g.out_h * g.out_w * g.filters * 4) : 0;
  conv.layout_.rounded_x = 2 * filter_bytes + 2 * padded_bytes;
  conv.layout_.rounded_dy = conv.layout_.rounded_x + rounded_x_bytes;
  conv.layout_.cudnn = conv.layout_.rounded_dy + rounded_dy_bytes;
  conv.workspace_bytes_ = conv.layout_.cudnn;
  if (g.batch == 0) return conv;  // cuDNN refuses empty tensors

  conv.d_ = std::make_unique<Descriptors>();
  Descriptors& d = *conv.d_;
  CUDNN_RETURN_IF_ERROR(cudnnCreateTensorDescriptor(&d.x));
  CUDNN_RETURN_IF_ERROR(cudnnCreateTensorDescriptor(&d.y));
  CUDNN_RETURN_IF_ERROR(cudnnCreateFilterDescriptor(&d.w));
  CUDNN_RETURN_IF_ERROR(cudnnSetTensor4dDescriptor(
      d.x, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, static_cast<int>(g.batch),
      static_cast<int>(g.in_c), static_cast<int>(conv.padded_h_),
      static_cast<int>(conv.padded_w_)));
  CUDNN_RETURN_IF_ERROR(cudnnSetTensor4dDescriptor(
      d.y, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, static_cast<int>(g.batch),
      static_cast<int>(g.filters), static_cast<int>(g.out_h),
      static_cast<int>(g.out_w)));
  CUDNN_RETURN_IF_ERROR(cudnnSetFilter4dDescriptor(
      d.w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC, static_cast<int>(g.filters),
      static_cast<int>(g.in_c / groups), static_cast<int>(g.k_h),
      static_cast<int>(g.k_w)));
  const cudnnMathType_t math =
      options.tensor_cores() ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
  for (cudnnConvolutionDescriptor_t* c : {&d.fwd, &d.bwd_data, &d.bwd_filter}) {
    CUDNN_RETURN_IF_ERROR(cudnnCreateConvolutionDescriptor(c));
    CUDNN_RETURN_IF_ERROR(cudnnSetConvolution2dDescriptor(
        *c, pad_h, pad_w, static_cast<int>(g.stride_h),
        static_cast<int>(g.stride_w), 1, 1, CUDNN_CROSS_CORRELATION,
        CUDNN_DATA_FLOAT));
    CUDNN_RETURN_IF_ERROR(cudnnSetConvolutionMathType(*c, math));
    CUDNN_RETURN_IF_ERROR(
        cudnnSetConvolutionGroupCount(*c, static_cast<int>(groups)));
  }
  int n = 0, c = 0, h = 0, w = 0;
  CUDNN_RETURN_IF_ERROR(
      cudnnGetConvolution2dForwardOutputDim(d.fwd, d.x, d.w, &n, &c, &h, &w));
  if (n != g.batch || c != g.filters || h != g.out_h || w != g.out_w) {
    return absl::InternalError(
        absl::StrCat("CudnnConv2D: cuDNN's output ", n, "x", h, "x", w, "x", c,
                     " differs from the geometry's ", g.batch, "x", g.out_h,
                     "x", g.out_w, "x", g.filters));
  }
  cudnnHandle_t hd = handle.get();
  size_t fwd_bytes = 0, data_bytes = 0, filter_ws_bytes = 0;
  {
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int count = 0;
    CUDNN_RETURN_IF_ERROR(cudnnGetConvolutionForwardAlgorithm_v7(
        hd, d.x, d.w, d.fwd, d.y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &count,
        perf));
    const auto* p = PickDeterministic(perf, count, options);
    if (p == nullptr) return NoAlgorithm("forward", g);
    d.fwd_algo = p->algo;
    CUDNN_RETURN_IF_ERROR(cudnnSetConvolutionMathType(d.fwd, p->mathType));
    CUDNN_RETURN_IF_ERROR(cudnnGetConvolutionForwardWorkspaceSize(
        hd, d.x, d.w, d.fwd, d.y, d.fwd_algo, &fwd_bytes));
  }
  {
    cudnnConvolutionBwdDataAlgoPerf_t
        perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    int count = 0;
    CUDNN_RETURN_IF_ERROR(cudnnGetConvolutionBackwardDataAlgorithm_v7(
        hd, d.w, d.y, d.bwd_data, d.x, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
        &count, perf));
    const auto* p = PickDeterministic(perf, count, options);
    if (p == nullptr) return NoAlgorithm("backward-data", g);
    d.bwd_data_algo = p->algo;
    CUDNN_RETURN_IF_ERROR(cudnnSetConvolutionMathType(d.bwd_data, p->mathType));
    CUDNN_RETURN_IF_ERROR(cudnnGetConvolutionBackwardDataWorkspaceSize(
        hd, d.w, d.y, d.bwd_data, d.x, d.bwd_data_algo, &data_bytes));
  }
  {
    cudnnConvolutionBwdFilterAlgoPerf_t
        perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    int count = 0;
    CUDNN_RETURN_IF_ERROR(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
        hd, d.x, d.y, d.bwd_filter, d.w,
        CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &count, perf));
    const auto* p = PickDeterministic(perf, count, options);
    if (p == nullptr) return NoAlgorithm("backward-filter", g);
    d.bwd_filter_algo = p->algo;
    CUDNN_RETURN_IF_ERROR(
        cudnnSetConvolutionMathType(d.bwd_filter, p->mathType));
    CUDNN_RETURN_IF_ERROR(cudnnGetConvolutionBackwardFilterWorkspaceSize(
        hd, d.x, d.y, d.bwd_filter, d.w, d.bwd_filter_algo, &filter_ws_bytes));
  }
  conv.cudnn_workspace_bytes_ =
      AlignUp(std::max({fwd_bytes, data_bytes, filter_ws_bytes}));
  conv.workspace_bytes_ = conv.layout_.cudnn + conv.cudnn_workspace_bytes_;
  return conv;
}

absl::StatusOr<const float*> CudnnConv2D::Input(const float* x, char* ws,
                                                cudaStream_t stream) const {
  const Conv2DGeometry& g = g_;
  if (explicit_padding_) {
    float* padded = reinterpret_cast<float*>(ws + layout_.padded_x);
    CUDA_RETURN_IF_ERROR(PadNhwc(g.batch, g.in_h, g.in_w, g.in_c, g.pad_top,
                                 g.pad_left, padded_h_, padded_w_, x, padded,
                                 stream));
    CUDA_RETURN_IF_ERROR(RoundInputs(inputs_,
                                     g.batch * padded_h_ * padded_w_ * g.in_c,
                                     padded, padded, stream));
    return padded;
  }
  if (inputs_ == InputRounding::kNone) return x;
  float* rounded = reinterpret_cast<float*>(ws + layout_.rounded_x);
  CUDA_RETURN_IF_ERROR(RoundInputs(inputs_, g.batch * g.in_h * g.in_w * g.in_c,
                                   x, rounded, stream));
  return rounded;
}

absl::Status CudnnConv2D::Forward(const CudnnHandle& handle,
                                  cudaStream_t stream, const float* x,
                                  const float* kernel, const float* bias,
                                  ActivationKind act, float* y,
                                  void* workspace) const {
  const Conv2DGeometry& g = g_;
  if (g.batch == 0) return absl::OkStatus();
  char* ws = static_cast<char*>(workspace);
  float* filter = reinterpret_cast<float*>(ws + layout_.filter);
  const int64_t filter_floats = filter_patch() * g.filters;
  CUDA_RETURN_IF_ERROR(
      KerasToCudnnFilter(filter_patch(), g.filters, kernel, filter, stream));
  CUDA_RETURN_IF_ERROR(
      RoundInputs(inputs_, filter_floats, filter, filter, stream));
  ASSIGN_OR_RETURN(const float* in, Input(x, ws, stream));
  const float one = 1.0f, zero = 0.0f;
  CUDNN_RETURN_IF_ERROR(cudnnSetStream(handle.get(), stream));
  CUDNN_RETURN_IF_ERROR(cudnnConvolutionForward(
      handle.get(), &one, d_->x, in, d_->w, filter, d_->fwd, d_->fwd_algo,
      ws + layout_.cudnn, cudnn_workspace_bytes_, &zero, d_->y, y));
  CUDA_RETURN_IF_ERROR(
      BiasActivationForward(g.rows(), g.filters, bias, act, y, stream));
  return absl::OkStatus();
}

absl::Status CudnnConv2D::Backward(const CudnnHandle& handle,
                                   cudaStream_t stream, const float* x,
                                   const float* kernel, const float* dy,
                                   float* dkernel, float* dbias, float* dx,
                                   void* workspace) const {
  const Conv2DGeometry& g = g_;
  if (dbias != nullptr) {  // linear: dy is only read
    CUDA_RETURN_IF_ERROR(ActivationBackwardBiasGrad(
        g.rows(), g.filters, ActivationKind::kLinear, nullptr,
        const_cast<float*>(dy), dbias, stream));
  }
  if (g.batch == 0) {
    CUDA_RETURN_IF_ERROR(cudaMemsetAsync(
        dkernel, 0, filter_patch() * g.filters * sizeof(float), stream));
    return absl::OkStatus();
  }
  char* ws = static_cast<char*>(workspace);
  float* filter = reinterpret_cast<float*>(ws + layout_.filter);
  float* dfilter = reinterpret_cast<float*>(ws + layout_.dfilter);
  ASSIGN_OR_RETURN(const float* in, Input(x, ws, stream));
  if (inputs_ != InputRounding::kNone) {
    // The bias took its gradient from dy as it is (float32) above.
    float* rounded = reinterpret_cast<float*>(ws + layout_.rounded_dy);
    CUDA_RETURN_IF_ERROR(
        RoundInputs(inputs_, g.rows() * g.filters, dy, rounded, stream));
    dy = rounded;
  }
  const float one = 1.0f, zero = 0.0f;
  CUDNN_RETURN_IF_ERROR(cudnnSetStream(handle.get(), stream));
  CUDNN_RETURN_IF_ERROR(cudnnConvolutionBackwardFilter(
      handle.get(), &one, d_->x, in, d_->y, dy, d_->bwd_filter,
      d_->bwd_filter_algo, ws + layout_.cudnn, cudnn_workspace_bytes_, &zero,
      d_->w, dfilter));
  CUDA_RETURN_IF_ERROR(
      CudnnToKerasFilter(filter_patch(), g.filters, dfilter, dkernel, stream));
  if (dx == nullptr) return absl::OkStatus();
  CUDA_RETURN_IF_ERROR(
      KerasToCudnnFilter(filter_patch(), g.filters, kernel, filter, stream));
  CUDA_RETURN_IF_ERROR(
      RoundInputs(inputs_, filter_patch() * g.filters, filter, filter, stream));
  float* out =
      explicit_padding_ ? reinterpret_cast<float*>(ws + layout_.padded_dx) : dx;
  CUDNN_RETURN_IF_ERROR(cudnnConvolutionBackwardData(
      handle.get(), &one, d_->w, filter, d_->y, dy, d_->bwd_data,
      d_->bwd_data_algo, ws + layout_.cudnn, cudnn_workspace_bytes_, &zero,
      d_->x, out));
  if (explicit_padding_) {
    CUDA_RETURN_IF_ERROR(CropNhwc(g.batch, g.in_h, g.in_w, g.in_c, g.pad_top,
                                  g.pad_left, padded_h_, padded_w_, out, dx,
                                  stream));
  }
  return absl::OkStatus();
}

}  // namespace cuda
}  // namespace lockstep
