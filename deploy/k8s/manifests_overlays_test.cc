// The rendered objects of each overlay (cpu, gpu, ha) pass every deployment
// check of manifests_deployment_check.cc.
#include <string>

#include "deploy/k8s/manifests_test_util.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace testing {
namespace k8s {

namespace {

TEST_F(ManifestsTest, CpuOverlay) {
  if (NoKubectl()) GTEST_SKIP() << NoKubectlMessage();
  std::string error;
  Problems p = RenderAndCheck(*prepared_, Flavor::kCpu, &error);
  ASSERT_TRUE(error.empty()) << error;
  EXPECT_TRUE(p.list().empty()) << "overlays/cpu:\n" << p.Joined();
}

TEST_F(ManifestsTest, GpuOverlay) {
  if (NoKubectl()) GTEST_SKIP() << NoKubectlMessage();
  std::string error;
  Problems p = RenderAndCheck(*prepared_, Flavor::kGpu, &error);
  ASSERT_TRUE(error.empty()) << error;
  EXPECT_TRUE(p.list().empty()) << "overlays/gpu:\n" << p.Joined();
}

TEST_F(ManifestsTest, HaOverlay) {
  if (NoKubectl()) GTEST_SKIP() << NoKubectlMessage();
  std::string error;
  Problems p = RenderAndCheck(*prepared_, Flavor::kHa, &error);
  ASSERT_TRUE(error.empty()) << error;
  EXPECT_TRUE(p.list().empty()) << "overlays/ha:\n" << p.Joined();
}

}  // namespace
}  // namespace k8s
}  // namespace testing
}  // namespace lockstep
