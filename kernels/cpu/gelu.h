// GELU, the exact (erf) form BERT and PyTorch's nn.GELU() use:
// gelu(x) = x * Phi(x) = 0.5 x (1 + erf(x / sqrt(2))). erf and exp are
// polynomial approximations written so the loops vectorize (absolute error
// of erf under 2e-7, far inside fp32 training noise).
#ifndef LOCKSTEP_KERNELS_CPU_GELU_H_
#define LOCKSTEP_KERNELS_CPU_GELU_H_

#include <cstdint>

namespace lockstep {

// y[i] = gelu(x[i]); x may equal y.
void GeluForward(int64_t n, const float* x, float* y);
// dx[i] = dy[i] * gelu'(x[i]), gelu'(x) = Phi(x) + x phi(x); dx may equal
// dy.
void GeluBackward(int64_t n, const float* x, const float* dy, float* dx);

// The scalar forms (for tests and the CUDA kernels' reference).
float GeluValue(float x);
float GeluDerivative(float x);

}  // namespace lockstep

#endif  // LOCKSTEP_KERNELS_CPU_GELU_H_
