// The allocator's policy over a fake backend: no GPU needed.
#include "kernels/cuda/caching_allocator.h"

#include <cstdlib>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace cuda {
namespace {

using ::testing::HasSubstr;

// Host memory standing in for a device of `capacity` bytes.
class FakeBackend : public MemoryBackend {
 public:
  struct Counters {
    absl::Mutex mu;
    int64_t allocated = 0;  // bytes held now
    int allocations = 0;
    int frees = 0;
  };

  FakeBackend(int64_t capacity, Counters* counters)
      : capacity_(capacity), c_(counters) {}

  absl::StatusOr<void*> Allocate(size_t bytes) override {
    absl::MutexLock lock(&c_->mu);
    if (c_->allocated + static_cast<int64_t>(bytes) > capacity_) {
      return absl::ResourceExhaustedError("fake device out of memory");
    }
    c_->allocated += bytes;
    ++c_->allocations;
    void* p = std::malloc(bytes);
    sizes_[p] = bytes;
    return p;
  }

  absl::Status Free(void* ptr) override {
    absl::MutexLock lock(&c_->mu);
    auto it = sizes_.find(ptr);
    if (it == sizes_.end()) return absl::InternalError("fake: bad free");
    c_->allocated -= it->second;
    ++c_->frees;
    sizes_.erase(it);
    std::free(ptr);
    return absl::OkStatus();
  }

 private:
  const int64_t capacity_;
  Counters* c_;
  std::map<void*, size_t> sizes_;  // guarded by c_->mu
};

class CachingAllocatorTest : public ::testing::Test {
 protected:
  void Make(int64_t capacity) {
    alloc_ = std::make_unique<CachingAllocator>(
        std::make_unique<FakeBackend>(capacity, &counters_));
  }
  void* Alloc(size_t bytes, StreamKey stream = nullptr) {
    absl::StatusOr<void*> p = alloc_->Allocate(bytes, stream);
    EXPECT_TRUE(p.ok()) << p.status();
    return p.ok() ? *p : nullptr;
  }

