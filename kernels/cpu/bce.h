// Binary cross-entropy from logits: Keras BinaryCrossentropy(from_logits=
// True), torch BCEWithLogitsLoss. One logit z per row, label t in {0, 1}.
#ifndef LOCKSTEP_KERNELS_CPU_BCE_H_
#define LOCKSTEP_KERNELS_CPU_BCE_H_

#include <cstdint>

#include "kernels/cpu/softmax_xent.h"

namespace lockstep {

// Row loss max(z, 0) - z * t + log1p(exp(-|z|)) (summed in double in row
// order): no overflow and no log(0) for any z. When grad is not null it gets
// (sigmoid(z) - t) * scale; it may alias logits. correct counts rows whose
// prediction (z > 0, a probability above 0.5) equals t. A row whose label is
// negative has no loss (zero grad) and is not counted. Labels above 1 are
// the caller's error (the trainer checks the data has two classes).
LossSums BinaryCrossEntropy(int64_t rows, const float* logits,
                            const int32_t* labels, float scale, float* grad);

}  // namespace lockstep

#endif  // LOCKSTEP_KERNELS_CPU_BCE_H_
