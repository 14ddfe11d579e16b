// The embedding's gradient, grad[id, :] += dy[i, :] for every lookup i of a
// valid id, in an order of additions that the GPU (kernels/cuda/
// embedding.cu) follows bit for bit. Host and device: the CUDA kernels
// include it for kEmbeddingGradChunk.
//
// The order, per table row: its lookups in their order; the first
// kEmbeddingGradChunk are added onto the row one by one; each later chunk
// of kEmbeddingGradChunk lookups (the last one maybe shorter) is summed from
// zero, in order, and then added onto the row, chunk after chunk. A row
// looked up at most kEmbeddingGradChunk times in a batch gets the plain
// serial sum. One looked up thousands of times (padding, [MASK], a
// two-row segment table: half of every batch) is summed on a GPU chunk by
// chunk in parallel, instead of in one chain of dependent loads: the chain
// was 48% of a BERT step's GPU time at batch 256.
#ifndef LOCKSTEP_KERNELS_CPU_EMBEDDING_GRAD_H_
#define LOCKSTEP_KERNELS_CPU_EMBEDDING_GRAD_H_

#include <cstdint>

namespace lockstep {

inline constexpr int64_t kEmbeddingGradChunk = 256;

// ids: `lookups` float ids; a value that is not an integer in [0, rows)
// adds nothing. grad: [rows, dim]; dy: [lookups, dim].
void EmbeddingGradAdd(int64_t lookups, int64_t rows, int64_t dim,
                      const float* ids, const float* dy, float* grad);

}  // namespace lockstep

#endif  // LOCKSTEP_KERNELS_CPU_EMBEDDING_GRAD_H_
