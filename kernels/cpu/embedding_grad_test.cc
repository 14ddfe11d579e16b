// EmbeddingGradAdd's order of additions (embedding_grad.h), bit for bit
// against a reference written from that description.
#include "kernels/cpu/embedding_grad.h"

#include <cstdint>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/test_util.h"

namespace lockstep {
namespace {

constexpr int64_t kK = kEmbeddingGradChunk;

void ExpectSameBits(const std::vector<float>& want,
                    const std::vector<float>& got, const char* what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    uint32_t a, b;
    std::memcpy(&a, &want[i], 4);
    std::memcpy(&b, &got[i], 4);
    ASSERT_EQ(a, b) << what << "[" << i << "]: want " << want[i] << ", got "
                    << got[i];
  }
}

// Row by row: the first kK lookups onto the row, then each later chunk
// summed from zero and added.
std::vector<float> Reference(const std::vector<float>& ids, int64_t rows,
                             int64_t dim, const std::vector<float>& dy,
                             std::vector<float> grad) {
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<int64_t> mine;
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] == static_cast<float>(r)) mine.push_back(i);
    }
    for (int64_t c = 0; c < dim; ++c) {
      float acc = grad[r * dim + c];
      for (size_t j = 0; j < mine.size(); j += kK) {
        float part = 0;
        for (size_t q = j; q < std::min(mine.size(), j + kK); ++q) {
          const float v = dy[mine[q] * dim + c];
          if (j == 0) {
            acc += v;
          } else {
            part += v;
          }
        }
        if (j > 0) acc += part;
      }
      grad[r * dim + c] = acc;
    }
  }
  return grad;
}

TEST(EmbeddingGradTest, FewLookupsAreThePlainSerialSum) {
  const int64_t rows = 50, dim = 7, lookups = 400;
  std::vector<float> ids(lookups);
  for (int64_t i = 0; i < lookups; ++i) ids[i] = static_cast<float>(i % rows);
  ids[5] = -1.0f;   // no id: nothing added
  ids[9] = 2.5f;    // not an integer
  ids[11] = 50.0f;  // out of the table
  const std::vector<float> dy = RandomVector(lookups * dim, 3);
  const std::vector<float> g0 = RandomVector(rows * dim, 4);
  std::vector<float> serial = g0;
  for (int64_t i = 0; i < lookups; ++i) {
    const int64_t id = static_cast<int64_t>(ids[i]);
    if (ids[i] != static_cast<float>(id) || id < 0 || id >= rows) continue;
    for (int64_t c = 0; c < dim; ++c) serial[id * dim + c] += dy[i * dim + c];
  }
  std::vector<float> got = g0;
  EmbeddingGradAdd(lookups, rows, dim, ids.data(), dy.data(), got.data());
  ExpectSameBits(serial, got, "grad");
}

TEST(EmbeddingGradTest, LongRunsAreSummedChunkByChunk) {
  // Row 0 looked up 3 kK + 17 times among others (a padding id), row 1
  // exactly kK + 1 times: the reference's bits.
  const int64_t rows = 5, dim = 9;
  std::vector<float> ids;
  for (int64_t i = 0; i < 3 * kK + 17; ++i) {
    ids.push_back(0.0f);
    if (i % 3 == 0) ids.push_back(static_cast<float>(2 + i % 3));
    if (i <= kK) ids.push_back(1.0f);
    if (i % 50 == 0) ids.push_back(-3.0f);
  }
  const int64_t lookups = static_cast<int64_t>(ids.size());
  const std::vector<float> dy = RandomVector(lookups * dim, 5);
  const std::vector<float> g0 = RandomVector(rows * dim, 6);
  std::vector<float> got = g0;
  EmbeddingGradAdd(lookups, rows, dim, ids.data(), dy.data(), got.data());
  ExpectSameBits(Reference(ids, rows, dim, dy, g0), got, "grad");
}

TEST(EmbeddingGradTest, ALaterChunkIsAddedAsItsSum) {
  // 1e8 + 1 rounds back to 1e8 (floats are 8 apart there): the serial sum
  // of 3 kK ones onto 1e8 stays 1e8, while the two later chunks add 256
  // each.
  const int64_t lookups = 3 * kK;
  const std::vector<float> ids(lookups, 0.0f), dy(lookups, 1.0f);
  float grad = 1e8f;
  EmbeddingGradAdd(lookups, 1, 1, ids.data(), dy.data(), &grad);
  EXPECT_EQ(grad, 100000512.0f);
}

}  // namespace
}  // namespace lockstep
