// NcclCommunicator: argument checks and the no-GPU errors everywhere; with a
// GPU, a 1-rank all-reduce leaves every buffer size unchanged, Abort and
// deadlines end waits with their codes, and two ranks (two GPUs, or one GPU
// when NCCL allows it) sum and then survive a peer that stops calling.
#include "kernels/cuda/nccl_communicator.h"

#include <cuda_runtime_api.h>

#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cuda/cuda_test_util.h"

namespace lockstep {
namespace cuda {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(NcclCommunicatorTest, RefusesBadIdsAndRanksBeforeTouchingTheGpu) {
  absl::StatusOr<std::unique_ptr<NcclCommunicator>> c =
      NcclCommunicator::Create("short", 1, 0, 0, absl::Seconds(1));
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(c.status().message(), "an NCCL unique id is 128 bytes, got 5");
  c = NcclCommunicator::Create(std::string(128, '\0'), 2, 2, 0,
                               absl::Seconds(1));
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(c.status().message(),
            "no NCCL communicator has rank 2 of world 2 on cuda:0");
}

// ncclGetUniqueId only opens the bootstrap root's socket: no GPU needed.
TEST(NcclCommunicatorTest, UniqueIdNeedsNoGpu) {
  absl::StatusOr<std::string> id = NewNcclUniqueId();
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(id->size(), kNcclUniqueIdBytes);
  absl::StatusOr<std::string> other = NewNcclUniqueId();
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_NE(*id, *other);  // each names its own listening socket
}

TEST(NcclCommunicatorTest, WithoutGpuCreateSaysWhy) {
  if (WhyNoDevice().empty()) GTEST_SKIP() << "a CUDA device is present";
  absl::StatusOr<std::unique_ptr<NcclCommunicator>> c =
      NcclCommunicator::Create(std::string(128, '\0'), 1, 0, 0,
                               absl::Seconds(1));
  ASSERT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition)
      << c.status();
  EXPECT_THAT(std::string(c.status().message()),
              StartsWith("while joining the NCCL communicator as rank 0 of "
                         "world 1 on cuda:0: cudaSetDevice(device) at "
                         "kernels/cuda/nccl_communicator.cc:"));
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("(cudaError"));
}

std::unique_ptr<NcclCommunicator> OneRank() {
  absl::StatusOr<std::string> id = NewNcclUniqueId();
  EXPECT_TRUE(id.ok()) << id.status();
  if (!id.ok()) return nullptr;
  absl::StatusOr<std::unique_ptr<NcclCommunicator>> c =
      NcclCommunicator::Create(*id, 1, 0, 0, absl::Seconds(60));
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? std::move(*c) : nullptr;
}

class OneRankTest : public ::testing::TestWithParam<size_t> {};

TEST_P(OneRankTest, AllReduceLeavesTheBufferUnchanged) {
  SKIP_WITHOUT_CUDA_DEVICE();
  std::unique_ptr<NcclCommunicator> comm = OneRank();
  ASSERT_NE(comm, nullptr);
  std::vector<float> host(GetParam());
  for (size_t i = 0; i < host.size(); ++i) host[i] = 0.25f * i - 3.0f;
  DeviceArray<float> buf(host);
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  for (int round = 0; round < 2; ++round) {
    const absl::Status s =
        comm->AllReduceSum(buf.get(), host.size(), stream, absl::Seconds(60));
    ASSERT_TRUE(s.ok()) << s;
  }
  EXPECT_EQ(buf.ToHost(), host);
  cudaStreamDestroy(stream);
}

INSTANTIATE_TEST_SUITE_P(Counts, OneRankTest,
                         ::testing::Values(0, 1, 1000, 4099, (1 << 20) + 3));

TEST(NcclCommunicatorTest, AbortCancelsEveryLaterCall) {
  SKIP_WITHOUT_CUDA_DEVICE();
  std::unique_ptr<NcclCommunicator> comm = OneRank();
  ASSERT_NE(comm, nullptr);
  DeviceArray<float> buf(std::vector<float>(16, 1.0f));
  comm->Abort();
  for (int i = 0; i < 2; ++i) {
    const absl::Status s = comm->AllReduceSum(buf.get(), 16, nullptr);
    EXPECT_EQ(s.code(), absl::StatusCode::kCancelled) << s;
    EXPECT_THAT(std::string(s.message()),
                HasSubstr("as rank 0 of world 1 on cuda:0: the communicator "
                          "was aborted"));
  }
}

