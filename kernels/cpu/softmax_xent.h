// Sparse softmax cross-entropy from logits, computed through log-sum-exp so
// large logits neither overflow nor lose the gradient.
#ifndef LOCKSTEP_KERNELS_CPU_SOFTMAX_XENT_H_
#define LOCKSTEP_KERNELS_CPU_SOFTMAX_XENT_H_

#include <cstdint>

namespace lockstep {

struct LossSums {
  double loss_sum = 0;  // sum of the per-row losses
  int64_t correct = 0;  // rows whose first argmax equals the label
  int64_t count = 0;    // rows with a label (>= 0)
};

// For logits [rows, cols] and labels in [0, cols): row loss
// logsumexp(logits[r]) - logits[r, label[r]]. When grad is not null it gets
// (softmax(logits[r]) - onehot(label[r])) * scale; when row_loss is not null it
// gets each row's loss. grad may alias logits. A row whose label is negative
// (an unmasked position of a masked language model) has no loss: its grad
// row and row loss are zero and it is not counted. Rows run in parallel;
// the sums are taken in row order, so the result is the same for any
// thread count.
LossSums SoftmaxCrossEntropy(int64_t rows, int64_t cols, const float* logits,
                             const int32_t* labels, float scale, float* grad,
                             float* row_loss);

// Rows whose first maximum is at the label (negative labels never match).
int64_t CountArgmaxCorrect(int64_t rows, int64_t cols, const float* x,
                           const int32_t* labels);

}  // namespace lockstep

#endif  // LOCKSTEP_KERNELS_CPU_SOFTMAX_XENT_H_
