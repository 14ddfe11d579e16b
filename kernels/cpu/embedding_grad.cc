// EmbeddingGradAdd (see embedding_grad.h).
#include "kernels/cpu/embedding_grad.h"

#include <algorithm>
#include <vector>

namespace lockstep {

namespace {
// The row of a float id, or -1 when it is not an integer in [0, rows).
int64_t RowOf(float f, int64_t rows) {
  const int64_t id = static_cast<int64_t>(f);
  return id >= 0 && id < rows && f == static_cast<float>(id) ? id : -1;
}
}  // namespace

void EmbeddingGradAdd(int64_t lookups, int64_t rows, int64_t dim,
                      const float* ids, const float* dy, float* grad) {
  constexpr int64_t kChunk = kEmbeddingGradChunk;
  // How often each row is looked up, and whether any past the first chunk.
  std::vector<int64_t> total(rows, 0);
  bool chunked = false;
  for (int64_t i = 0; i < lookups; ++i) {
    const int64_t id = RowOf(ids[i], rows);
    if (id >= 0) chunked = ++total[id] > kChunk || chunked;
  }
  std::vector<int64_t> seen;
  std::vector<int64_t> slot;  // a row's partial sum in `partials`; -1 none
  std::vector<float> partials;
  if (chunked) {
    seen.assign(rows, 0);
    slot.assign(rows, -1);
    int64_t slots = 0;
    for (int64_t r = 0; r < rows; ++r) {
      if (total[r] > kChunk) slot[r] = slots++;
    }
    partials.assign(slots * dim, 0.0f);
  }
  for (int64_t i = 0; i < lookups; ++i) {
    const int64_t id = RowOf(ids[i], rows);
    if (id < 0) continue;
    float* __restrict row = grad + id * dim;
    const float* __restrict d = dy + i * dim;
    const int64_t k = chunked ? seen[id]++ : 0;
    if (k < kChunk) {
      for (int64_t c = 0; c < dim; ++c) row[c] += d[c];
      continue;
    }
    // A later chunk: summed from zero, added onto the row at its end.
    float* __restrict part = partials.data() + slot[id] * dim;
    if (k % kChunk == 0) std::fill(part, part + dim, 0.0f);
    for (int64_t c = 0; c < dim; ++c) part[c] += d[c];
    if (k % kChunk == kChunk - 1 || k == total[id] - 1) {
      for (int64_t c = 0; c < dim; ++c) row[c] += part[c];
    }
  }
}

}  // namespace lockstep
