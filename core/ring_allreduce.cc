// Ring all-reduce over the abstract Transport: reduce-scatter then
// all-gather, pipelined per chunk, fixed summation order (see the header).
#include "core/ring_allreduce.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/status_macros.h"

namespace lockstep {

RingSegment RingSegmentBounds(int64_t count, int world, int segment) {
  const int64_t base = count / world;
  const int64_t rem = count % world;
  RingSegment seg;
  seg.begin = segment * base + std::min<int64_t>(segment, rem);
  seg.size = base + (segment < rem ? 1 : 0);
  return seg;
}

namespace {

// One rank's part of one collective. Ring step k in 0..world-2 is
// reduce-scatter step k; ring step world-1+k is all-gather step k.
class RingRun {
 public:
  RingRun(Transport& transport, const CollectiveTag& tag, float* data,
          int64_t count, const RingOptions& options)
      : transport_(transport),
        tag_(tag),
        data_(data),
        count_(count),
        chunk_elements_(options.chunk_elements),
        world_(transport.world_size()),
        rank_(transport.rank()),
        prev_((rank_ + world_ - 1) % world_),
        next_((rank_ + 1) % world_),
        deadline_(absl::Now() + options.timeout),
        chunks_per_segment_(NumChunks(RingSegmentBounds(count, world_, 0))) {}

  absl::Status Run() {
    const int64_t messages = int64_t{2} * (world_ - 1) * chunks_per_segment_;
    if (messages > std::numeric_limits<int32_t>::max()) {
      return absl::InvalidArgumentError(
          absl::StrCat("ring all-reduce of ", count_, " floats in chunks of ",
                       chunk_elements_, " needs ", messages,
                       " messages, more than a tag can number: raise "
                       "chunk_elements"));
    }
    // Reduce-scatter. Step k sends segment rank-k and receives segment
    // rank-k-1, which is exactly what step k+1 sends: so each chunk goes on
    // as soon as it is reduced. Step 0 sends our own input.
    for (int64_t c = 0; c < NumChunks(Segment(rank_)); ++c) {
      RETURN_IF_ERROR(Send(0, rank_, c));
    }
    for (int k = 0; k < world_ - 1; ++k) {
      const int seg = Mod(rank_ - k - 1);
      for (int64_t c = 0; c < NumChunks(Segment(seg)); ++c) {
        ASSIGN_OR_RETURN(const std::string message, Recv(k, seg, c));
        const Chunk chunk = ChunkOf(seg, c);
        AddFrom(message, data_ + chunk.begin, chunk.size);
        // At the last step the segment (rank+1) is complete: this send is
        // all-gather step 0.
        RETURN_IF_ERROR(Send(k + 1, seg, c));
      }
    }
    // All-gather. Step k receives the finished segment rank-k and passes it
    // on, except at the last step, where its owner (rank+1) already has it.
    for (int k = 0; k < world_ - 1; ++k) {
      const int ring_step = world_ - 1 + k;
      const int seg = Mod(rank_ - k);
      for (int64_t c = 0; c < NumChunks(Segment(seg)); ++c) {
        ASSIGN_OR_RETURN(const std::string message, Recv(ring_step, seg, c));
        const Chunk chunk = ChunkOf(seg, c);
        std::memcpy(data_ + chunk.begin, message.data(), message.size());
        if (k < world_ - 2) RETURN_IF_ERROR(Send(ring_step + 1, seg, c));
      }
    }
    return absl::OkStatus();
  }

 private:
  struct Chunk {
    int64_t begin = 0;  // element offset into data_
    int64_t size = 0;
  };

