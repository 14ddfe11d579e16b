// Element-wise GPU kernels on row-major [rows, cols] float device buffers,
// matching kernels/cpu/elementwise.h bit for bit (built with --fmad=false so
// a * x + y rounds twice, as on the CPU). Each call enqueues on `stream`,
// does not block, and returns the launch error (cudaSuccess for empty input).
#ifndef LOCKSTEP_KERNELS_CUDA_ELEMENTWISE_H_
#define LOCKSTEP_KERNELS_CUDA_ELEMENTWISE_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace lockstep {
namespace cuda {

// y[r, c] += bias[c].
cudaError_t AddBias(int64_t rows, int64_t cols, const float* bias, float* y,
                    cudaStream_t stream);
// y = max(y + bias, 0) in place (bias may be null), as
// BiasActivationForward(kRelu).
cudaError_t BiasReluForward(int64_t rows, int64_t cols, const float* bias,
                            float* y, cudaStream_t stream);
// dy = y > 0 ? dy : 0 for n elements, y the ReLU's output.
cudaError_t ReluBackward(int64_t n, const float* y, float* dy,
                         cudaStream_t stream);
// dbias[c] = sum over r of dy[r, c], summed in the CPU's order (blocks of 256
// rows, then the blocks), so the result is the CPU's exactly. With a
// `workspace` of BiasGradWorkspaceFloats(rows, cols) floats every block of
// every column is summed in parallel, then each column's blocks in order;
// without (null), one thread sums a whole column (slow for tall dy, as a
// convolution's).
cudaError_t BiasGrad(int64_t rows, int64_t cols, const float* dy, float* dbias,
                     cudaStream_t stream, float* workspace = nullptr);
// The workspace BiasGrad's parallel form needs: one float per (256-row
// block, column); 0 when there is only one block.
int64_t BiasGradWorkspaceFloats(int64_t rows, int64_t cols);
// x *= alpha.
cudaError_t Scale(int64_t n, float alpha, float* x, cudaStream_t stream);
// A job's 16-bit precision for the inputs of matrix products and
// convolutions (docs/precision.md): the values those ops read are rounded
// to it and multiplied exactly in float32 (tensor cores), sums in float32.
enum class InputRounding { kNone, kBf16, kFp16 };
// y = x rounded to `to` and back to float32 (in place when y == x):
// bfloat16 as kernels/cpu's RoundToBf16 (nearest, ties to even, a NaN stays
// a quiet NaN), IEEE half by __float2half_rn (nearest even; beyond 65504 an
// infinity, which fp16's loss scaling catches). kNone copies (nothing in
// place).
cudaError_t RoundInputs(InputRounding to, int64_t n, const float* x, float* y,
                        cudaStream_t stream);
// y = x as 16-bit values (the bits of a __nv_bfloat16 or __half), rounded
// as RoundInputs rounds them: what cuBLAS multiplies for a 16-bit GEMM
// (kernels/cuda/gemm.h). x is `batch` matrices of rows x cols, row stride
// `ld`, `stride` apart; y gets them packed (row stride cols, rows * cols
// apart), so only the elements a strided view reaches are read. `to` must
// not be kNone.
cudaError_t ToSixteenBits(InputRounding to, int64_t batch, int64_t rows,
                          int64_t cols, const float* x, int64_t ld,
                          int64_t stride, uint16_t* y, cudaStream_t stream);
// y += alpha * x.
cudaError_t Axpy(int64_t n, float alpha, const float* x, float* y,
                 cudaStream_t stream);

}  // namespace cuda
}  // namespace lockstep

#endif  // LOCKSTEP_KERNELS_CUDA_ELEMENTWISE_H_
