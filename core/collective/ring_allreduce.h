// Bandwidth-optimal, pipelined, deterministic ring all-reduce (sum of floats)
// written against the abstract Transport (DESIGN "Ring all-reduce").
#ifndef LOCKSTEP_CORE_COLLECTIVE_RING_ALLREDUCE_H_
#define LOCKSTEP_CORE_COLLECTIVE_RING_ALLREDUCE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "core/collective/transport.h"

namespace lockstep {

struct RingOptions {
  // Max floats per message: the pipelining unit (capped segment size).
  // 4 MiB: over gRPC each message costs a fixed overhead, and on 127.0.0.1
  // smaller chunks (256 KiB, 1 MiB) were no faster at any size and slower
  // below 16 MiB (benchmarks/README.md, "Ring chunk and streams"). A
  // collective may use smaller ones (RingChunkElements).
  int64_t chunk_elements = 1024 * 1024;
  // What goes on the wire. kBfloat16 halves the bytes: each partial sum is
  // rounded to bfloat16 (to nearest, ties to even) when sent and widened on
  // arrival, the sums themselves run in float32 (see "Compression" below).
  WireType wire = WireType::kFloat32;
  // Deadline for the whole collective, measured from the call.
  absl::Duration timeout = absl::Seconds(60);
};

// The chunk a ring all-reduce of `count` floats over `world` ranks uses:
// chunk_elements, except that a segment is cut into at least two chunks
// when each would still hold at least 256 Ki floats (1 MiB): with one
// chunk per segment a rank can forward nothing of a step until the whole
// segment has arrived, and the links idle while it sums (world 4, 16 MiB
// over 1 Gbit/s links: 0.88x Gloo with 4 MiB chunks, the line rate with
// 2 MiB ones). chunk_elements at or under 256 Ki floats is used as given.
// The sums do not depend on it (see the summation order below).
int64_t RingChunkElements(int64_t chunk_elements, int64_t count, int world);

// The slice of the buffer that ring segment `segment` covers. With
// base = count / world and rem = count % world, segments 0..rem-1 hold
// base + 1 elements and the others base, laid out in order:
//   begin = segment * base + min(segment, rem).
// So count < world leaves segments count..world-1 empty.
struct RingSegment {
  int64_t begin = 0;
  int64_t size = 0;
};
RingSegment RingSegmentBounds(int64_t count, int world, int segment);

// In place: data[0..count) becomes the element-wise sum over all ranks. Every
// rank calls it with the same count, the same options.chunk_elements and the
// same tag.generation/step/bucket (tag.chunk is ignored: the algorithm numbers
// its own messages). Blocks until done, failed, or the deadline passes.
// Collectives with different tags may run concurrently on one transport.
//
// Algorithm: world-1 reduce-scatter steps then world-1 all-gather steps; each
// rank sends 2(world-1)/world of the buffer. Each segment is cut into chunks
// of at most chunk_elements floats; a chunk is forwarded as soon as it has
// been received and reduced, so sending, receiving and summing overlap.
//
// Summation order (fixed, so results are bitwise deterministic and identical
// on every rank): segment s starts at rank s and travels the ring, so every
// element i of segment s is
//   ((x_s[i] + x_{s+1}[i]) + x_{s+2}[i]) + ... + x_{s+world-1}[i]
// with rank indices mod world and x_r the input of rank r. Rank s-1 (mod
// world) finishes segment s and the all-gather copies it to every rank.
//
// Messages: the transport message number (tag.chunk) is
//   ring_step * chunks_per_segment + chunk
// where ring_step counts 0..2*world-3 over both phases (reduce-scatter
// first), chunks_per_segment = ceil(size of segment 0 / chunk_elements), and
// chunk indexes the chunks of the segment moved at that step. A message is
// the chunk's floats as raw native-endian bytes.
//
// Compression (options.wire == kBfloat16): every message carries bfloat16.
// In the reduce-scatter a rank adds the widened partial sum to its float32
// value and sends that sum rounded; the rank that finishes a segment rounds
// it, keeps the rounded value itself and sends it round the all-gather. So
// the result is still bitwise identical on every rank (every element a
// bfloat16 value), with an error of at most about world * 2^-8 times the
// summed magnitudes.
// Sends then read a staging buffer of 2 bytes per element per phase instead
// of data[]: one per calling thread, grown to the largest collective it ran
// and kept for the next (2 × count × 2 bytes).
//
// Errors: InvalidArgument for bad arguments, or for a received message whose
// length is not the chunk's (it is refused, never summed); transport errors
// (DeadlineExceeded, Aborted, Unavailable, FailedPrecondition) keep their code
// with the chunk, segment and peer added. On error data[] is unspecified, and
// peers may still be waiting: the caller should Abort the transport (or move
// to a new generation) so they fail fast.
//
// Sends are zero-copy (Transport::SendToNext): the call returns only once
// the transport reads nothing of data[] any more, so the caller may reuse
// the buffer at once. If sends are still held a second after an error (or
// at the deadline), it aborts the transport, which drops them.
absl::Status RingAllReduce(Transport& transport, const CollectiveTag& tag,
                           float* data, int64_t count,
                           const RingOptions& options);

// The two halves of RingAllReduce, for sharded optimizer state
// (cluster.shard): the same chunks, messages, summation order, compression,
// arguments and errors. After RingReduceScatter rank r holds the finished
// sum of segment RingOwnedSegment(r, world) of data[] (bitwise what
// RingAllReduce gives there: with kBfloat16, the sum rounded to bfloat16);
// the rest of data[] is unspecified. RingAllGather sends each rank's owned
// segment of data[] to every other rank (with kBfloat16 each segment is
// rounded to bfloat16, its owner's copy too). RingReduceScatter then
// RingAllGather with one tag each is RingAllReduce, bit for bit.
int RingOwnedSegment(int rank, int world);  // (rank + 1) % world
absl::Status RingReduceScatter(Transport& transport, const CollectiveTag& tag,
                               float* data, int64_t count,
                               const RingOptions& options);
absl::Status RingAllGather(Transport& transport, const CollectiveTag& tag,
                           float* data, int64_t count,
                           const RingOptions& options);
// The all-gather's first step alone: rank r sends its owned segment of
// data[] to rank r+1 and receives the segment rank r-1 owns
// (RingOwnedSegment(r-1) = r) into data[]; the rest of data[] is left as
// it is. For the copy of each rank's part on the next rank (cluster.shard
// copies); options.wire should be kFloat32 so the copy has the owner's
// bits. Arguments, messages (ring step world-1) and errors as
// RingAllGather's.
absl::Status RingPassOwned(Transport& transport, const CollectiveTag& tag,
                           float* data, int64_t count,
                           const RingOptions& options);

// The sum of a few values over all ranks in half the ring's latency
// (sync batch norm's statistics, summed inside the training pass, where
// each collective's latency stalls the step): world-1 steps of an
// all-gather around the ring (step s sends the values of rank rank-s,
// received at step s-1, and receives those of rank rank-s-1), then every
// rank adds the world vectors in rank order,
//   ((x_0[i] + x_1[i]) + x_2[i]) + ... + x_{world-1}[i],
// so the result is bitwise identical on every rank. world-1 message
// latencies against RingAllReduce's 2(world-1), for world times the bytes
// per rank: for vectors of a few thousand floats, not gradients. Message
// s carries tag.chunk = s and count float32 values (options.wire must be
// kFloat32; chunk_elements is not used). Arguments, deadline, errors and
// zero-copy sends as RingAllReduce's; the gathered values live in a
// buffer of the calling thread, kept for its next call.
absl::Status GatherSum(Transport& transport, const CollectiveTag& tag,
                       float* data, int64_t count, const RingOptions& options);

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_COLLECTIVE_RING_ALLREDUCE_H_
