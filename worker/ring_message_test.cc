// The ring's message framing: payloads referenced, not copied; messages cut
// into odd slices decode; garbage is refused saying what is wrong.
#include "worker/ring_message.h"

#include <cstring>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

using ::testing::HasSubstr;

// A ring header of `job`, `generation`, sent by rank `from`.
v1::RingHeader Header(const std::string& job, int64_t generation, int from) {
  v1::RingHeader h;
  h.set_job(job);
  h.set_generation(generation);
  h.set_from_rank(from);
  return h;
}

TEST(RingMessageCodecTest, PayloadIsSentFromTheCallersBufferNotACopy) {
  std::vector<float> data = {1.5f, -2.0f, 3.25f};
  SendTracker sends;
  v1::RingHeader h = Header("job", 4, 1);
  h.set_step(7);
  h.set_bucket(2);
  h.set_chunk(9);
  auto message = std::make_unique<grpc::ByteBuffer>(
      RingMessageCodec::Encode(h, data.data(), 3, WireType::kFloat32, &sends));
  EXPECT_EQ(sends.in_flight(), 1);
  EXPECT_EQ(message->Length(), 4 + h.ByteSizeLong() + 2 + 9 + 12)
      << "4 length bytes, the header (with payload_bytes and checksum), 12 "
         "payload bytes";
  data[1] = 100.0f;  // after Encode
  absl::StatusOr<RingMessage> m = RingMessageCodec::Decode(*message);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->header.job(), "job");
  EXPECT_EQ(m->header.generation(), 4);
  EXPECT_EQ(m->header.step(), 7);
  EXPECT_EQ(m->header.bucket(), 2);
  EXPECT_EQ(m->header.chunk(), 9);
  EXPECT_EQ(m->header.payload_bytes(), 12);
  ASSERT_EQ(m->payload.size(), 12u);
  float out[3] = {0, 0, 0};
  PayloadSink sink(out, RecvOp::kCopy, WireType::kFloat32);
  m->payload.AppendTo(sink);
  EXPECT_EQ(out[0], 1.5f);
  EXPECT_EQ(out[1], 100.0f);
  EXPECT_EQ(out[2], 3.25f);
  // The checksum was of the values at Encode: a receiver refuses this one
  // (the transport's callers leave sent values alone until received).
  EXPECT_NE(RingChecksum(m->header, m->payload), m->header.checksum());
  message.reset();
  EXPECT_EQ(sends.in_flight(), 1) << "the decoded payload still holds it";
  *m = RingMessage();
  EXPECT_EQ(sends.in_flight(), 0);
}

// `message` as gRPC might hand it over: in slices of `cut` bytes.
grpc::ByteBuffer CutIntoSlices(const grpc::ByteBuffer& message, size_t cut) {
  grpc::Slice flat;
  EXPECT_TRUE(message.DumpToSingleSlice(&flat).ok());
  const std::string bytes(reinterpret_cast<const char*>(flat.begin()),
                          flat.size());
  std::vector<grpc::Slice> pieces;
  for (size_t at = 0; at < bytes.size(); at += cut) {
    pieces.emplace_back(bytes.substr(at, cut));
  }
  return grpc::ByteBuffer(pieces.data(), pieces.size());
}

// gRPC hands over a received message in slices of any size: floats split
// between slices are joined, and kAdd sums in the documented order.
TEST(RingMessageCodecTest, DecodesAMessageCutIntoOddSlices) {
  std::vector<float> data(1001);
  for (size_t i = 0; i < data.size(); ++i) data[i] = 0.1f * i - 7.0f;
  grpc::ByteBuffer whole = RingMessageCodec::Encode(
      Header("j", 1, 0), data.data(), 1001, WireType::kFloat32, nullptr);
  for (size_t cut : {size_t{1}, size_t{3}, size_t{7}, size_t{4093}}) {
    absl::StatusOr<RingMessage> m =
        RingMessageCodec::Decode(CutIntoSlices(whole, cut));
    ASSERT_TRUE(m.ok()) << "cut " << cut << ": " << m.status();
    EXPECT_EQ(RingChecksum(m->header, m->payload), m->header.checksum())
        << "cut " << cut;
    std::vector<float> sum(1001, 0.5f);
    PayloadSink sink(sum.data(), RecvOp::kAdd, WireType::kFloat32);
    m->payload.AppendTo(sink);
    for (size_t i = 0; i < data.size(); ++i) {
      ASSERT_EQ(sum[i], data[i] + 0.5f) << "cut " << cut << " float " << i;
    }
  }
}