TEST(NcclCommunicatorTest, CreateTimesOutNamingTheRankWhenAPeerNeverJoins) {
  SKIP_WITHOUT_CUDA_DEVICE();
  absl::StatusOr<std::string> id = NewNcclUniqueId();
  ASSERT_TRUE(id.ok()) << id.status();
  const absl::Time start = absl::Now();
  absl::StatusOr<std::unique_ptr<NcclCommunicator>> c =
      NcclCommunicator::Create(*id, 2, 0, 0, absl::Seconds(2));
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
  ASSERT_EQ(c.status().code(), absl::StatusCode::kDeadlineExceeded)
      << c.status();
  EXPECT_THAT(std::string(c.status().message()),
              HasSubstr("as rank 0 of world 2 on cuda:0: not all 2 ranks "
                        "joined within 2s"));
}

// Two ranks as threads: on cuda:0 and cuda:1 when there are two GPUs, else
// both on cuda:0, which NCCL refuses by default ("Duplicate GPU detected";
// its guide: the same device as two ranks "is not supported and may lead to
// hangs"), so that case skips with NCCL's words.
TEST(NcclCommunicatorTest, TwoRanksSumThenSurviveALostPeer) {
  SKIP_WITHOUT_CUDA_DEVICE();
  int devices = 0;
  ASSERT_EQ(cudaGetDeviceCount(&devices), cudaSuccess);
  const int device1 = devices >= 2 ? 1 : 0;
  absl::StatusOr<std::string> id = NewNcclUniqueId();
  ASSERT_TRUE(id.ok()) << id.status();
  absl::StatusOr<std::unique_ptr<NcclCommunicator>> comms[2];
  {
    std::thread other([&] {
      comms[1] =
          NcclCommunicator::Create(*id, 2, 1, device1, absl::Seconds(60));
    });
    comms[0] = NcclCommunicator::Create(*id, 2, 0, 0, absl::Seconds(60));
    other.join();
  }
  if (device1 == 0 && (!comms[0].ok() || !comms[1].ok())) {
    GTEST_SKIP() << "one GPU: NCCL refuses two ranks on one device: "
                 << (comms[0].ok() ? comms[1] : comms[0]).status();
  }
  ASSERT_TRUE(comms[0].ok()) << comms[0].status();
  ASSERT_TRUE(comms[1].ok()) << comms[1].status();

  constexpr size_t kCount = 1001;
  std::vector<float> expected(kCount);
  std::vector<std::unique_ptr<DeviceArray<float>>> bufs(2);
  for (int r = 0; r < 2; ++r) {
    std::vector<float> host(kCount);
    for (size_t i = 0; i < kCount; ++i) {
      host[i] = (r + 1) * static_cast<float>(i);
      expected[i] += host[i];
    }
    ASSERT_EQ(cudaSetDevice(r == 0 ? 0 : device1), cudaSuccess);
    bufs[r] = std::make_unique<DeviceArray<float>>(host);
  }
  absl::Status results[2];
  {
    std::thread other([&] {
      results[1] = (*comms[1])->AllReduceSum(bufs[1]->get(), kCount, nullptr,
                                             absl::Seconds(60));
    });
    results[0] = (*comms[0])->AllReduceSum(bufs[0]->get(), kCount, nullptr,
                                           absl::Seconds(60));
    other.join();
  }
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(results[r].ok()) << results[r];
    ASSERT_EQ(cudaSetDevice(r == 0 ? 0 : device1), cudaSuccess);
    EXPECT_EQ(bufs[r]->ToHost(), expected) << "rank " << r;
  }

  // Rank 1 stops calling: rank 0's wait ends by Abort from another thread
  // (Cancelled), and rank 1's lone call ends by its deadline or NCCL's
  // report of the aborted peer, never by hanging.
  std::thread aborter([&] {
    absl::SleepFor(absl::Milliseconds(200));
    (*comms[0])->Abort();
  });
  const absl::Status waited =
      (*comms[0])->AllReduceSum(bufs[0]->get(), kCount, nullptr);
  aborter.join();
  EXPECT_EQ(waited.code(), absl::StatusCode::kCancelled) << waited;
  const absl::Status alone = (*comms[1])->AllReduceSum(
      bufs[1]->get(), kCount, nullptr, absl::Seconds(2));
  EXPECT_THAT(alone.code(),
              AnyOf(absl::StatusCode::kDeadlineExceeded,
                    absl::StatusCode::kAborted, absl::StatusCode::kUnavailable))
      << alone;
  EXPECT_THAT(std::string(alone.message()), HasSubstr("rank 1 of world 2"));
}

}  // namespace
}  // namespace cuda
}  // namespace lockstep
