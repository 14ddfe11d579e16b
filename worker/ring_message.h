// The ring's messages on the wire (proto/collective.proto): a 4-byte
// header length, the RingHeader, then the payload's raw values. Encode
// references the caller's buffer in a gRPC slice (zero copy, the send done
// when gRPC releases it); Decode checks a peer's bytes and keeps gRPC's
// receive slices, which the payload is summed out of.
#ifndef LOCKSTEP_WORKER_RING_MESSAGE_H_
#define LOCKSTEP_WORKER_RING_MESSAGE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
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
};

class RingMessageCodec {
 public:
  // Frames a message (proto/collective.proto): the header is copied, the
  // payload referenced. `sends` (may be null) counts the send from now
  // until gRPC releases the payload slice.
  static grpc::ByteBuffer Encode(lockstep::v1::RingHeader header,
                                 const void* data, int64_t count, WireType type,
                                 const SendTracker* sends);
  // InvalidArgument, naming what is wrong, for bytes that are not a ring
  // message (a header length past the end, a header that does not parse, a
  // payload of another length than the header says).
  static absl::StatusOr<RingMessage> Decode(const grpc::ByteBuffer& buffer);
};

}  // namespace lockstep

#endif  // LOCKSTEP_WORKER_RING_MESSAGE_H_
