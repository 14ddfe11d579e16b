// Tensor shape arithmetic and buffer reuse.
#include "core/tensor.h"

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

}  // namespace
}  // namespace lockstep
