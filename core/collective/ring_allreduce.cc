// Ring all-reduce over the abstract Transport: reduce-scatter then
// all-gather, pipelined per chunk, fixed summation order (see the header).
#include "core/collective/ring_allreduce.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/cpu/elementwise.h"

namespace lockstep {

RingSegment RingSegmentBounds(int64_t count, int world, int segment) {
  const int64_t base = count / world;
  const int64_t rem = count % world;
  RingSegment seg;
  seg.begin = segment * base + std::min<int64_t>(segment, rem);
  seg.size = base + (segment < rem ? 1 : 0);
  return seg;
}

int64_t RingChunkElements(int64_t chunk_elements, int64_t count, int world) {
  constexpr int64_t kMinSplitChunk = 256 * 1024;  // floats: 1 MiB of float32
  if (chunk_elements <= kMinSplitChunk || world < 1) return chunk_elements;
  const int64_t half = (RingSegmentBounds(count, world, 0).size + 1) / 2;
  return std::min(chunk_elements, std::max(kMinSplitChunk, half));
}

namespace {

// Waits until the transport reads none of the caller's buffers any more:
// the caller may free or reuse them once the collective returns. After a
// failure the sends may be stuck behind a silent peer: aborting the
// transport (which the caller would do anyway) drops them.
absl::Status ReleaseSends(Transport& transport, const SendTracker& sends,
                          absl::Time deadline, int next, absl::Status status) {
  if (status.ok() && sends.WaitIdle(deadline)) return status;
  // After a failure, sends to a live peer still drain within moments.
  if (!status.ok() && sends.WaitIdle(absl::Now() + absl::Seconds(1))) {
    return status;
  }
  if (status.ok()) {
    status = absl::DeadlineExceededError(absl::StrCat(
        "the messages to rank ", next,
        " were still unsent at the deadline (is it reading?)"));
  }
  transport.Abort(status);
  sends.WaitIdle(absl::InfiniteFuture());
  return status;
}

// The checks RingAllReduce and GatherSum share; `what` names the caller.
absl::Status CheckArguments(const Transport& transport, const float* data,
                            int64_t count, const char* what) {
  if (count < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": negative count ", count));
  }
  if (count > 0 && data == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": null data"));
  }
  const int world = transport.world_size();
  const int rank = transport.rank();
  if (world < 1 || rank < 0 || rank >= world) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": rank ", rank, " outside world of ", world));
  }
  return absl::OkStatus();
}

// Which halves of the ring a call runs.
// kPassOwned: the all-gather's first step alone (each rank's owned
// segment to the next rank).
enum class RingPhases { kBoth, kReduceScatter, kAllGather, kPassOwned };

// One rank's part of one collective. Ring step k in 0..world-2 is
// reduce-scatter step k; ring step world-1+k is all-gather step k (the
// numbering is the same when a call runs one half).
class RingRun {
 public:
  RingRun(Transport& transport, const CollectiveTag& tag, float* data,
          int64_t count, const RingOptions& options, RingPhases phases)
      : transport_(transport),
        tag_(tag),
        data_(data),
        count_(count),
        chunk_elements_(RingChunkElements(options.chunk_elements, count,
                                          transport.world_size())),
        world_(transport.world_size()),
        rank_(transport.rank()),
        prev_((rank_ + world_ - 1) % world_),
        next_((rank_ + 1) % world_),
        deadline_(absl::Now() + options.timeout),
        chunks_per_segment_(NumChunks(RingSegmentBounds(count, world_, 0))),
        wire_(options.wire),
        phases_(phases) {
    if (wire_ == WireType::kBfloat16) staging_ = Staging(2 * count);
  }

  absl::Status Run() {
    const int64_t messages = int64_t{2} * (world_ - 1) * chunks_per_segment_;
    if (messages > std::numeric_limits<int32_t>::max()) {
      return absl::InvalidArgumentError(
          absl::StrCat("ring collective of ", count_, " floats in chunks of ",
                       chunk_elements_, " needs ", messages,
                       " messages, more than a tag can number: raise "
                       "chunk_elements"));
    }
    const bool gather_only =
        phases_ == RingPhases::kAllGather || phases_ == RingPhases::kPassOwned;
    if (!gather_only) RETURN_IF_ERROR(ReduceScatter());
    if (phases_ == RingPhases::kReduceScatter) return absl::OkStatus();
    if (gather_only) {
      // The owned segment (rank+1) goes out first: all-gather step 0, which
      // the reduce-scatter sends as it completes the segment.
      const int own = Mod(rank_ + 1);
      for (int64_t c = 0; c < NumChunks(Segment(own)); ++c) {
        RETURN_IF_ERROR(Send(world_ - 1, own, c));
      }
    }
    // All-gather. Step k receives the finished segment rank-k and passes it
    // on, except at the last step, where its owner (rank+1) already has it.
    // Passing the owned segments is its step 0 alone.
    const int steps = phases_ == RingPhases::kPassOwned ? 1 : world_ - 1;
    for (int k = 0; k < steps; ++k) {
      const int ring_step = world_ - 1 + k;
      const int seg = Mod(rank_ - k);
      for (int64_t c = 0; c < NumChunks(Segment(seg)); ++c) {
        RETURN_IF_ERROR(Recv(ring_step, seg, c, RecvOp::kCopy));
        if (k < steps - 1) RETURN_IF_ERROR(Send(ring_step + 1, seg, c));
      }
    }
    return absl::OkStatus();
  }

