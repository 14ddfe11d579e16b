// The ring's messages on the wire (proto/collective.proto): a 4-byte
// header length, the RingHeader, then the payload's raw values. Encode
// references the caller's buffer in a gRPC slice (zero copy, the send done
// when gRPC releases it); Decode checks a peer's bytes and keeps gRPC's
// receive slices, which the payload is summed out of.
#ifndef LOCKSTEP_WORKER_RING_MESSAGE_H_
#define LOCKSTEP_WORKER_RING_MESSAGE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/collective/transport.h"
#include "grpcpp/grpcpp.h"
#include "proto/collective.pb.h"

namespace lockstep {

// Call once at process start in processes that run the ring. glibc serves
// large buffers with mmap and unmaps them on free, so each one re-faults
// and zeroes its pages; raising the mmap and trim thresholds keeps gRPC's
// receive buffers in the reused heap.
void KeepMessageBuffersResident();

// A received message's payload: spans into gRPC's receive slices, which it
// keeps alive. Never copied.
class RingPayload {
 public:
  RingPayload() = default;
  // Owned bytes: for tests and hand-made messages.
  explicit RingPayload(std::string bytes, WireType type = WireType::kFloat32);

  size_t size() const { return size_; }
  WireType type() const { return type_; }
  void AppendTo(PayloadSink& sink) const;
  // AppendTo that hashes each piece just before the sink takes it (one
  // pass over memory), returning RingChecksum(header, *this): the caller
  // compares it with header.checksum() once all is written.
  uint64_t AppendChecksummed(const lockstep::v1::RingHeader& header,
                             PayloadSink& sink) const;
  // Spans in order: the payload's bytes.
  const std::vector<std::pair<const char*, size_t>>& spans() const {
    return spans_;
  }

 private:
  friend class RingMessageCodec;
  std::vector<grpc::Slice> slices_;
  std::shared_ptr<const std::string> owned_;
  std::vector<std::pair<const char*, size_t>> spans_;
  size_t size_ = 0;
  WireType type_ = WireType::kFloat32;
};

struct RingMessage {
  lockstep::v1::RingHeader header;
  RingPayload payload;
  absl::Time read_at;  // when gRPC had read it (CollectiveService sets it)
};

// The checksum a message carries (RingHeader.checksum): XXH3-64 of the
// header's other fields in a fixed layout, then of the payload. Encode sets
// it; the receiver computes it as it sums (RingPayload::AppendChecksummed)
// and fails the collective when it differs. A 64-bit hash at memory speed
// rather than a CRC32C: it is computed twice for every byte the ring moves.
uint64_t RingChecksum(const lockstep::v1::RingHeader& header,
                      const RingPayload& payload);

class RingMessageCodec {
 public:
  // Frames a message (proto/collective.proto): the header is copied (its
  // payload length, type and checksum set), the payload referenced.
  // `sends` (may be null) counts the send from now until gRPC releases the
  // payload slice. Without `checksum` the header's checksum is 0 (a
  // receiver that checks refuses the message: both ends follow the job's
  // cluster.ring_checksum).
  static grpc::ByteBuffer Encode(lockstep::v1::RingHeader header,
                                 const void* data, int64_t count, WireType type,
                                 const SendTracker* sends,
                                 bool checksum = true);
  // InvalidArgument, naming what is wrong, for bytes that are not a ring
  // message (a header length past the end, a header that does not parse, a
  // payload of another length than the header says).
  static absl::StatusOr<RingMessage> Decode(const grpc::ByteBuffer& buffer);
};

}  // namespace lockstep

#endif  // LOCKSTEP_WORKER_RING_MESSAGE_H_
