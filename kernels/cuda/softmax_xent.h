// Sparse softmax cross-entropy from logits on the GPU, the semantics of
// kernels/cpu/softmax_xent.h: row loss logsumexp(logits[r]) -
// logits[r, label[r]] (the sum of exponentials in double), gradient
// (softmax - onehot) * scale, first-argmax accuracy. Exponentials use CUDA's
// expf/exp, so values agree with the CPU to a few ulp, not bit for bit; the
// batch sums are deterministic (fixed reduction order).
#ifndef LOCKSTEP_KERNELS_CUDA_SOFTMAX_XENT_H_
#define LOCKSTEP_KERNELS_CUDA_SOFTMAX_XENT_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace lockstep {
namespace cuda {

// The batch totals, written to device memory.
struct DeviceLossSums {
  double loss_sum = 0;
  int64_t correct = 0;
  int64_t count = 0;  // rows with a label (>= 0)
};

// Device scratch bytes SoftmaxCrossEntropy needs for `rows` rows.
size_t SoftmaxCrossEntropyWorkspaceBytes(int64_t rows);

// logits [rows, cols], labels [rows] in [0, cols) (a label at or above
// cols gives a NaN loss and no gradient correction; a negative label means
// "no label": zero loss and gradient, not counted), all device pointers. grad
// (may alias logits) and row_loss may be null. `workspace` holds
// SoftmaxCrossEntropyWorkspaceBytes(rows) bytes; `sums` gets the totals.
// Enqueues on `stream`; returns the launch error.
cudaError_t SoftmaxCrossEntropy(int64_t rows, int64_t cols, const float* logits,
                                const int32_t* labels, float scale, float* grad,
                                float* row_loss, void* workspace,
                                DeviceLossSums* sums, cudaStream_t stream);

}  // namespace cuda
}  // namespace lockstep

#endif  // LOCKSTEP_KERNELS_CUDA_SOFTMAX_XENT_H_
