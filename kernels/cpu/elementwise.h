// Element-wise kernels on row-major [rows, cols] float buffers: bias, the
// activations (forward on the output, backward from the output), softmax,
// scale and axpy. Every function runs on the ParallelFor pool.
#ifndef LOCKSTEP_KERNELS_CPU_ELEMENTWISE_H_
#define LOCKSTEP_KERNELS_CPU_ELEMENTWISE_H_

#include <cstdint>

namespace lockstep {

// The activations the kernels know; kSoftmax works on rows. kRelu6 is
// min(max(x, 0), 6) (MobileNetV2's), its gradient 1 strictly inside (0, 6).
enum class ActivationKind {
  kLinear,
  kRelu,
  kTanh,
  kSigmoid,
  kSoftmax,
  kRelu6
};

// y[r, c] += bias[c].
void AddBias(int64_t rows, int64_t cols, const float* bias, float* y);
// dbias[c] = sum over r of dy[r, c] (overwrites; summed in a fixed order).
void BiasGrad(int64_t rows, int64_t cols, const float* dy, float* dbias);

// In place on y [rows, cols]: y = act(y + bias). bias may be null.
void BiasActivationForward(int64_t rows, int64_t cols, const float* bias,
                           ActivationKind act, float* y);
// In place: dy = d(loss)/d(pre-activation) given the activation's output y
// and d(loss)/d(output) in dy. Linear leaves dy alone.
void ActivationBackward(int64_t rows, int64_t cols, ActivationKind act,
                        const float* y, float* dy);

// ActivationBackward, then (when dbias is not null) BiasGrad of the result,
// in one pass over dy.
void ActivationBackwardBiasGrad(int64_t rows, int64_t cols, ActivationKind act,
                                const float* y, float* dy, float* dbias);

// y[r, :] = softmax(x[r, :]) (max-subtracted); x may equal y.
void SoftmaxRows(int64_t rows, int64_t cols, const float* x, float* y);
// One row in place, on the calling thread, over the columns whose key_mask
// entry is non-zero (every column when key_mask is null); masked columns
// get 0, and a row with every column masked is all zeros (attention over
// padding).
void MaskedSoftmaxRow(int64_t cols, const float* key_mask, float* row);
// The softmax's backward for one row with probabilities p, on the calling
// thread: g = p * (g - <g, p>) * scale.
void SoftmaxBackwardRow(int64_t cols, const float* p, float scale, float* g);

// One LayerNorm row on the calling thread: y = (x - mean) * rstd * gamma +
// beta over w values, rstd = 1 / sqrt(var + epsilon) (the biased variance);
// the row's mean and rstd are returned for the backward pass.
void LayerNormRow(int64_t w, const float* x, const float* gamma,
                  const float* beta, float epsilon, float* y, float* mean,
                  float* rstd);

// x *= alpha.
void Scale(int64_t n, float alpha, float* x);
// y += alpha * x.
void Axpy(int64_t n, float alpha, const float* x, float* y);

// y[i] = x[i] + y[i] where x is n native-endian floats at any byte
// alignment (a received ring message), on the calling thread only (the
// communication thread must not take the compute pool).
void AddFromBytes(int64_t n, const char* x, float* y);

// bfloat16 (the top half of a float32's bits), the ring's compressed wire
// type. Like AddFromBytes, all three run on the calling thread only.
// y[i] = x[i] rounded to the nearest bfloat16, ties to even; a NaN stays a
// (quiet) NaN, and a value past bfloat16's largest finite rounds to
// infinity.
void FloatToBf16(int64_t n, const float* x, uint16_t* y);
// y[i] = x[i] widened to float32 (exact), x being n native-endian bfloat16
// at any byte alignment.
void Bf16BytesToFloat(int64_t n, const char* x, float* y);
// y[i] = widen(x[i]) + y[i].
void AddBf16FromBytes(int64_t n, const char* x, float* y);
// y[i] = x[i] rounded to the nearest bfloat16 as FloatToBf16 rounds, kept
// as a float32 (exact): a bf16 GEMM's inputs (GemmPrecision::kBf16).
// x == y is allowed. The calling thread only.
void RoundToBf16(int64_t n, const float* x, float* y);

}  // namespace lockstep

#endif  // LOCKSTEP_KERNELS_CPU_ELEMENTWISE_H_
