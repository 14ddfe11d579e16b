// GPU kernels of the text-model layers (add, layer_norm, embedding,
// position_embedding, gather_positions and multi_head_attention's softmax),
// with the semantics of their CPU passes in core/layers on plain row-major
// device buffers. Every sum a gradient accumulates is taken in a fixed order
// (no float atomics), so results repeat bit for bit from run to run.
// Each call enqueues on `stream`, does not block, and returns the launch
// error (cudaSuccess for empty input).
#ifndef LOCKSTEP_KERNELS_CUDA_TRANSFORMER_H_
#define LOCKSTEP_KERNELS_CUDA_TRANSFORMER_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace lockstep {
namespace cuda {

// y = x[0] + x[1] + ... + x[k - 1], n elements each, summed left to right
// as the CPU. `x` is a host array of k >= 1 device pointers; y may be x[0]
// (not a later input: y holds partial sums while they are read).
cudaError_t AddForward(int64_t n, int k, const float* const* x, float* y,
                       cudaStream_t stream);

// Row-wise over [rows, width]: y = (x - mean) * rstd * gamma + beta, with
// the biased variance and rstd = 1 / sqrt(var + epsilon). `stats` (2 * rows
// floats: every mean, then every rstd) keeps what the backward needs.
cudaError_t LayerNormForward(int64_t rows, int64_t width, float epsilon,
                             const float* x, const float* gamma,
                             const float* beta, float* y, float* stats,
                             cudaStream_t stream);
// Floats of LayerNormBackward's workspace (per 64-row block and column,
// the block's dgamma and dbeta sums).
int64_t LayerNormBackwardWorkspaceFloats(int64_t rows, int64_t width);
// dgamma, dbeta += the column sums of dy * xhat and dy, taken per 64-row
// block and then over the blocks in order, as the CPU; then dx
// (OVERWRITTEN; may be null, may be dy) from dy, x and the forward's
// `stats`.
cudaError_t LayerNormBackward(int64_t rows, int64_t width, const float* x,
                              const float* gamma, const float* stats,
                              const float* dy, float* dx, float* dgamma,
                              float* dbeta, float* workspace,
                              cudaStream_t stream);

// y[i, :] = table[ids[i], :] for `lookups` ids given as floats; a value
// that is not an integer in [0, rows) gives a zero row.
cudaError_t EmbeddingForward(int64_t lookups, int64_t rows, int64_t dim,
                             const float* ids, const float* table, float* y,
                             cudaStream_t stream);
// Bytes of EmbeddingBackward's workspace (the sorted ids, the chunks' sums
// and cub's own).
cudaError_t EmbeddingBackwardWorkspaceBytes(int64_t lookups, int64_t rows,
                                            int64_t dim, size_t* bytes);
// grad[ids[i], :] += dy[i, :] for every valid id, in the CPU's order of
// additions (kernels/cpu/embedding_grad.h), bit for bit: the lookups are
// stably sorted by id; each later chunk of a row's lookups is summed by its
// own threads, and each (row, column) adds its first chunk in lookup order,
// then the later chunks' sums in order.
cudaError_t EmbeddingBackward(int64_t lookups, int64_t rows, int64_t dim,
                              const float* ids, const float* dy, float* grad,
                              void* workspace, size_t workspace_bytes,
                              cudaStream_t stream);

// Every one of n samples gets the table's first `per_sample` values (rows
// 0..L-1 of a [max_length, dim] table: per_sample = L * dim).
cudaError_t PositionEmbeddingForward(int64_t n, int64_t per_sample,
                                     const float* table, float* y,
                                     cudaStream_t stream);
// grad[k] += sum over samples s, in order, of dy[s * per_sample + k].
cudaError_t PositionEmbeddingBackward(int64_t n, int64_t per_sample,
                                      const float* dy, float* grad,
                                      cudaStream_t stream);

// Per sample: y [count, width] = rows of x [length, width] at `positions`
// [count] (floats); a value that is not an integer in [0, length) gives a
// zero row.
cudaError_t GatherPositionsForward(int64_t n, int64_t length, int64_t width,
                                   int64_t count, const float* x,
                                   const float* positions, float* y,
                                   cudaStream_t stream);
// dx [n, length, width] is zero-filled, then each gathered row's gradient
// added back, positions in order (rows gathered twice get both).
cudaError_t GatherPositionsBackward(int64_t n, int64_t length, int64_t width,
                                    int64_t count, const float* positions,
                                    const float* dy, float* dx,
                                    cudaStream_t stream);

// Dropout on attention probabilities, kernels/cpu/dropout.h's mask with
// element index the flat index into [batch * heads, L, L] (the CPU's
// sh * L * L + i * L + j).
struct AttentionDropout {
  bool enabled = false;  // training with a rate > 0
  float rate = 0.0f;
  uint64_t seed = 0;
};

// In place on `probs` [batch * heads, L, L], which holds scaled scores
// (query rows, key columns): each row's softmax over the keys whose
// mask[sample, key] != 0 (mask [batch, L]; null: every key), masked keys
// getting 0 and a row with no key all zeros. With dropout enabled,
// `dropped` (same shape) also gets the dropped-out probabilities.
cudaError_t AttentionSoftmaxForward(int64_t batch, int64_t heads,
                                    int64_t length, const float* mask,
                                    const AttentionDropout& dropout,
                                    float* probs, float* dropped,
                                    cudaStream_t stream);
// dropped[e] = keep(e) ? probs[e] / (1 - rate) : 0 over `count` elements:
// the forward's dropped probabilities again, for the backward.
cudaError_t AttentionDropoutForward(int64_t count,
                                    const AttentionDropout& dropout,
                                    const float* probs, float* dropped,
                                    cudaStream_t stream);
// In place on `grad` (d loss / d dropped probabilities on entry; d loss /
// d unscaled scores on exit): g = the gradient through the dropout mask,
// then per row scale * P * (g - <g, P>), P the forward's `probs`.
cudaError_t AttentionSoftmaxBackward(int64_t batch, int64_t heads,
                                     int64_t length, float scale,
                                     const AttentionDropout& dropout,
                                     const float* probs, float* grad,
                                     cudaStream_t stream);

}  // namespace cuda
}  // namespace lockstep

#endif  // LOCKSTEP_KERNELS_CUDA_TRANSFORMER_H_
