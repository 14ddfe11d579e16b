// Tensor shape arithmetic and buffer reuse.
#include "core/tensor.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace lockstep {
namespace {

TEST(TensorTest, ShapesAndElements) {
  EXPECT_EQ(NumElements({}), 1);
  EXPECT_EQ(NumElements({28, 28, 1}), 784);
  EXPECT_EQ(NumElements({3, 0, 2}), 0);
  EXPECT_EQ(ShapeToString({28, 28, 1}), "[28, 28, 1]");
}

TEST(TensorTest, ResizeReusesBufferOnlyForSameShape) {
  Tensor t({2, 3});
  t.data()[4] = 5.0f;
  t.Resize({2, 3});
  EXPECT_EQ(t.data()[4], 5.0f);  // same shape: kept
  t.Resize({3, 3});
  EXPECT_EQ(t.size(), 9);
  EXPECT_EQ(t.data()[4], 0.0f);  // new shape: zeroed
  t.Reshape({9});
  EXPECT_EQ(t.rank(), 1);
}

// Resident pages of [begin, begin + count) (mincore).
int64_t ResidentPages(const float* begin, int64_t count) {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t from = reinterpret_cast<uintptr_t>(begin) / page * page;
  const uintptr_t to = reinterpret_cast<uintptr_t>(begin + count);
  std::vector<unsigned char> in((to - from + page - 1) / page);
  EXPECT_EQ(mincore(reinterpret_cast<void*>(from), to - from, in.data()), 0);
  int64_t n = 0;
  for (unsigned char c : in) n += c & 1;
  return n;
}

TEST(TensorTest, ReleasePagesHandsBackOnlyWholePagesInsideTheRange) {
  const int64_t page_floats = sysconf(_SC_PAGESIZE) / sizeof(float);
  Tensor t({1 << 20});  // 4 MiB
  for (int64_t i = 0; i < t.size(); ++i) t.data()[i] = 1.0f;
  const int64_t resident = ResidentPages(t.data(), t.size());
  EXPECT_GE(resident, t.size() / page_floats);

  const int64_t begin = 1000, end = 900000;
  const int64_t bytes = ReleasePages(t.data() + begin, end - begin);
  // The whole pages between the first page boundary at or after `begin`
  // and the last at or before `end`.
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t from = reinterpret_cast<uintptr_t>(t.data() + begin);
  const uintptr_t to = reinterpret_cast<uintptr_t>(t.data() + end);
  const int64_t want =
      static_cast<int64_t>(to / page * page - (from + page - 1) / page * page);
  EXPECT_EQ(bytes, want);
  EXPECT_GT(bytes, 3 << 20);
  EXPECT_EQ(ResidentPages(t.data(), t.size()),
            resident - bytes / static_cast<int64_t>(page));

  // Released elements read as zeros; the partial pages and everything
  // outside the range keep their values.
  const int64_t first =
      static_cast<int64_t>(((from + page - 1) / page * page -
                            reinterpret_cast<uintptr_t>(t.data())) /
                           sizeof(float));
  const int64_t last = first + bytes / static_cast<int64_t>(sizeof(float));
  for (int64_t i = 0; i < t.size(); ++i) {
    ASSERT_EQ(t.data()[i], i >= first && i < last ? 0.0f : 1.0f) << i;
  }
  EXPECT_LE(first - begin, page_floats);
  EXPECT_LE(end - last, page_floats);

  // Written again, the pages come back.
  for (int64_t i = first; i < last; ++i) t.data()[i] = 2.0f;
  EXPECT_EQ(ResidentPages(t.data(), t.size()), resident);
  // Less than a page: nothing.
  EXPECT_EQ(ReleasePages(t.data() + 10, page_floats / 2), 0);
  EXPECT_EQ(ReleasePages(t.data(), 0), 0);
}

}  // namespace
}  // namespace lockstep