  absl::Status ReleaseSends(absl::Status status) {
    return lockstep::ReleaseSends(transport_, sends_, deadline_, next_,
                                  std::move(status));
  }

 private:
  // Step k sends segment rank-k and receives segment rank-k-1, which is
  // exactly what step k+1 sends: so each chunk goes on as soon as it is
  // reduced. Step 0 sends our own input. At the last step the segment
  // (rank+1) is complete; the whole ring sends it on at once (all-gather
  // step 0), a reduce-scatter alone keeps it (rounded to bfloat16 as the
  // all-gather would send it, so the bits are the all-reduce's).
  absl::Status ReduceScatter() {
    for (int64_t c = 0; c < NumChunks(Segment(rank_)); ++c) {
      RETURN_IF_ERROR(Send(0, rank_, c));
    }
    for (int k = 0; k < world_ - 1; ++k) {
      const int seg = Mod(rank_ - k - 1);
      const bool last = k == world_ - 2;
      for (int64_t c = 0; c < NumChunks(Segment(seg)); ++c) {
        RETURN_IF_ERROR(Recv(k, seg, c, RecvOp::kAdd));
        if (!last || phases_ == RingPhases::kBoth) {
          RETURN_IF_ERROR(Send(k + 1, seg, c));
        } else if (wire_ == WireType::kBfloat16) {
          const Chunk chunk = ChunkOf(seg, c);
          RoundToBf16(data_ + chunk.begin, chunk.size);
        }
      }
    }
    return absl::OkStatus();
  }

  // In place: each value becomes its bfloat16 rounding (to nearest, ties
  // to even), as Outgoing keeps it.
  static void RoundToBf16(float* values, int64_t n) {
    thread_local std::vector<uint16_t> tmp;
    tmp.resize(static_cast<size_t>(n));
    FloatToBf16(n, values, tmp.data());
    Bf16BytesToFloat(n, reinterpret_cast<const char*>(tmp.data()), values);
  }

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

  // The calling thread's staging buffer, grown to `elements` and kept for
  // its next collectives: a fresh one per call would be mapped and zeroed
  // anew each time once it is past malloc's mmap threshold. Only what is
  // sent is written (and read); a collective returns only once its sends
  // are released, so the next call on this thread may reuse it.
  static uint16_t* Staging(int64_t elements) {
    thread_local std::unique_ptr<uint16_t[]> buffer;
    thread_local int64_t capacity = 0;
    if (elements > capacity) {
      buffer.reset(new uint16_t[static_cast<size_t>(elements)]);
      capacity = elements;
    }
    return buffer.get();
  }

  // bfloat16: the chunk rounded into this phase's staging buffer (a
  // segment is sent at most once per phase, so no send in flight is
  // overwritten). The rank that finishes a segment (all-gather step 0)
  // keeps the rounded values too, so every rank ends with the same bits.
  const void* Outgoing(int ring_step, const Chunk& chunk) {
    if (wire_ == WireType::kFloat32) return data_ + chunk.begin;
    const bool gather = ring_step >= world_ - 1;
    uint16_t* out = staging_ + (gather ? count_ : 0) + chunk.begin;
    FloatToBf16(chunk.size, data_ + chunk.begin, out);
    if (ring_step == world_ - 1) {
      Bf16BytesToFloat(chunk.size, reinterpret_cast<const char*>(out),
                       data_ + chunk.begin);
    }
    return out;
  }

  absl::Status Send(int ring_step, int seg, int64_t c) {
    const Chunk chunk = ChunkOf(seg, c);
    return AnnotateStatus(
        transport_.SendToNext(MessageTag(ring_step, c),
                              Outgoing(ring_step, chunk), chunk.size, wire_,
                              sends_),
        absl::StrCat("while sending ", Describe(ring_step, seg, c), " to rank ",
                     next_));
  }