  int Mod(int r) const { return ((r % world_) + world_) % world_; }
  RingSegment Segment(int seg) const {
    return RingSegmentBounds(count_, world_, seg);
  }
  int64_t NumChunks(const RingSegment& seg) const {
    return (seg.size + chunk_elements_ - 1) / chunk_elements_;
  }
  Chunk ChunkOf(int seg, int64_t c) const {
    const RingSegment s = Segment(seg);
    const int64_t offset = c * chunk_elements_;
    return Chunk{s.begin + offset, std::min(chunk_elements_, s.size - offset)};
  }
  CollectiveTag MessageTag(int ring_step, int64_t c) const {
    CollectiveTag tag = tag_;
    tag.chunk = static_cast<int32_t>(ring_step * chunks_per_segment_ + c);
    return tag;
  }
  std::string Describe(int ring_step, int seg, int64_t c) const {
    const bool scatter = ring_step < world_ - 1;
    return absl::StrCat("chunk ", c, " of segment ", seg, " (",
                        scatter ? "reduce-scatter" : "all-gather", " step ",
                        scatter ? ring_step : ring_step - (world_ - 1),
                        ", message ", TagToString(MessageTag(ring_step, c)),
                        ")");
  }

  absl::Status Send(int ring_step, int seg, int64_t c) {
    const Chunk chunk = ChunkOf(seg, c);
    return AnnotateStatus(
        transport_.SendToNext(MessageTag(ring_step, c), data_ + chunk.begin,
                              chunk.size),
        absl::StrCat("while sending ", Describe(ring_step, seg, c), " to rank ",
                     next_));
  }

  // Returns the message only if it holds exactly the chunk's floats.
  absl::StatusOr<std::string> Recv(int ring_step, int seg, int64_t c) {
    absl::StatusOr<std::string> message =
        transport_.RecvFromPrev(MessageTag(ring_step, c), deadline_);
    if (!message.ok()) {
      return AnnotateStatus(
          message.status(),
          absl::StrCat("while receiving ", Describe(ring_step, seg, c),
                       " from rank ", prev_));
    }
    const int64_t expected = ChunkOf(seg, c).size * int64_t{sizeof(float)};
    if (static_cast<int64_t>(message->size()) != expected) {
      return absl::InvalidArgumentError(
          absl::StrCat("refused ", Describe(ring_step, seg, c), " from rank ",
                       prev_, ": expected ", expected, " bytes, received ",
                       message->size(), " bytes"));
    }
    return message;
  }

  // dst[i] = partial[i] + dst[i]: the partial sum that came round the ring
  // first, then this rank's value (the documented order). Reads the floats
  // straight from the message bytes; memcpy keeps it alignment- and
  // aliasing-safe and compiles to plain loads.
  static void AddFrom(const std::string& message, float* dst, int64_t n) {
    const char* src = message.data();
    for (int64_t i = 0; i < n; ++i) {
      float partial;
      std::memcpy(&partial, src + i * sizeof(float), sizeof(float));
      dst[i] = partial + dst[i];
    }
  }

  Transport& transport_;
  const CollectiveTag tag_;
  float* const data_;
  const int64_t count_;
  const int64_t chunk_elements_;
  const int world_;
  const int rank_;
  const int prev_;
  const int next_;
  const absl::Time deadline_;
  const int64_t chunks_per_segment_;  // of segment 0, the largest
};

}  // namespace

absl::Status RingAllReduce(Transport& transport, const CollectiveTag& tag,
                           float* data, int64_t count,
                           const RingOptions& options) {
  if (count < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("ring all-reduce: negative count ", count));
  }
  if (count > 0 && data == nullptr) {
    return absl::InvalidArgumentError("ring all-reduce: null data");
  }
  if (options.chunk_elements <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("ring all-reduce: chunk_elements must be positive, got ",
                     options.chunk_elements));
  }
  const int world = transport.world_size();
  const int rank = transport.rank();
  if (world < 1 || rank < 0 || rank >= world) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ring all-reduce: rank ", rank, " outside world of ", world));
  }
  if (world == 1 || count == 0) return absl::OkStatus();
  RingRun run(transport, tag, data, count, options);
  return run.Run();
}

}  // namespace lockstep
