// The embedding kernels (see transformer.h): lookups, and the backward's
// scatter-add in kernels/cpu/embedding_grad.h's order: a sort of the ids
// (cub); one thread per later chunk of a run and column summing it; one
// thread per output row and column walking its first chunk in the CPU's
// order, a tile of loads at a time, then adding the later chunks' sums;
// position embeddings. Built with --fmad=false, as transformer.cu.
#include <cub/device/device_radix_sort.cuh>

#include "kernels/cpu/embedding_grad.h"
#include "kernels/cuda/float_index.cuh"
#include "kernels/cuda/grid_stride.cuh"
#include "kernels/cuda/transformer.h"

namespace lockstep {
namespace cuda {
namespace {

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

// The end of the run of `key` that starts at sorted position p: the first
// position after p whose key is larger (keys are sorted; binary search, so
// finding it costs log2(lookups) loads, not one per lookup of the run).
__device__ int64_t RunEnd(const uint32_t* keys, int64_t p, int64_t lookups,
                          uint32_t key) {
  int64_t lo = p + 1, hi = lookups;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (keys[mid] <= key) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

// The start of the run of `key` that holds sorted position p: the first
// position whose key is `key` (binary search).
__device__ int64_t RunStart(const uint32_t* keys, int64_t p, uint32_t key) {
  int64_t lo = 0, hi = p;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (keys[mid] < key) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

// Lookups summed per tile: the tile's loads are issued together, then
// added in order, so a run waits for memory once per tile instead of once
// per lookup.
constexpr int kScatterTile = 32;
constexpr int64_t kChunk = kEmbeddingGradChunk;

// acc + column c of the lookups at sorted positions [q, end), in order.
__device__ float AddLookups(float acc, const int32_t* order, const float* dy,
                            int64_t dim, int64_t c, int64_t q, int64_t end) {
  for (; q + kScatterTile <= end; q += kScatterTile) {
    float v[kScatterTile];
#pragma unroll
    for (int j = 0; j < kScatterTile; ++j) {
      v[j] = dy[static_cast<int64_t>(order[q + j]) * dim + c];
    }
#pragma unroll
    for (int j = 0; j < kScatterTile; ++j) acc += v[j];
  }
  for (; q < end; ++q) acc += dy[static_cast<int64_t>(order[q]) * dim + c];
  return acc;
}

// Thread (t, c): the later chunk (not a run's first) that starts at a
// sorted position in [t kChunk, t kChunk + kChunk), if any (at most one
// does), summed from zero into partials[t, c]. Chunks start kChunk apart
// from their run's start.
__global__ void EmbeddingChunkKernel(int64_t lookups, int64_t rows, int64_t dim,
                                     int64_t slots, const uint32_t* keys,
                                     const int32_t* order, const float* dy,
                                     float* partials) {
  for (int64_t i = FirstIndex(); i < slots * dim; i += Stride()) {
    const int64_t t = i / dim, c = i % dim;
    const int64_t at = t * kChunk;
    const uint32_t key = keys[at];
    if (key >= rows) continue;
    const int64_t start = RunStart(keys, at, key);
    const int64_t q = start + (at - start + kChunk - 1) / kChunk * kChunk;
    if (q == start) continue;  // the run's first chunk: the scatter's
    const int64_t end = RunEnd(keys, at, lookups, key);
    if (q >= end) continue;
    partials[t * dim + c] = AddLookups(0.0f, order, dy, dim, c, q,
                                       end < q + kChunk ? end : q + kChunk);
  }
}

// Thread (p, c): when sorted position p starts a run of one id, that row's
// column c gets the run's gradients (the sort is stable, so in lookup
// order): grad + dy[first] + dy[second] + ... over the first chunk, then
// each later chunk's sum from EmbeddingChunkKernel, in order.
__global__ void EmbeddingScatterKernel(int64_t lookups, int64_t rows,
                                       int64_t dim, const uint32_t* keys,
                                       const int32_t* order, const float* dy,
                                       const float* partials, float* grad) {
  for (int64_t i = FirstIndex(); i < lookups * dim; i += Stride()) {
    const int64_t p = i / dim, c = i % dim;
    const uint32_t key = keys[p];
    if (key >= rows || (p > 0 && keys[p - 1] == key)) continue;
    const int64_t end = RunEnd(keys, p, lookups, key);
    float acc = AddLookups(grad[key * dim + c], order, dy, dim, c, p,
                           end < p + kChunk ? end : p + kChunk);
    for (int64_t q = p + kChunk; q < end; q += kChunk) {
      acc += partials[q / kChunk * dim + c];
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

// EmbeddingBackward's workspace: keys and order in, keys and order out, the
// later chunks' sums (a slot of `dim` floats per kChunk sorted positions),
// then cub's temporary storage.
struct SortLayout {
  size_t array = 0;     // bytes of one int32 array, aligned
  int64_t slots = 0;    // chunk slots
  size_t partials = 0;  // their bytes, aligned
  size_t temp = 0;      // cub's bytes
  size_t total() const { return 4 * array + partials + temp; }
};

cudaError_t Layout(int64_t lookups, int64_t rows, int64_t dim,
                   SortLayout* out) {
  if (lookups < 0 || lookups > INT32_MAX || rows < 0 || rows >= INT32_MAX ||
      dim < 0 || dim > INT32_MAX) {
    return cudaErrorInvalidValue;
  }
  out->array = AlignUp(static_cast<size_t>(lookups) * sizeof(int32_t));
  out->slots = (lookups + kChunk - 1) / kChunk;
  out->partials =
      AlignUp(static_cast<size_t>(out->slots * dim) * sizeof(float));
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

}  // namespace

cudaError_t EmbeddingForward(int64_t lookups, int64_t rows, int64_t dim,
                             const float* ids, const float* table, float* y,
                             cudaStream_t stream) {
  if (lookups <= 0 || dim <= 0) return cudaSuccess;
  EmbeddingForwardKernel<<<Blocks(lookups * dim), kThreads, 0, stream>>>(
      lookups, rows, dim, ids, table, y);
  return cudaGetLastError();
}

cudaError_t EmbeddingBackwardWorkspaceBytes(int64_t lookups, int64_t rows,
                                            int64_t dim, size_t* bytes) {
  SortLayout layout;
  const cudaError_t err = Layout(lookups, rows, dim, &layout);
  *bytes = err == cudaSuccess ? layout.total() : 0;
  return err;
}

cudaError_t EmbeddingBackward(int64_t lookups, int64_t rows, int64_t dim,
                              const float* ids, const float* dy, float* grad,
                              void* workspace, size_t workspace_bytes,
                              cudaStream_t stream) {
  if (lookups <= 0 || dim <= 0) return cudaSuccess;
  SortLayout layout;
  cudaError_t err = Layout(lookups, rows, dim, &layout);
  if (err != cudaSuccess) return err;
  if (workspace == nullptr || workspace_bytes < layout.total()) {
    return cudaErrorInvalidValue;
  }
  char* base = static_cast<char*>(workspace);
  uint32_t* keys_in = reinterpret_cast<uint32_t*>(base);
  uint32_t* keys_out = reinterpret_cast<uint32_t*>(base + layout.array);
  int32_t* order_in = reinterpret_cast<int32_t*>(base + 2 * layout.array);
  int32_t* order_out = reinterpret_cast<int32_t*>(base + 3 * layout.array);
  float* partials = reinterpret_cast<float*>(base + 4 * layout.array);
  void* temp = base + 4 * layout.array + layout.partials;
  EmbeddingKeysKernel<<<Blocks(lookups), kThreads, 0, stream>>>(
      lookups, rows, ids, keys_in, order_in);
  err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  size_t temp_bytes = layout.temp;
  err = cub::DeviceRadixSort::SortPairs(
      temp, temp_bytes, keys_in, keys_out, order_in, order_out,
      static_cast<int>(lookups), 0, KeyBits(rows), stream);
  if (err != cudaSuccess) return err;
  EmbeddingChunkKernel<<<Blocks(layout.slots * dim), kThreads, 0, stream>>>(
      lookups, rows, dim, layout.slots, keys_out, order_out, dy, partials);
  err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  EmbeddingScatterKernel<<<Blocks(lookups * dim), kThreads, 0, stream>>>(
      lookups, rows, dim, keys_out, order_out, dy, partials, grad);
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

}  // namespace cuda
}  // namespace lockstep
