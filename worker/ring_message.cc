// Ring message framing (see ring_message.h).
#include "worker/ring_message.h"

#include <malloc.h>

#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include <xxhash.h>

namespace lockstep {

using lockstep::v1::RingHeader;

namespace {

// A header is a few dozen bytes; anything near this is not one.
constexpr uint32_t kMaxHeaderBytes = 4096;

// Reads a received message's slices in order.
class SliceCursor {
 public:
  explicit SliceCursor(const std::vector<grpc::Slice>& slices)
      : slices_(slices) {}

  // Copies the next n bytes into out; false when fewer are left.
  bool Read(size_t n, std::string* out) {
    out->clear();
    while (out->size() < n) {
      if (index_ == slices_.size()) return false;
      const grpc::Slice& s = slices_[index_];
      const size_t take = std::min(n - out->size(), s.size() - offset_);
      out->append(reinterpret_cast<const char*>(s.begin()) + offset_, take);
      Advance(take);
    }
    return true;
  }
  // The spans left, in order.
  std::vector<std::pair<const char*, size_t>> Rest() {
    std::vector<std::pair<const char*, size_t>> spans;
    for (; index_ < slices_.size(); ++index_, offset_ = 0) {
      const grpc::Slice& s = slices_[index_];
      if (s.size() > offset_) {
        spans.emplace_back(reinterpret_cast<const char*>(s.begin()) + offset_,
                           s.size() - offset_);
      }
    }
    return spans;
  }

 private:
  void Advance(size_t n) {
    offset_ += n;
    if (offset_ == slices_[index_].size()) {
      ++index_;
      offset_ = 0;
    }
  }

