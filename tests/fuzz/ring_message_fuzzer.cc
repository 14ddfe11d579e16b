// A ring all-reduce message from the previous rank (Collective.Push; the
// framing is in proto/collective.proto: a 4-byte header length, a
// RingHeader, the payload's raw values). The input is the bytes of one
// message as gRPC hands it over. It goes through RingMessageCodec::Decode,
// then through a receiving GrpcRingTransport with a fixed place and
// expectation: job "fuzz-job", generation 7, rank 0 of a ring of one (so
// rank 0 is also the previous rank, and no channel is opened), receiving
// the message's own tag as kCount float32 values, and on a second
// transport as kCount bfloat16 values. Checked:
//  - Decode gives a message or InvalidArgument with a message; a decoded
//    payload is header.payload_bytes long: the input's last bytes.
//  - The same bytes cut into odd slices (as gRPC may hand them over)
//    decode the same. Every slice refers to a heap block of exactly its
//    bytes, so ASan reports any read past a slice or past the payload.
//  - Deliver accepts exactly the expected job, generation and sender with
//    a whole number of values, and refuses anything else with a message.
//  - The receive is OK only for exactly kCount values of the expected type
//    (a message larger than the bucket is refused, saying so); the
//    destination then holds the payload's values (bfloat16 widened), else
//    it is untouched. Nothing is written past its kCount floats.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/collective/transport.h"
#include "google/protobuf/stubs/logging.h"
#include "grpcpp/grpcpp.h"
#include "proto/collective.pb.h"
#include "tests/fuzz/fuzz_util.h"
#include "worker/grpc_ring_transport.h"
#include "worker/ring_message.h"

namespace {

using lockstep::CollectiveTag;
using lockstep::RecvOp;
using lockstep::RingMessage;
using lockstep::RingMessageCodec;
using lockstep::WireType;

// Invalid UTF-8 in a string field fails the parse, and protobuf logs each
// such failure: the lines would bury libFuzzer's report. Set before the
// first input, in libFuzzer and in the replay alike.
const bool kQuietProtobuf = [] {
  google::protobuf::SetLogHandler(nullptr);
  return true;
}();

constexpr char kJob[] = "fuzz-job";
constexpr int64_t kGeneration = 7;
// The bucket the receiver expects: this many values.
constexpr int64_t kCount = 8;
// A destination float no received value is compared against: untouched.
constexpr uint32_t kUntouched = 0x7fc0dead;  // a quiet NaN

// The input as gRPC slices over heap blocks of exactly their bytes.
// STATIC_SLICE makes grpc::Slice refer to the bytes, not copy (or inline)
// them, so an overread is one ASan sees.
class Pieces {
 public:
  void Add(const uint8_t* data, size_t n) {
    if (n == 0) return;
    blocks_.emplace_back(new uint8_t[n]);
    std::memcpy(blocks_.back().get(), data, n);
    slices_.emplace_back(blocks_.back().get(), n, grpc::Slice::STATIC_SLICE);
  }
  grpc::ByteBuffer Buffer() const {
    return grpc::ByteBuffer(slices_.data(), slices_.size());
  }

 private:
  std::vector<std::unique_ptr<uint8_t[]>> blocks_;
  std::vector<grpc::Slice> slices_;
};

uint32_t Bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof(b));
  return b;
}

float FromBits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof(f));
  return f;
}

// Equal bits, or both NaN (a sum may quiet a NaN's payload).
bool SameValue(float got, float want) {
  if (std::isnan(got) || std::isnan(want)) {
    return std::isnan(got) && std::isnan(want);
  }
  return Bits(got) == Bits(want);
}

// The value i of a payload of `type` (native-endian, as the sender wrote).
float ValueAt(const uint8_t* payload, WireType type, int64_t i) {
  if (type == WireType::kFloat32) {
    float f;
    std::memcpy(&f, payload + i * sizeof(float), sizeof(f));
    return f;
  }
  uint16_t h;
  std::memcpy(&h, payload + i * sizeof(uint16_t), sizeof(h));
  return FromBits(static_cast<uint32_t>(h) << 16);
}

