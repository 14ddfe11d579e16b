// A caching allocator for device memory: freed blocks stay cached in
// size-class bins per stream and are handed out again without a cudaMalloc
// (which synchronizes the device). The policy is pure C++ over a tiny
// backend interface, so it is tested with a fake backend and no GPU.
#ifndef LOCKSTEP_KERNELS_CUDA_CACHING_ALLOCATOR_H_
#define LOCKSTEP_KERNELS_CUDA_CACHING_ALLOCATOR_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace lockstep {
namespace cuda {

// Where the memory really comes from (cudaMalloc on one device, or a fake).
// Calls may block; the allocator serializes them.
class MemoryBackend {
 public:
  virtual ~MemoryBackend() = default;
  // `bytes` > 0. kResourceExhausted when the device is out of memory (the
  // allocator then empties its cache and retries once).
  virtual absl::StatusOr<void*> Allocate(size_t bytes) = 0;
  virtual absl::Status Free(void* ptr) = 0;
};

// An opaque stream key (a cudaStream_t, or nullptr for the default stream).
using StreamKey = const void*;

struct AllocatorStats {
  int64_t bytes_in_use = 0;       // rounded sizes of blocks handed out
  int64_t bytes_cached = 0;       // freed blocks kept for reuse
  int64_t peak_bytes_in_use = 0;  // highest bytes_in_use since creation
  int64_t allocations = 0;        // Allocate calls that returned memory
  int64_t cache_hits = 0;         // ... served from the cache
  int64_t backend_allocations = 0;
  int64_t backend_frees = 0;
};

class CachingAllocator {
 public:
  // The smallest block; every class size is a multiple of 128 bytes.
  static constexpr size_t kMinBlockBytes = 512;

  explicit CachingAllocator(std::unique_ptr<MemoryBackend> backend);
  // Returns the cached blocks to the backend. Blocks still in use are left
  // alone (their owner may still have kernels reading them).
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // The size class `bytes` is served from: 512 B minimum, then four classes
  // per power of two (at most 25% waste).
  static size_t RoundSize(size_t bytes);

  // A block of at least `bytes` for work ordered on `stream`. Thread-safe;
  // never synchronizes a stream. bytes == 0 gives nullptr. A block is only
  // reused for the stream it was allocated for: once freed, later work on
  // that stream is ordered after the work that used it, so no event is
  // needed. kResourceExhausted (with the allocator's stats) when the backend
  // has no memory even after the cache is emptied.
  absl::StatusOr<void*> Allocate(size_t bytes, StreamKey stream);

  // Returns `ptr` (from Allocate) to its stream's cache. kInvalidArgument for
  // a pointer this allocator did not hand out (or already freed).
  absl::Status Free(void* ptr);

  // Returns every cached block to the backend (e.g. before handing memory to
  // NCCL or another process). Blocks in use are untouched.
  absl::Status EmptyCache();

  AllocatorStats stats() const;

 private:
  struct Block {
    size_t size = 0;
    StreamKey stream = nullptr;
  };
  using BinKey = std::pair<StreamKey, size_t>;

  absl::Status EmptyCacheLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::unique_ptr<MemoryBackend> backend_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<void*, Block> in_use_ ABSL_GUARDED_BY(mu_);
  std::map<BinKey, std::vector<void*>> free_bins_ ABSL_GUARDED_BY(mu_);
  AllocatorStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace cuda
}  // namespace lockstep

#endif  // LOCKSTEP_KERNELS_CUDA_CACHING_ALLOCATOR_H_