  const std::vector<grpc::Slice>& slices_;
  size_t index_ = 0;
  size_t offset_ = 0;
};

}  // namespace

void KeepMessageBuffersResident() {
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

RingPayload::RingPayload(std::string bytes, WireType type)
    : owned_(std::make_shared<const std::string>(std::move(bytes))),
      size_(owned_->size()),
      type_(type) {
  if (size_ > 0) spans_.emplace_back(owned_->data(), size_);
}

void RingPayload::AppendTo(PayloadSink& sink) const {
  for (const auto& [data, n] : spans_) sink.Append(data, n);
}

namespace {

using HashState = std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)>;

// An XXH3-64 state that has taken the header's fields 1-8: the job's name
// and a NUL, then the numbers as 8 little-endian bytes each (the same
// bytes whatever protobuf's encoding of the header).
HashState HeaderHash(const RingHeader& header) {
  std::string layout = header.job();
  layout.push_back('\0');
  for (int64_t v :
       {header.generation(), header.step(), int64_t{header.bucket()},
        int64_t{header.chunk()}, int64_t{header.from_rank()},
        header.payload_bytes(), int64_t{header.payload_type()}}) {
    const auto u = static_cast<uint64_t>(v);
    for (int i = 0; i < 8; ++i) {
      layout.push_back(static_cast<char>((u >> (8 * i)) & 0xff));
    }
  }
  HashState state(XXH3_createState(), &XXH3_freeState);
  XXH3_64bits_reset(state.get());
  XXH3_64bits_update(state.get(), layout.data(), layout.size());
  return state;
}

// Pieces small enough to be summed while still in the core's cache after
// they were hashed.
constexpr size_t kChecksumPiece = 64 << 10;

}  // namespace

uint64_t RingChecksum(const RingHeader& header, const RingPayload& payload) {
  HashState state = HeaderHash(header);
  for (const auto& [data, n] : payload.spans()) {
    XXH3_64bits_update(state.get(), data, n);
  }
  return XXH3_64bits_digest(state.get());
}

uint64_t RingPayload::AppendChecksummed(const RingHeader& header,
                                        PayloadSink& sink) const {
  HashState state = HeaderHash(header);
  for (const auto& [data, n] : spans_) {
    for (size_t at = 0; at < n; at += kChecksumPiece) {
      const size_t piece = std::min(kChecksumPiece, n - at);
      XXH3_64bits_update(state.get(), data + at, piece);
      sink.Append(data + at, piece);
    }
  }
  return XXH3_64bits_digest(state.get());
}

namespace {
void SendDone(void* sends) {
  auto* tracker = static_cast<SendTracker*>(sends);
  tracker->Done();
  delete tracker;
}
void ReleaseNothing(void*) {}
}  // namespace

grpc::ByteBuffer RingMessageCodec::Encode(RingHeader header, const void* data,
                                          int64_t count, WireType type,
                                          const SendTracker* sends,
                                          bool checksum) {
  const size_t payload = WireElementBytes(type) * static_cast<size_t>(count);
  header.set_payload_bytes(static_cast<int64_t>(payload));
  header.set_payload_type(type == WireType::kBfloat16 ? lockstep::v1::BFLOAT16
                                                      : lockstep::v1::FLOAT32);
  if (checksum) {
    HashState state = HeaderHash(header);
    XXH3_64bits_update(state.get(), data, payload);
    header.set_checksum(XXH3_64bits_digest(state.get()));
  }
  const uint32_t h = static_cast<uint32_t>(header.ByteSizeLong());
  std::string head(4, '\0');
  for (int i = 0; i < 4; ++i)
    head[i] = static_cast<char>((h >> (8 * i)) & 0xff);
  header.AppendToString(&head);
  grpc::Slice slices[2] = {grpc::Slice(head), grpc::Slice()};
  if (payload == 0) return grpc::ByteBuffer(slices, 1);
  // gRPC reads the values where they are; when it releases the slice, the
  // send is done.
  void* bytes = const_cast<void*>(data);
  if (sends != nullptr) {
    sends->Begin();
    slices[1] = grpc::Slice(bytes, payload, &SendDone, new SendTracker(*sends));
  } else {
    slices[1] = grpc::Slice(bytes, payload, &ReleaseNothing, nullptr);
  }
  return grpc::ByteBuffer(slices, 2);
}

absl::StatusOr<RingMessage> RingMessageCodec::Decode(
    const grpc::ByteBuffer& buffer) {
  RingMessage m;
  std::vector<grpc::Slice>& slices = m.payload.slices_;
  if (!buffer.Dump(&slices).ok()) {
    return absl::InvalidArgumentError("refused a message gRPC could not read");
  }
  const size_t total = buffer.Length();
  SliceCursor cursor(slices);
  std::string bytes;
  if (!cursor.Read(4, &bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "refused a message of ", total,
        " bytes: too short for a ring message (not one, or garbage)"));
  }
  uint32_t h = 0;
  for (int i = 0; i < 4; ++i) {
    h |= static_cast<uint32_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  }
  if (h > kMaxHeaderBytes || h > total - 4 || !cursor.Read(h, &bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "refused a message of ", total, " bytes whose header length says ", h,
        " bytes (not a ring message, or garbage)"));
  }
  if (!m.header.ParseFromString(bytes)) {
    return absl::InvalidArgumentError(
        "refused a message whose ring header does not parse (garbage)");
  }
  const size_t payload = total - 4 - h;
  if (m.header.payload_bytes() != static_cast<int64_t>(payload)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "refused a message whose header says ", m.header.payload_bytes(),
        " payload bytes; ", payload, " came"));
  }
  switch (m.header.payload_type()) {
    case lockstep::v1::FLOAT32:
      m.payload.type_ = WireType::kFloat32;
      break;
    case lockstep::v1::BFLOAT16:
      m.payload.type_ = WireType::kBfloat16;
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("refused a message whose header says payload type ",
                       static_cast<int>(m.header.payload_type()),
                       " (neither float32 nor bfloat16)"));
  }
  m.payload.spans_ = cursor.Rest();
  m.payload.size_ = payload;
  return m;
}

}  // namespace lockstep
