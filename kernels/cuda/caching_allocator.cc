// CachingAllocator: exact-size-class bins keyed by (stream, class).
#include "kernels/cuda/caching_allocator.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace lockstep {
namespace cuda {

CachingAllocator::CachingAllocator(std::unique_ptr<MemoryBackend> backend)
    : backend_(std::move(backend)) {}

CachingAllocator::~CachingAllocator() {
  absl::MutexLock lock(&mu_);
  EmptyCacheLocked().IgnoreError();  // nobody is left to hear about it
}

size_t CachingAllocator::RoundSize(size_t bytes) {
  if (bytes <= kMinBlockBytes) return kMinBlockBytes;
  // The largest power of two <= bytes, then quarter steps above it.
  size_t power = kMinBlockBytes;
  while (power <= bytes / 2) power *= 2;
  const size_t step = power / 4;
  return (bytes + step - 1) / step * step;
}

absl::StatusOr<void*> CachingAllocator::Allocate(size_t bytes,
                                                 StreamKey stream) {
  if (bytes == 0) return nullptr;
  const size_t size = RoundSize(bytes);
  absl::MutexLock lock(&mu_);
  void* ptr = nullptr;
  auto bin = free_bins_.find(BinKey(stream, size));
  if (bin != free_bins_.end() && !bin->second.empty()) {
    ptr = bin->second.back();
    bin->second.pop_back();
    if (bin->second.empty()) free_bins_.erase(bin);
    stats_.bytes_cached -= size;
    ++stats_.cache_hits;
  } else {
    absl::StatusOr<void*> fresh = backend_->Allocate(size);
    if (!fresh.ok() &&
        fresh.status().code() == absl::StatusCode::kResourceExhausted &&
        stats_.bytes_cached > 0) {
      // Cached blocks of other sizes or streams may be what is missing.
      absl::Status emptied = EmptyCacheLocked();
      if (!emptied.ok()) return emptied;
      fresh = backend_->Allocate(size);
    }
    if (!fresh.ok()) {
      return absl::Status(
          fresh.status().code(),
          absl::StrCat("allocating ", bytes, " bytes (", size,
                       " rounded) with ", stats_.bytes_in_use,
                       " bytes in use and ", stats_.bytes_cached,
                       " cached: ", fresh.status().message()));
    }
    ptr = *fresh;
    ++stats_.backend_allocations;
  }
  in_use_[ptr] = Block{size, stream};
  ++stats_.allocations;
  stats_.bytes_in_use += size;
  stats_.peak_bytes_in_use =
      std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
  return ptr;
}

absl::Status CachingAllocator::Free(void* ptr) {
  if (ptr == nullptr) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  auto it = in_use_.find(ptr);
  if (it == in_use_.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CachingAllocator::Free(", reinterpret_cast<uintptr_t>(ptr),
        "): not a block in use (never allocated here, or "
        "freed twice)"));
  }
  const Block block = it->second;
  in_use_.erase(it);
  free_bins_[BinKey(block.stream, block.size)].push_back(ptr);
  stats_.bytes_in_use -= block.size;
  stats_.bytes_cached += block.size;
  return absl::OkStatus();
}

absl::Status CachingAllocator::EmptyCache() {
  absl::MutexLock lock(&mu_);
  return EmptyCacheLocked();
}

absl::Status CachingAllocator::EmptyCacheLocked() {
  absl::Status first_error;
  for (auto& [key, ptrs] : free_bins_) {
    for (void* ptr : ptrs) {
      absl::Status freed = backend_->Free(ptr);
      if (!freed.ok() && first_error.ok()) first_error = freed;
      stats_.bytes_cached -= key.second;
      ++stats_.backend_frees;
    }
  }
  free_bins_.clear();
  return first_error;
}

AllocatorStats CachingAllocator::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

}  // namespace cuda
}  // namespace lockstep