TEST(RingMessageCodecTest, GarbageIsRefusedSayingWhatIsWrong) {
  auto decode = [](const std::string& bytes) {
    grpc::Slice s(bytes);
    return RingMessageCodec::Decode(grpc::ByteBuffer(&s, 1)).status();
  };
  absl::Status s = decode("ab");
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("too short for a ring message"));
  s = decode(std::string("\xff\xff\x00\x00", 4) + "garbage");
  EXPECT_THAT(s.message(), HasSubstr("header length says 65535 bytes"));
  s = decode(std::string("\x03\x00\x00\x00", 4) + "\xff\xff\xff");
  EXPECT_THAT(s.message(), HasSubstr("ring header does not parse"));
  v1::RingHeader h = Header("j", 1, 0);
  h.set_payload_bytes(8);
  std::string head = h.SerializeAsString();
  std::string framed(4, '\0');
  framed[0] = static_cast<char>(head.size());
  s = decode(framed + head + "1234");
  EXPECT_THAT(s.message(), HasSubstr("header says 8 payload bytes; 4 came"));
}

// A bfloat16 message is half the bytes, says so in its header, and is
// widened exactly when summed, however gRPC slices it.
TEST(RingMessageCodecTest, BfloatMessagesCarryTwoBytesPerValue) {
  std::vector<uint16_t> data(1001);
  for (size_t i = 0; i < data.size(); ++i) {
    data[i] = static_cast<uint16_t>(0x3f80 + i % 97);  // 1.0 .. 1.75
  }
  grpc::ByteBuffer whole = RingMessageCodec::Encode(
      Header("j", 1, 0), data.data(), 1001, WireType::kBfloat16, nullptr);
  for (size_t cut : {size_t{1}, size_t{3}, size_t{4093}, whole.Length()}) {
    absl::StatusOr<RingMessage> m =
        RingMessageCodec::Decode(CutIntoSlices(whole, cut));
    ASSERT_TRUE(m.ok()) << "cut " << cut << ": " << m.status();
    EXPECT_EQ(m->header.payload_bytes(), 2002);
    EXPECT_EQ(m->header.payload_type(), v1::BFLOAT16);
    EXPECT_EQ(m->payload.type(), WireType::kBfloat16);
    std::vector<float> sum(1001, 0.5f);
    PayloadSink sink(sum.data(), RecvOp::kAdd, WireType::kBfloat16);
    m->payload.AppendTo(sink);
    for (size_t i = 0; i < data.size(); ++i) {
      ASSERT_EQ(sum[i], 1.0f + (i % 97) / 128.0f + 0.5f)
          << "cut " << cut << " value " << i;
    }
  }
  // A payload type this build does not know is refused.
  v1::RingHeader h = Header("j", 1, 0);
  h.set_payload_type(static_cast<v1::PayloadType>(7));
  std::string head = h.SerializeAsString();
  std::string framed(4, '\0');
  framed[0] = static_cast<char>(head.size());
  grpc::Slice s(framed + head);
  absl::Status status =
      RingMessageCodec::Decode(grpc::ByteBuffer(&s, 1)).status();
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_THAT(status.message(),
              HasSubstr("payload type 7 (neither float32 nor bfloat16)"));
}

// gRPC's retry support would keep each sent message of a stream (up to
// 256 KiB) for replay until the stream ends; the ring channels turn it off,
// so a small payload is let go of once written while the stream stays open.

}  // namespace
}  // namespace lockstep
