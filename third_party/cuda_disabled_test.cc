// Stands in for every CUDA test target built without --config=cuda
// (third_party/cuda.bzl): one test that skips, saying why, so the test report
// counts the target as skipped rather than missing.
#include "gtest/gtest.h"

TEST(CudaDisabled, Skipped) {
  GTEST_SKIP() << "built without --config=cuda (.bazelrc): this target's CUDA "
                  "tests were not compiled; build with --config=cuda where "
                  "/usr/local/cuda is installed";
}
