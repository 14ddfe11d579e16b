// Grid-stride kernels for the text-model layers. Row reductions (LayerNorm,
// softmax) use warp shuffles in a fixed tree and a fixed-order pass over the
// warps' sums; scatter-adds give each output element one thread that walks
// its contributions in the CPU's order. Built with --fmad=false, so
// element-wise products and sums round as on the CPU.
#include <cub/device/device_radix_sort.cuh>

#include "kernels/cpu/dropout_mask.h"
#include "kernels/cuda/grid_stride.cuh"
#include "kernels/cuda/transformer.h"

namespace lockstep {
namespace cuda {
namespace {

constexpr int kWarp = 32;
constexpr int64_t kNormRowBlock = 64;  // core/layers/layer_norm.cc's
constexpr int kMaxAddInputs = 8;       // pointers one AddKernel takes

// ---- Shared helpers ----

// The integer value of f when it is one in [0, limit), else -1: the CPU's
// `p = int64(f); p >= 0 && p < limit && f == float(p)` without its
// undefined cast of NaN or huge values.
__device__ int64_t IndexOf(float f, int64_t limit) {
  if (!(f >= 0.0f) || !(f < static_cast<float>(limit)) || f != floorf(f)) {
    return -1;
  }
  return static_cast<int64_t>(f);
}


// XOR butterflies: every lane ends with the same value (each step adds the
// same two operands, commuted), deterministically.
__device__ float WarpSum(float v) {
  for (int m = kWarp / 2; m > 0; m /= 2) v += __shfl_xor_sync(~0u, v, m);
  return v;
}

__device__ float WarpMax(float v) {
  for (int m = kWarp / 2; m > 0; m /= 2) {
    v = fmaxf(v, __shfl_xor_sync(~0u, v, m));
  }
  return v;
}

// The block's total, in every thread: warp sums, then the warps' sums in
// order. `shared` holds one float per warp; callable repeatedly.
__device__ float BlockSum(float v, float* shared) {
  v = WarpSum(v);
  const int warps = (blockDim.x + kWarp - 1) / kWarp;
  __syncthreads();  // the previous call's readers are done with `shared`
  if (threadIdx.x % kWarp == 0) shared[threadIdx.x / kWarp] = v;
  __syncthreads();
  float total = 0.0f;
  for (int w = 0; w < warps; ++w) total += shared[w];
  return total;
}

// Blocks for `rows` rows of rows_per_block each (capped as Blocks).
int RowBlocks(int64_t rows, int rows_per_block) {
  const int64_t b = (rows + rows_per_block - 1) / rows_per_block;
  return static_cast<int>(b < kMaxBlocks ? b : kMaxBlocks);
}

// ---- add ----

struct AddInputs {
  const float* x[kMaxAddInputs];
  int count;
};

// y = (accumulate ? y : x[0]) + the rest, left to right.
__global__ void AddKernel(int64_t n, AddInputs in, bool accumulate, float* y) {
  for (int64_t i = FirstIndex(); i < n; i += Stride()) {
    float acc = accumulate ? y[i] : in.x[0][i];
    for (int j = accumulate ? 0 : 1; j < in.count; ++j) acc += in.x[j][i];
    y[i] = acc;
  }
}

// ---- layer_norm ----

// One block per row (grid-stride over rows).
__global__ void LayerNormForwardKernel(int64_t rows, int64_t width,
                                       float epsilon, const float* x,
                                       const float* gamma, const float* beta,
                                       float* y, float* mean_out,
                                       float* rstd_out) {
  __shared__ float shared[kThreads / kWarp];
  const float w = static_cast<float>(width);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * width;
    float sum = 0.0f;
    for (int64_t c = threadIdx.x; c < width; c += blockDim.x) sum += xr[c];
    const float mean = BlockSum(sum, shared) / w;
    float var = 0.0f;
    for (int64_t c = threadIdx.x; c < width; c += blockDim.x) {
      const float d = xr[c] - mean;
      var += d * d;
    }
    var = BlockSum(var, shared) / w;
    const float rstd = 1.0f / sqrtf(var + epsilon);
    float* yr = y + r * width;
    for (int64_t c = threadIdx.x; c < width; c += blockDim.x) {
      yr[c] = (xr[c] - mean) * rstd * gamma[c] + beta[c];
    }
    if (threadIdx.x == 0) {
      mean_out[r] = mean;
      rstd_out[r] = rstd;
    }
  }
}

// dx = rstd (g - mean(g) - xhat mean(g xhat)), g = dy * gamma; a block per
// row.
__global__ void LayerNormDxKernel(int64_t rows, int64_t width, const float* x,
                                  const float* gamma, const float* mean_in,
                                  const float* rstd_in, const float* dy,
                                  float* dx) {
  __shared__ float shared[kThreads / kWarp];
  const float inv_w = 1.0f / static_cast<float>(width);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * width;
    const float* dyr = dy + r * width;
    const float mean = mean_in[r], rstd = rstd_in[r];
    float sum_g = 0.0f, sum_gx = 0.0f;
    for (int64_t c = threadIdx.x; c < width; c += blockDim.x) {
      const float xhat = (xr[c] - mean) * rstd;
      const float g = dyr[c] * gamma[c];
      sum_g += g;
      sum_gx += g * xhat;
    }
    const float mg = BlockSum(sum_g, shared) * inv_w;
    const float mgx = BlockSum(sum_gx, shared) * inv_w;
    float* dxr = dx + r * width;
    for (int64_t c = threadIdx.x; c < width; c += blockDim.x) {
      const float xhat = (xr[c] - mean) * rstd;
      dxr[c] = rstd * (dyr[c] * gamma[c] - mg - xhat * mgx);
    }
  }
}

// partial[b, 0, c] and partial[b, 1, c]: rows b*64.. of column c's dy *
// xhat and dy, summed from the top (the CPU's per-block sums).
__global__ void LayerNormPartialKernel(int64_t rows, int64_t width,
                                       int64_t blocks, const float* x,
                                       const float* mean_in,
                                       const float* rstd_in, const float* dy,
                                       float* partial) {
  for (int64_t i = FirstIndex(); i < blocks * width; i += Stride()) {
    const int64_t b = i / width, c = i % width;
    const int64_t r1 =
        (b + 1) * kNormRowBlock < rows ? (b + 1) * kNormRowBlock : rows;
    float pg = 0.0f, pb = 0.0f;
    for (int64_t r = b * kNormRowBlock; r < r1; ++r) {
      const float xhat = (x[r * width + c] - mean_in[r]) * rstd_in[r];
      pg += dy[r * width + c] * xhat;
      pb += dy[r * width + c];
    }
    partial[b * 2 * width + c] = pg;
    partial[b * 2 * width + width + c] = pb;
  }
}

// dgamma[c], dbeta[c] += the blocks' sums, block by block.
__global__ void LayerNormFinishKernel(int64_t width, int64_t blocks,
                                      const float* partial, float* dgamma,
                                      float* dbeta) {
  for (int64_t c = FirstIndex(); c < width; c += Stride()) {
    float g = dgamma[c], b = dbeta[c];
    for (int64_t k = 0; k < blocks; ++k) {
      g += partial[k * 2 * width + c];
      b += partial[k * 2 * width + width + c];
    }
    dgamma[c] = g;
    dbeta[c] = b;
  }
}

// Threads for a row of `width`: whole warps, at most kThreads.
int NormThreads(int64_t width) {
  const int64_t t = (width + kWarp - 1) / kWarp * kWarp;
  return static_cast<int>(t < kThreads ? t : kThreads);
}

// ---- embedding ----

__global__ void EmbeddingForwardKernel(int64_t lookups, int64_t rows,
                                       int64_t dim, const float* ids,
                                       const float* table, float* y) {
  for (int64_t i = FirstIndex(); i < lookups * dim; i += Stride()) {
    const int64_t id = IndexOf(ids[i / dim], rows);
    y[i] = id < 0 ? 0.0f : table[id * dim + i % dim];
  }
}

// Sort keys: the id, or `rows` (sorted last, skipped) when not one.
__global__ void EmbeddingKeysKernel(int64_t lookups, int64_t rows,
                                    const float* ids, uint32_t* keys,
                                    int32_t* order) {
  for (int64_t i = FirstIndex(); i < lookups; i += Stride()) {
    const int64_t id = IndexOf(ids[i], rows);
    keys[i] = static_cast<uint32_t>(id < 0 ? rows : id);
    order[i] = static_cast<int32_t>(i);
  }
}

// Thread (p, c): when sorted position p starts a run of one id, that row's
// column c gets the run's gradients, in lookup order (the sort is stable).
__global__ void EmbeddingScatterKernel(int64_t lookups, int64_t rows,
                                       int64_t dim, const uint32_t* keys,
                                       const int32_t* order, const float* dy,
                                       float* grad) {
  for (int64_t i = FirstIndex(); i < lookups * dim; i += Stride()) {
    const int64_t p = i / dim, c = i % dim;
    const int64_t key = keys[p];
    if (key >= rows || (p > 0 && keys[p - 1] == key)) continue;
    float acc = grad[key * dim + c];
    for (int64_t q = p; q < lookups && keys[q] == key; ++q) {
      acc += dy[static_cast<int64_t>(order[q]) * dim + c];
    }
    grad[key * dim + c] = acc;
  }
}

// Bits that hold every key, `rows` (the skip key) included.
int KeyBits(int64_t rows) {
  int bits = 1;
  while (bits < 31 && (int64_t{1} << bits) <= rows) ++bits;
  return bits;
}

constexpr size_t kAlign = 256;
size_t AlignUp(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

// EmbeddingBackward's workspace: keys and order in, keys and order out, then
// cub's temporary storage.
struct SortLayout {
  size_t array = 0;  // bytes of one int32 array, aligned
  size_t temp = 0;   // cub's bytes
  size_t total() const { return 4 * array + temp; }
};

cudaError_t Layout(int64_t lookups, int64_t rows, SortLayout* out) {
  if (lookups < 0 || lookups > INT32_MAX || rows < 0 || rows >= INT32_MAX) {
    return cudaErrorInvalidValue;
  }
  out->array = AlignUp(static_cast<size_t>(lookups) * sizeof(int32_t));
  out->temp = 0;
  if (lookups == 0) return cudaSuccess;
  return cub::DeviceRadixSort::SortPairs(
      nullptr, out->temp, static_cast<const uint32_t*>(nullptr),
      static_cast<uint32_t*>(nullptr), static_cast<const int32_t*>(nullptr),
      static_cast<int32_t*>(nullptr), static_cast<int>(lookups), 0,
      KeyBits(rows));
}

// ---- position_embedding ----

__global__ void PositionForwardKernel(int64_t n, int64_t per,
                                      const float* table, float* y) {
  for (int64_t i = FirstIndex(); i < n * per; i += Stride()) {
    y[i] = table[i % per];
  }
}

__global__ void PositionBackwardKernel(int64_t n, int64_t per, const float* dy,
                                       float* grad) {
  for (int64_t k = FirstIndex(); k < per; k += Stride()) {
    float acc = grad[k];
    for (int64_t s = 0; s < n; ++s) acc += dy[s * per + k];
    grad[k] = acc;
  }
}

// ---- gather_positions ----

__global__ void GatherForwardKernel(int64_t n, int64_t length, int64_t width,
                                    int64_t count, const float* x,
                                    const float* positions, float* y) {
  for (int64_t i = FirstIndex(); i < n * count * width; i += Stride()) {
    const int64_t sp = i / width, c = i % width, s = sp / count;
    const int64_t row = IndexOf(positions[sp], length);
    y[i] = row < 0 ? 0.0f : x[(s * length + row) * width + c];
  }
}

// Thread (s, c) walks sample s's positions in order: rows gathered twice
// sum in the CPU's order, and no two threads write one element.
__global__ void GatherBackwardKernel(int64_t n, int64_t length, int64_t width,
                                     int64_t count, const float* positions,
                                     const float* dy, float* dx) {
  for (int64_t i = FirstIndex(); i < n * width; i += Stride()) {
    const int64_t s = i / width, c = i % width;
    for (int64_t p = 0; p < count; ++p) {
      const int64_t row = IndexOf(positions[s * count + p], length);
      if (row < 0) continue;
      dx[(s * length + row) * width + c] += dy[(s * count + p) * width + c];
    }
  }
}

// ---- attention softmax ----

constexpr int kRowsPerBlock = kThreads / kWarp;  // one warp per row

__device__ bool KeyAllowed(const float* mask, int64_t j) {
  return mask == nullptr || mask[j] != 0.0f;
}

__global__ void SoftmaxForwardKernel(int64_t rows, int64_t heads,
                                     int64_t length, const float* mask,
                                     AttentionDropout dropout, float keep_scale,
                                     float* probs, float* dropped) {
  const int lane = threadIdx.x % kWarp;
  const int64_t first =
      blockIdx.x * int64_t{kRowsPerBlock} + threadIdx.x / kWarp;
  const int64_t step = int64_t{gridDim.x} * kRowsPerBlock;
  for (int64_t r = first; r < rows; r += step) {
    // Row r is query r % L of (sample, head) r / L.
    const float* m =
        mask != nullptr ? mask + (r / length / heads) * length : nullptr;
    float* p = probs + r * length;
    float mx = -INFINITY;
    for (int64_t j = lane; j < length; j += kWarp) {
      if (KeyAllowed(m, j)) mx = fmaxf(mx, p[j]);
    }
    mx = WarpMax(mx);
    if (mx == -INFINITY) {  // every key padded
      for (int64_t j = lane; j < length; j += kWarp) {
        p[j] = 0.0f;
        if (dropout.enabled) dropped[r * length + j] = 0.0f;
      }
      continue;
    }
    float sum = 0.0f;
    for (int64_t j = lane; j < length; j += kWarp) {
      const float e = KeyAllowed(m, j) ? expf(p[j] - mx) : 0.0f;
      p[j] = e;
      sum += e;
    }
    const float inv = 1.0f / WarpSum(sum);
    for (int64_t j = lane; j < length; j += kWarp) {
      const float v = p[j] * inv;
      p[j] = v;
      if (dropout.enabled) {
        const int64_t e = r * length + j;
        dropped[e] =
            DropoutKeep(dropout.seed, e, dropout.rate) ? v * keep_scale : 0.0f;
      }
    }
  }
}

__global__ void DropoutKernel(int64_t n, AttentionDropout dropout,
                              float keep_scale, const float* probs,
                              float* dropped) {
  for (int64_t i = FirstIndex(); i < n; i += Stride()) {
    dropped[i] =
        DropoutKeep(dropout.seed, i, dropout.rate) ? probs[i] * keep_scale : 0.0f;
  }
}

__global__ void SoftmaxBackwardKernel(int64_t rows, int64_t length, float scale,
                                      AttentionDropout dropout,
                                      float keep_scale, const float* probs,
                                      float* grad) {
  const int lane = threadIdx.x % kWarp;
  const int64_t first =
      blockIdx.x * int64_t{kRowsPerBlock} + threadIdx.x / kWarp;
  const int64_t step = int64_t{gridDim.x} * kRowsPerBlock;
  for (int64_t r = first; r < rows; r += step) {
    const float* p = probs + r * length;
    float* g = grad + r * length;
    float dot = 0.0f;
    for (int64_t j = lane; j < length; j += kWarp) {
      float v = g[j];
      if (dropout.enabled) {
        v = DropoutKeep(dropout.seed, r * length + j, dropout.rate) ? v * keep_scale
                                                             : 0.0f;
        g[j] = v;  // the lane reads it back below
      }
      dot += v * p[j];
    }
    dot = WarpSum(dot);
    for (int64_t j = lane; j < length; j += kWarp) {
      g[j] = p[j] * (g[j] - dot) * scale;
    }
  }
}

// 1 / (1 - rate) on the host, as the CPU.
float KeepScale(const AttentionDropout& d) {
  return d.enabled ? 1.0f / (1.0f - d.rate) : 1.0f;
}

}  // namespace

cudaError_t AddForward(int64_t n, int k, const float* const* x, float* y,
                       cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  if (k < 1) return cudaErrorInvalidValue;
  // Inputs beyond the first kernel's are added to y by later ones, which
  // keeps the left-to-right order.
  for (int start = 0; start < k; start += kMaxAddInputs) {
    AddInputs in{};
    in.count = k - start < kMaxAddInputs ? k - start : kMaxAddInputs;
    for (int j = 0; j < in.count; ++j) in.x[j] = x[start + j];
    AddKernel<<<Blocks(n), kThreads, 0, stream>>>(n, in, start > 0, y);
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

cudaError_t LayerNormForward(int64_t rows, int64_t width, float epsilon,
                             const float* x, const float* gamma,
                             const float* beta, float* y, float* stats,
                             cudaStream_t stream) {
  if (rows <= 0 || width <= 0) return cudaSuccess;
  const int grid = static_cast<int>(rows < kMaxBlocks ? rows : kMaxBlocks);
  LayerNormForwardKernel<<<grid, NormThreads(width), 0, stream>>>(
      rows, width, epsilon, x, gamma, beta, y, stats, stats + rows);
  return cudaGetLastError();
}

int64_t LayerNormBackwardWorkspaceFloats(int64_t rows, int64_t width) {
  if (rows <= 0 || width <= 0) return 0;
  return (rows + kNormRowBlock - 1) / kNormRowBlock * 2 * width;
}

cudaError_t LayerNormBackward(int64_t rows, int64_t width, const float* x,
                              const float* gamma, const float* stats,
                              const float* dy, float* dx, float* dgamma,
                              float* dbeta, float* workspace,
                              cudaStream_t stream) {
  if (rows <= 0 || width <= 0) return cudaSuccess;
  const float* mean = stats;
  const float* rstd = stats + rows;
  // The parameter gradients first: dx may be dy (the CPU allows it).
  const int64_t blocks = (rows + kNormRowBlock - 1) / kNormRowBlock;
  LayerNormPartialKernel<<<Blocks(blocks * width), kThreads, 0, stream>>>(
      rows, width, blocks, x, mean, rstd, dy, workspace);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  LayerNormFinishKernel<<<Blocks(width), kThreads, 0, stream>>>(
      width, blocks, workspace, dgamma, dbeta);
  err = cudaGetLastError();
  if (err != cudaSuccess || dx == nullptr) return err;
  const int grid = static_cast<int>(rows < kMaxBlocks ? rows : kMaxBlocks);
  LayerNormDxKernel<<<grid, NormThreads(width), 0, stream>>>(
      rows, width, x, gamma, mean, rstd, dy, dx);
  return cudaGetLastError();
}

cudaError_t EmbeddingForward(int64_t lookups, int64_t rows, int64_t dim,
                             const float* ids, const float* table, float* y,
                             cudaStream_t stream) {
  if (lookups <= 0 || dim <= 0) return cudaSuccess;
  EmbeddingForwardKernel<<<Blocks(lookups * dim), kThreads, 0, stream>>>(
      lookups, rows, dim, ids, table, y);
  return cudaGetLastError();
}

cudaError_t EmbeddingBackwardWorkspaceBytes(int64_t lookups, int64_t rows,
                                            size_t* bytes) {
  SortLayout layout;
  const cudaError_t err = Layout(lookups, rows, &layout);
  *bytes = err == cudaSuccess ? layout.total() : 0;
  return err;
}

cudaError_t EmbeddingBackward(int64_t lookups, int64_t rows, int64_t dim,
                              const float* ids, const float* dy, float* grad,
                              void* workspace, size_t workspace_bytes,
                              cudaStream_t stream) {
  if (lookups <= 0 || dim <= 0) return cudaSuccess;
  SortLayout layout;
  cudaError_t err = Layout(lookups, rows, &layout);
  if (err != cudaSuccess) return err;
  if (workspace == nullptr || workspace_bytes < layout.total()) {
    return cudaErrorInvalidValue;
  }
  char* base = static_cast<char*>(workspace);
  uint32_t* keys_in = reinterpret_cast<uint32_t*>(base);
  uint32_t* keys_out = reinterpret_cast<uint32_t*>(base + layout.array);
  int32_t* order_in = reinterpret_cast<int32_t*>(base + 2 * layout.array);
  int32_t* order_out = reinterpret_cast<int32_t*>(base + 3 * layout.array);
  void* temp = base + 4 * layout.array;
  EmbeddingKeysKernel<<<Blocks(lookups), kThreads, 0, stream>>>(
      lookups, rows, ids, keys_in, order_in);
  err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  size_t temp_bytes = layout.temp;
  err = cub::DeviceRadixSort::SortPairs(
      temp, temp_bytes, keys_in, keys_out, order_in, order_out,
      static_cast<int>(lookups), 0, KeyBits(rows), stream);
  if (err != cudaSuccess) return err;
  EmbeddingScatterKernel<<<Blocks(lookups * dim), kThreads, 0, stream>>>(
      lookups, rows, dim, keys_out, order_out, dy, grad);
  return cudaGetLastError();
}

cudaError_t PositionEmbeddingForward(int64_t n, int64_t per_sample,
                                     const float* table, float* y,
                                     cudaStream_t stream) {
  if (n <= 0 || per_sample <= 0) return cudaSuccess;
  PositionForwardKernel<<<Blocks(n * per_sample), kThreads, 0, stream>>>(
      n, per_sample, table, y);
  return cudaGetLastError();
}

cudaError_t PositionEmbeddingBackward(int64_t n, int64_t per_sample,
                                      const float* dy, float* grad,
                                      cudaStream_t stream) {
  if (n <= 0 || per_sample <= 0) return cudaSuccess;
  PositionBackwardKernel<<<Blocks(per_sample), kThreads, 0, stream>>>(
      n, per_sample, dy, grad);
  return cudaGetLastError();
}

cudaError_t GatherPositionsForward(int64_t n, int64_t length, int64_t width,
                                   int64_t count, const float* x,
                                   const float* positions, float* y,
                                   cudaStream_t stream) {
  const int64_t total = n * count * width;
  if (total <= 0) return cudaSuccess;
  GatherForwardKernel<<<Blocks(total), kThreads, 0, stream>>>(
      n, length, width, count, x, positions, y);
  return cudaGetLastError();
}

cudaError_t GatherPositionsBackward(int64_t n, int64_t length, int64_t width,
                                    int64_t count, const float* positions,
                                    const float* dy, float* dx,
                                    cudaStream_t stream) {
  if (n <= 0 || length <= 0 || width <= 0) return cudaSuccess;
  cudaError_t err = cudaMemsetAsync(
      dx, 0, static_cast<size_t>(n * length * width) * sizeof(float), stream);
  if (err != cudaSuccess || count <= 0) return err;
  GatherBackwardKernel<<<Blocks(n * width), kThreads, 0, stream>>>(
      n, length, width, count, positions, dy, dx);
  return cudaGetLastError();
}

cudaError_t AttentionSoftmaxForward(int64_t batch, int64_t heads,
                                    int64_t length, const float* mask,
                                    const AttentionDropout& dropout,
                                    float* probs, float* dropped,
                                    cudaStream_t stream) {
  const int64_t rows = batch * heads * length;
  if (rows <= 0) return cudaSuccess;
  if (dropout.enabled && dropped == nullptr) return cudaErrorInvalidValue;
  SoftmaxForwardKernel<<<RowBlocks(rows, kRowsPerBlock), kThreads, 0, stream>>>(
      rows, heads, length, mask, dropout, KeepScale(dropout), probs, dropped);
  return cudaGetLastError();
}

cudaError_t AttentionDropoutForward(int64_t count,
                                    const AttentionDropout& dropout,
                                    const float* probs, float* dropped,
                                    cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  AttentionDropout d = dropout;
  d.enabled = true;  // the call itself asks for the mask
  DropoutKernel<<<Blocks(count), kThreads, 0, stream>>>(count, d, KeepScale(d),
                                                        probs, dropped);
  return cudaGetLastError();
}

cudaError_t AttentionSoftmaxBackward(int64_t batch, int64_t heads,
                                     int64_t length, float scale,
                                     const AttentionDropout& dropout,
                                     const float* probs, float* grad,
                                     cudaStream_t stream) {
  const int64_t rows = batch * heads * length;
  if (rows <= 0) return cudaSuccess;
  SoftmaxBackwardKernel<<<RowBlocks(rows, kRowsPerBlock), kThreads, 0,
                          stream>>>(rows, length, scale, dropout,
                                    KeepScale(dropout), probs, grad);
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace lockstep