  // Applies the message to its chunk of data_ only if it holds exactly the
  // chunk's floats. kAdd keeps the documented order: dst = partial + dst,
  // the partial sum that came round the ring first, then this rank's value.
  absl::Status Recv(int ring_step, int seg, int64_t c, RecvOp op) {
    const Chunk chunk = ChunkOf(seg, c);
    absl::Status s = transport_.RecvFromPrev(
        MessageTag(ring_step, c), deadline_, data_ + chunk.begin, chunk.size,
        wire_, op);
    if (absl::IsInvalidArgument(s)) {
      return absl::InvalidArgumentError(
          absl::StrCat("refused ", Describe(ring_step, seg, c), " from rank ",
                       prev_, ": ", s.message()));
    }
    return AnnotateStatus(s, absl::StrCat("while receiving ",
                                          Describe(ring_step, seg, c),
                                          " from rank ", prev_));
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
  const WireType wire_;
  const RingPhases phases_;
  // bfloat16 only: [reduce-scatter sends | all-gather sends], count each;
  // the calling thread's (Staging).
  uint16_t* staging_ = nullptr;
  const SendTracker sends_;
};

}  // namespace

int RingOwnedSegment(int rank, int world) { return (rank + 1) % world; }

namespace {

absl::Status RunRing(Transport& transport, const CollectiveTag& tag,
                     float* data, int64_t count, const RingOptions& options,
                     RingPhases phases, const char* what) {
  RETURN_IF_ERROR(CheckArguments(transport, data, count, what));
  if (options.chunk_elements <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": chunk_elements must be positive, got ",
                     options.chunk_elements));
  }
  if (transport.world_size() == 1 || count == 0) return absl::OkStatus();
  RingRun run(transport, tag, data, count, options, phases);
  return run.ReleaseSends(run.Run());
}

}  // namespace

absl::Status RingAllReduce(Transport& transport, const CollectiveTag& tag,
                           float* data, int64_t count,
                           const RingOptions& options) {
  return RunRing(transport, tag, data, count, options, RingPhases::kBoth,
                 "ring all-reduce");
}

absl::Status RingReduceScatter(Transport& transport, const CollectiveTag& tag,
                               float* data, int64_t count,
                               const RingOptions& options) {
  return RunRing(transport, tag, data, count, options,
                 RingPhases::kReduceScatter, "ring reduce-scatter");
}

absl::Status RingAllGather(Transport& transport, const CollectiveTag& tag,
                           float* data, int64_t count,
                           const RingOptions& options) {
  return RunRing(transport, tag, data, count, options, RingPhases::kAllGather,
                 "ring all-gather");
}

absl::Status RingPassOwned(Transport& transport, const CollectiveTag& tag,
                           float* data, int64_t count,
                           const RingOptions& options) {
  return RunRing(transport, tag, data, count, options, RingPhases::kPassOwned,
                 "ring pass of the owned segments");
}

absl::Status GatherSum(Transport& transport, const CollectiveTag& tag,
                       float* data, int64_t count,
                       const RingOptions& options) {
  RETURN_IF_ERROR(CheckArguments(transport, data, count, "gather-sum"));
  if (options.wire != WireType::kFloat32) {
    return absl::InvalidArgumentError(
        absl::StrCat("gather-sum: sends float32, not ",
                     WireTypeName(options.wire)));
  }
  const int world = transport.world_size();
  const int rank = transport.rank();
  if (world == 1 || count == 0) return absl::OkStatus();
  const int prev = (rank + world - 1) % world, next = (rank + 1) % world;
  auto mod = [world](int r) { return ((r % world) + world) % world; };
  // Every rank's values, rank r's at r * count: the calling thread's
  // buffer, kept for its next call (one per step and sync batch norm sum;
  // the sends from it are released before this returns).
  thread_local std::vector<float> all;
  all.resize(static_cast<size_t>(world) * count);
  std::memcpy(all.data() + static_cast<size_t>(rank) * count, data,
              sizeof(float) * count);
  const absl::Time deadline = absl::Now() + options.timeout;
  const SendTracker sends;
  auto run = [&]() -> absl::Status {
    for (int step = 0; step < world - 1; ++step) {
      CollectiveTag message = tag;
      message.chunk = step;
      const int out = mod(rank - step), in = mod(rank - step - 1);
      RETURN_IF_ERROR(AnnotateStatus(
          transport.SendToNext(message, all.data() + out * count, count,
                               WireType::kFloat32, sends),
          absl::StrCat("while sending rank ", out, "'s values (gather-sum "
                       "step ", step, ", message ", TagToString(message),
                       ") to rank ", next)));
      absl::Status s = transport.RecvFromPrev(
          message, deadline, all.data() + in * count, count,
          WireType::kFloat32, RecvOp::kCopy);
      if (!s.ok()) {
        return AnnotateStatus(
            s, absl::StrCat(absl::IsInvalidArgument(s) ? "refused" : "while "
                                                                      "receiving",
                            " rank ", in, "'s values (gather-sum step ", step,
                            ", message ", TagToString(message),
                            ") from rank ", prev));
      }
    }
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(ReleaseSends(transport, sends, deadline, next, run()));
  for (int64_t i = 0; i < count; ++i) {
    float acc = all[i];
    for (int r = 1; r < world; ++r) acc += all[r * count + i];
    data[i] = acc;
  }
  return absl::OkStatus();
}

}  // namespace lockstep
