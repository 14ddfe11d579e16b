// ParseDeviceList over every accepted form and every rejected one.
#include "kernels/cuda/device_list.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

using ::testing::HasSubstr;

const DeviceList kCpu2 = DeviceList::Cpu(2);

DeviceList ParseOk(absl::string_view spec, int visible) {
  absl::StatusOr<DeviceList> list = ParseDeviceList(spec, visible, kCpu2);
  EXPECT_TRUE(list.ok()) << spec << ": " << list.status();
  return list.ok() ? *list : DeviceList();
}

void ExpectError(absl::string_view spec, int visible, absl::StatusCode code,
                 absl::string_view fragment) {
  absl::StatusOr<DeviceList> list = ParseDeviceList(spec, visible, kCpu2);
  ASSERT_FALSE(list.ok()) << spec << " parsed as " << list->ToString();
  EXPECT_EQ(list.status().code(), code) << list.status();
  EXPECT_THAT(std::string(list.status().message()), HasSubstr(fragment));
}

TEST(DeviceListTest, CudaEntriesInOrder) {
  EXPECT_EQ(ParseOk("cuda:0,cuda:1", 2), DeviceList::Cuda({0, 1}));
  EXPECT_EQ(ParseOk(" cuda:3 , cuda:1 ", 4), DeviceList::Cuda({3, 1}));
  EXPECT_EQ(ParseOk("cuda:7", 8).replicas(), 1);
  EXPECT_EQ(ParseOk("cuda:0,cuda:2", 3).ToString(), "cuda:0,cuda:2");
}

TEST(DeviceListTest, BareCudaIsEveryVisibleGpu) {
  EXPECT_EQ(ParseOk("cuda", 3), DeviceList::Cuda({0, 1, 2}));
  ExpectError("cuda", 0, absl::StatusCode::kFailedPrecondition,
              "none is visible");
  ExpectError("cuda,cuda:1", 2, absl::StatusCode::kInvalidArgument,
              "'cuda:1' is listed twice");
}

TEST(DeviceListTest, CpuReplicas) {
  const DeviceList list = ParseOk("cpu:3", 2);
  EXPECT_EQ(list.kind, DeviceKind::kCpu);
  EXPECT_EQ(list.replicas(), 3);
  EXPECT_EQ(list.ToString(), "cpu:3");
  EXPECT_EQ(ParseOk("cpu:1", 0), DeviceList::Cpu(1));
}

TEST(DeviceListTest, EmptyMeansEveryGpuElseFallback) {
  EXPECT_EQ(ParseOk("", 2), DeviceList::Cuda({0, 1}));
  EXPECT_EQ(ParseOk("  ", 1), DeviceList::Cuda({0}));
  EXPECT_EQ(ParseOk("", 0), kCpu2);
}

TEST(DeviceListTest, RejectsDuplicates) {
  ExpectError("cuda:0,cuda:1,cuda:0", 2, absl::StatusCode::kInvalidArgument,
              "device entry 'cuda:0' is listed twice");
}

TEST(DeviceListTest, RejectsBadNumbers) {
  ExpectError("cuda:-1", 2, absl::StatusCode::kInvalidArgument,
              "'cuda:-1' has a negative number -1");
  ExpectError("cuda:x", 2, absl::StatusCode::kInvalidArgument,
              "'cuda:x': 'x' is not a non-negative integer");
  ExpectError("cuda:1.5", 2, absl::StatusCode::kInvalidArgument,
              "'1.5' is not a non-negative integer");
  ExpectError("cuda:", 2, absl::StatusCode::kInvalidArgument,
              "'cuda:' has no number");
  ExpectError("cuda:99999999999", 2, absl::StatusCode::kInvalidArgument,
              "not a non-negative integer");
  ExpectError("cpu:0", 0, absl::StatusCode::kInvalidArgument,
              "at least 1 replica");
  ExpectError("cpu", 0, absl::StatusCode::kInvalidArgument,
              "needs a replica count");
  ExpectError("cpu:-2", 0, absl::StatusCode::kInvalidArgument, "negative");
}

TEST(DeviceListTest, RejectsMixingCpuAndCuda) {
  ExpectError("cuda:0,cpu:2", 2, absl::StatusCode::kInvalidArgument,
              "device entry 'cpu:2': cpu:N stands alone (it cannot be mixed "
              "with cuda)");
  ExpectError("cpu:2,cuda:0", 2, absl::StatusCode::kInvalidArgument,
              "device entry 'cuda:0': cuda cannot be mixed with cpu");
  ExpectError("cpu:2,cpu:3", 2, absl::StatusCode::kInvalidArgument,
              "a second cpu entry");
}

TEST(DeviceListTest, RejectsIndexBeyondVisible) {
  ExpectError("cuda:0,cuda:2", 2, absl::StatusCode::kFailedPrecondition,
              "device entry 'cuda:2': only 2 CUDA device(s) are visible "
              "(cuda:0..cuda:1)");
  ExpectError("cuda:0", 0, absl::StatusCode::kFailedPrecondition,
              "device entry 'cuda:0': no CUDA device is visible");
}

TEST(DeviceListTest, RejectsUnknownKindsAndEmptyEntries) {
  ExpectError("gpu:0", 1, absl::StatusCode::kInvalidArgument,
              "device entry 'gpu:0': unknown device kind");
  ExpectError("cuda:0,,cuda:1", 2, absl::StatusCode::kInvalidArgument,
              "has an empty entry");
  ExpectError("cuda:0,", 2, absl::StatusCode::kInvalidArgument,
              "has an empty entry");
}

}  // namespace
}  // namespace lockstep