// Delivers `m` to a fresh receiving transport and receives its tag as
// kCount values of `type` with `op`; checks what the transport documents.
// `payload` is the message's payload bytes, straight from the input.
void CheckReceive(const RingMessage& m, const uint8_t* payload, WireType type,
                  RecvOp op) {
  using namespace lockstep;
  GrpcRingOptions options;
  options.job = kJob;
  options.generation = kGeneration;
  options.rank = 0;
  options.peers = {"fuzz-peer:1"};  // a ring of one: no channel is made
  GrpcRingTransport transport(options);

  const v1::RingHeader& h = m.header;
  const size_t element = WireElementBytes(m.payload.type());
  const bool deliverable = h.job() == kJob && h.generation() == kGeneration &&
                           h.from_rank() == 0 &&
                           m.payload.size() % element == 0;
  const absl::Status delivered = transport.Deliver(h, m.payload);
  fuzz::CheckRefusal(delivered);
  FUZZ_CHECK(delivered.ok() == deliverable);

  // kAdd sums onto -0, which leaves every value as it came.
  const float start = op == RecvOp::kAdd ? -0.0f : FromBits(kUntouched);
  std::vector<float> dst(kCount, start);
  const CollectiveTag tag{h.generation(), h.step(), h.bucket(), h.chunk()};
  // The message is in the mailbox (or the transport failed) already: an
  // expired deadline never waits.
  const absl::Status received = transport.RecvFromPrev(
      tag, absl::InfinitePast(), dst.data(), kCount, type, op);
  fuzz::CheckRefusal(received);
  if (!delivered.ok()) {
    // Once refused, every receive fails with the refusal.
    FUZZ_CHECK(received == delivered);
  } else {
    const bool fits = m.payload.type() == type &&
                      m.payload.size() ==
                          static_cast<size_t>(kCount) * WireElementBytes(type);
    FUZZ_CHECK(received.ok() == fits);
    if (!fits) FUZZ_CHECK(absl::IsInvalidArgument(received));
  }
  for (int64_t i = 0; i < kCount; ++i) {
    if (received.ok()) {
      FUZZ_CHECK(SameValue(dst[i], ValueAt(payload, type, i)));
    } else {
      FUZZ_CHECK(Bits(dst[i]) == Bits(start));
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace lockstep;
  Pieces whole;
  whole.Add(data, size);
  // Odd cuts: through the length prefix and the header, then through the
  // payload's values (a float split between slices).
  Pieces cut;
  static constexpr size_t kCuts[] = {1, 3, 2, 5, 7, 1, 4093};
  for (size_t at = 0, i = 0; at < size; ++i) {
    const size_t n = std::min(kCuts[i % std::size(kCuts)], size - at);
    cut.Add(data + at, n);
    at += n;
  }

  absl::StatusOr<RingMessage> m = RingMessageCodec::Decode(whole.Buffer());
  absl::StatusOr<RingMessage> c = RingMessageCodec::Decode(cut.Buffer());
  fuzz::CheckRefusal(m.status());
  FUZZ_CHECK(m.status() == c.status());
  if (!m.ok()) {
    FUZZ_CHECK(absl::IsInvalidArgument(m.status()));
    return 0;
  }
  FUZZ_CHECK(m->header.SerializeAsString() == c->header.SerializeAsString());
  FUZZ_CHECK(m->payload.size() == c->payload.size());
  FUZZ_CHECK(m->payload.type() == c->payload.type());
  FUZZ_CHECK(m->header.payload_bytes() >= 0);
  FUZZ_CHECK(static_cast<uint64_t>(m->header.payload_bytes()) ==
             m->payload.size());
  FUZZ_CHECK(m->payload.size() + 4 <= size);
  FUZZ_CHECK((m->payload.type() == WireType::kBfloat16) ==
             (m->header.payload_type() == v1::BFLOAT16));
  const uint8_t* payload = data + (size - m->payload.size());

  // Both expectations, each through both decodes and both ways of landing.
  for (WireType type : {WireType::kFloat32, WireType::kBfloat16}) {
    CheckReceive(*m, payload, type, RecvOp::kCopy);
    CheckReceive(*c, payload, type, RecvOp::kAdd);
  }
  return 0;
}
