// RingAllReduce test helpers.
#include "core/collective/ring_allreduce_test_util.h"

#include <cstring>
#include <thread>

namespace lockstep {
namespace testing {

std::vector<float> RankInput(int rank, int64_t count, uint64_t salt) {
  static const float kScale[16] = {1.0f / 256, 1.0f / 128, 1.0f / 64, 1.0f / 32,
                                   1.0f / 16,  1.0f / 8,   1.0f / 4,  1.0f / 2,
                                   1.0f,       2.0f,       4.0f,      8.0f,
                                   16.0f,      32.0f,      64.0f,     128.0f};
  std::vector<float> v(count);
  uint64_t state = 0x9E3779B97F4A7C15ull * (rank + 1) + salt;
  for (float& x : v) {
    state += 0x9E3779B97F4A7C15ull;
    uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    const float unit = static_cast<float>(z >> 40) / (1 << 24) - 0.5f;
    x = unit * kScale[z & 15];
  }
  return v;
}

Buffers MakeInputs(int world, int64_t count, uint64_t salt) {
  Buffers inputs;
  for (int r = 0; r < world; ++r) inputs.push_back(RankInput(r, count, salt));
  return inputs;
}

RingSegment DocumentedSegment(int64_t count, int world, int s) {
  const int64_t base = count / world, rem = count % world;
  return {s * base + (s < rem ? s : rem), base + (s < rem ? 1 : 0)};
}

float Unrounded(float x) { return x; }

std::vector<float> RingOrderSum(const Buffers& inputs, float (*wire)(float)) {
  const int world = inputs.size();
  const int64_t count = inputs[0].size();
  std::vector<float> sum(count);
  for (int s = 0; s < world; ++s) {
    const RingSegment seg = DocumentedSegment(count, world, s);
    for (int64_t i = seg.begin; i < seg.begin + seg.size; ++i) {
      float acc = inputs[s][i];
      for (int j = 1; j < world; ++j) {
        acc = wire(acc) + inputs[(s + j) % world][i];
      }
      sum[i] = wire(acc);
    }
  }
  return sum;
}

bool BitwiseEqual(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         (a.empty() ||
          std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

std::vector<absl::Status> RunRanks(InProcessRing& ring,
                                   const std::vector<int>& ranks,
                                   Buffers& buffers, const CollectiveTag& tag,
                                   const RingOptions& options,
                                   Collective collective) {
  std::vector<absl::Status> statuses(ring.world_size());
  std::vector<std::thread> threads;
  for (int r : ranks) {
    threads.emplace_back([&, r] {
      statuses[r] = collective(ring.endpoint(r), tag, buffers[r].data(),
                               buffers[r].size(), options);
    });
  }
  for (std::thread& t : threads) t.join();
  return statuses;
}

std::vector<absl::Status> RunAll(InProcessRing& ring, Buffers& buffers,
                                 const CollectiveTag& tag,
                                 const RingOptions& options) {
  std::vector<int> ranks;
  for (int r = 0; r < ring.world_size(); ++r) ranks.push_back(r);
  return RunRanks(ring, ranks, buffers, tag, options);
}

}  // namespace testing
}  // namespace lockstep