  FakeBackend::Counters counters_;
  std::unique_ptr<CachingAllocator> alloc_;
  const StreamKey kStreamA = reinterpret_cast<StreamKey>(0x10);
  const StreamKey kStreamB = reinterpret_cast<StreamKey>(0x20);
};

TEST_F(CachingAllocatorTest, RoundSizeClasses) {
  EXPECT_EQ(CachingAllocator::RoundSize(1), 512u);
  EXPECT_EQ(CachingAllocator::RoundSize(512), 512u);
  EXPECT_EQ(CachingAllocator::RoundSize(513), 640u);
  EXPECT_EQ(CachingAllocator::RoundSize(1024), 1024u);
  EXPECT_EQ(CachingAllocator::RoundSize(1025), 1280u);
  EXPECT_EQ(CachingAllocator::RoundSize(2047), 2048u);
  EXPECT_EQ(CachingAllocator::RoundSize(3 << 20), 3u << 20);
  EXPECT_EQ(CachingAllocator::RoundSize((3 << 20) + 1), 7u << 19);
  for (size_t b = 1; b < (1 << 22); b = b * 3 / 2 + 1) {
    const size_t r = CachingAllocator::RoundSize(b);
    EXPECT_GE(r, b);
    EXPECT_EQ(r % 128, 0u) << b;
    if (b > 512) EXPECT_LT(r, b + b / 4 + 1) << b;      // at most 25% waste
    EXPECT_EQ(CachingAllocator::RoundSize(r), r) << b;  // classes are fixed
  }
}

TEST_F(CachingAllocatorTest, ZeroBytesIsNull) {
  Make(1 << 20);
  EXPECT_EQ(Alloc(0), nullptr);
  EXPECT_TRUE(alloc_->Free(nullptr).ok());
  EXPECT_EQ(counters_.allocations, 0);
}

TEST_F(CachingAllocatorTest, FreedBlockIsReusedOnItsStreamAndClass) {
  Make(1 << 20);
  void* p = Alloc(1000, kStreamA);
  ASSERT_TRUE(alloc_->Free(p).ok());
  EXPECT_EQ(Alloc(900, kStreamA), p);  // same class (1024)
  EXPECT_EQ(counters_.allocations, 1);
  const AllocatorStats s = alloc_->stats();
  EXPECT_EQ(s.allocations, 2);
  EXPECT_EQ(s.cache_hits, 1);
  EXPECT_EQ(s.backend_allocations, 1);
}

TEST_F(CachingAllocatorTest, NoReuseAcrossStreamsOrClasses) {
  Make(1 << 20);
  void* p = Alloc(1000, kStreamA);
  ASSERT_TRUE(alloc_->Free(p).ok());
  EXPECT_NE(Alloc(1000, kStreamB), p);
  EXPECT_NE(Alloc(2000, kStreamA), p);
  EXPECT_EQ(counters_.allocations, 3);
  EXPECT_EQ(Alloc(1000, kStreamA), p);
}

TEST_F(CachingAllocatorTest, StatsTrackInUseCachedAndPeak) {
  Make(1 << 20);
  void* a = Alloc(512);
  void* b = Alloc(1024);
  AllocatorStats s = alloc_->stats();
  EXPECT_EQ(s.bytes_in_use, 1536);
  EXPECT_EQ(s.bytes_cached, 0);
  EXPECT_EQ(s.peak_bytes_in_use, 1536);
  ASSERT_TRUE(alloc_->Free(b).ok());
  s = alloc_->stats();
  EXPECT_EQ(s.bytes_in_use, 512);
  EXPECT_EQ(s.bytes_cached, 1024);
  EXPECT_EQ(s.peak_bytes_in_use, 1536);
  ASSERT_TRUE(alloc_->Free(a).ok());
  ASSERT_TRUE(alloc_->EmptyCache().ok());
  s = alloc_->stats();
  EXPECT_EQ(s.bytes_in_use, 0);
  EXPECT_EQ(s.bytes_cached, 0);
  EXPECT_EQ(s.backend_frees, 2);
  EXPECT_EQ(counters_.allocated, 0);
}

TEST_F(CachingAllocatorTest, EmptyCacheLeavesBlocksInUse) {
  Make(1 << 20);
  void* a = Alloc(4096);
  void* b = Alloc(4096);
  ASSERT_TRUE(alloc_->Free(b).ok());
  ASSERT_TRUE(alloc_->EmptyCache().ok());
  EXPECT_EQ(counters_.allocated, 4096);
  EXPECT_EQ(alloc_->stats().bytes_in_use, 4096);
  ASSERT_TRUE(alloc_->Free(a).ok());
}

TEST_F(CachingAllocatorTest, OutOfMemoryEmptiesCacheAndRetries) {
  Make(8192);
  void* a = Alloc(4096, kStreamA);
  void* b = Alloc(4096, kStreamB);
  ASSERT_TRUE(alloc_->Free(a).ok());
  ASSERT_TRUE(alloc_->Free(b).ok());
  // 8192 is another class: only fits once both cached blocks are released.
  void* c = Alloc(8192, kStreamA);
  ASSERT_NE(c, nullptr);
  const AllocatorStats s = alloc_->stats();
  EXPECT_EQ(s.bytes_cached, 0);
  EXPECT_EQ(s.bytes_in_use, 8192);
  EXPECT_EQ(s.backend_frees, 2);
}

TEST_F(CachingAllocatorTest, OutOfMemorySaysHowMuch) {
  Make(4096);
  void* a = Alloc(4096);
  absl::StatusOr<void*> p = alloc_->Allocate(1000, nullptr);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(p.status().message(),
            "allocating 1000 bytes (1024 rounded) with 4096 bytes in use and 0 "
            "cached: fake device out of memory");
  ASSERT_TRUE(alloc_->Free(a).ok());
}

TEST_F(CachingAllocatorTest, FreeOfUnknownOrFreedPointerFails) {
  Make(1 << 20);
  int local = 0;
  absl::Status s = alloc_->Free(&local);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("not a block in use"));
  void* p = Alloc(100);
  ASSERT_TRUE(alloc_->Free(p).ok());
  EXPECT_EQ(alloc_->Free(p).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(CachingAllocatorTest, DestructorReturnsCache) {
  Make(1 << 20);
  ASSERT_TRUE(alloc_->Free(Alloc(100)).ok());
  ASSERT_TRUE(alloc_->Free(Alloc(5000)).ok());
  alloc_.reset();
  EXPECT_EQ(counters_.allocated, 0);
  EXPECT_EQ(counters_.frees, 2);
}

TEST_F(CachingAllocatorTest, ThreadsShareTheAllocator) {
  Make(int64_t{1} << 30);
  constexpr int kThreads = 4;
  constexpr int kRounds = 500;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const StreamKey stream = reinterpret_cast<StreamKey>(0x100 * (t % 2 + 1));
      std::vector<void*> held;
      for (int i = 0; i < kRounds; ++i) {
        absl::StatusOr<void*> p =
            alloc_->Allocate(512 + (i * 37 + t) % 5000, stream);
        ASSERT_TRUE(p.ok()) << p.status();
        held.push_back(*p);
        if (held.size() > 8) {
          ASSERT_TRUE(alloc_->Free(held.front()).ok());
          held.erase(held.begin());
        }
      }
      for (void* p : held) ASSERT_TRUE(alloc_->Free(p).ok());
    });
  }
  for (std::thread& t : threads) t.join();
  const AllocatorStats s = alloc_->stats();
  EXPECT_EQ(s.bytes_in_use, 0);
  EXPECT_EQ(s.allocations, kThreads * kRounds);
  EXPECT_GT(s.cache_hits, 0);
  EXPECT_EQ(s.allocations, s.cache_hits + s.backend_allocations);
  EXPECT_EQ(s.bytes_cached, counters_.allocated);
}

}  // namespace
}  // namespace cuda
}  // namespace lockstep
