#include "core/summary/summary_writer.h"

#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/file_util.h"
#include "core/summary/event_file_reader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string TestDir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return JoinPath(::testing::TempDir(),
                  absl::StrCat("summaries_", info->name(), "/sub"));
}

TEST(SummaryWriterTest, RecordFramingMatchesTensorFlow) {
  // Every TensorFlow event file starts with a 24-byte file_version record
  // whose 12-byte prefix is this.
  const std::string record = EncodeEventRecord(std::string(24, 'x'));
  EXPECT_EQ(record.substr(0, 12),
            std::string("\x18\0\0\0\0\0\0\0\xa3\x7f\x4b\x22", 12));
  EXPECT_EQ(record.size(), 24u + 16u);
}

TEST(SummaryWriterTest, ScalarsReadBack) {
  auto writer = SummaryWriter::Open(TestDir());
  ASSERT_TRUE(writer.ok()) << writer.status();
  const std::string path = (*writer)->path();
  EXPECT_THAT(path, StartsWith(TestDir() + "/events.out.tfevents."));
  ASSERT_TRUE((*writer)->AddScalar("train/loss", 1, 0.5).ok());
  ASSERT_TRUE((*writer)
                  ->AddScalars(20, {{"train/loss", 0.25},
                                    {"train/accuracy", 0.875},
                                    {"lr", 1e-3}})
                  .ok());
  ASSERT_TRUE((*writer)->AddScalar("big_step", int64_t{1} << 40, -3).ok());
  ASSERT_TRUE((*writer)->Flush().ok());

  auto events = ReadEventFile(path);
  ASSERT_TRUE(events.ok()) << events.status();
  EXPECT_EQ(events->file_version, "brain.Event:2");
  EXPECT_EQ(events->records, 4);
  ASSERT_EQ(events->scalars.size(), 5u);
  const std::vector<std::tuple<int64_t, std::string, double>> want = {
      {1, "train/loss", 0.5},
      {20, "train/loss", 0.25},
      {20, "train/accuracy", 0.875},
      {20, "lr", static_cast<float>(1e-3)},
      {int64_t{1} << 40, "big_step", -3}};
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(events->scalars[i].step, std::get<0>(want[i])) << i;
    EXPECT_EQ(events->scalars[i].tag, std::get<1>(want[i])) << i;
    EXPECT_EQ(events->scalars[i].value, std::get<2>(want[i])) << i;
    EXPECT_GT(events->scalars[i].wall_time, 1.6e9) << i;
  }
}

TEST(SummaryWriterTest, TwoWritersGetTwoFiles) {
  auto a = SummaryWriter::Open(TestDir());
  auto b = SummaryWriter::Open(TestDir());
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE((*a)->path(), (*b)->path());
}

class CorruptedEventFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto writer = SummaryWriter::Open(TestDir());
    ASSERT_TRUE(writer.ok());
    path_ = (*writer)->path();
    ASSERT_TRUE((*writer)->AddScalar("loss", 7, 1.5).ok());
    ASSERT_TRUE((*writer)->AddScalar("loss", 8, 1.25).ok());
    writer->reset();
    auto bytes = ReadFile(path_);
    ASSERT_TRUE(bytes.ok());
    bytes_ = *bytes;
    // Offsets of the records.
    size_t pos = 0;
    while (pos < bytes_.size()) {
      offsets_.push_back(pos);
      uint64_t n = 0;
      for (int i = 0; i < 8; ++i) {
        n |= static_cast<uint64_t>(static_cast<uint8_t>(bytes_[pos + i]))
             << (8 * i);
      }
      pos += 12 + n + 4;
    }
    ASSERT_EQ(offsets_.size(), 3u);
  }

  absl::Status ReadWith(const std::string& bytes) {
    std::ofstream(path_, std::ios::binary | std::ios::trunc) << bytes;
    return ReadEventFile(path_).status();
  }

  std::string path_, bytes_;
  std::vector<size_t> offsets_;
};

TEST_F(CorruptedEventFileTest, FlippedDataByteNamesOffsetAndDataCrc) {
  std::string b = bytes_;
  b[offsets_[2] + 12 + 3] ^= 0x01;
  absl::Status s = ReadWith(b);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr(path_));
  EXPECT_THAT(s.message(),
              HasSubstr(absl::StrCat("record at byte ", offsets_[2],
                                     ": data CRC mismatch")));
}

TEST_F(CorruptedEventFileTest, FlippedLengthByteNamesLengthCrc) {
  std::string b = bytes_;
  b[offsets_[1]] ^= 0x04;
  absl::Status s = ReadWith(b);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(),
              HasSubstr(absl::StrCat("record at byte ", offsets_[1],
                                     ": length CRC mismatch")));
}

TEST_F(CorruptedEventFileTest, FlippedCrcByteIsDetected) {
  std::string b = bytes_;
  b[offsets_[1] + 9] ^= 0x80;  // the stored length CRC itself
  EXPECT_THAT(ReadWith(b).message(), HasSubstr("length CRC mismatch"));
  b = bytes_;
  b[bytes_.size() - 1] ^= 0x80;  // the last record's data CRC
  EXPECT_THAT(ReadWith(b).message(),
              HasSubstr(absl::StrCat(offsets_[2], ": data CRC mismatch")));
}

TEST_F(CorruptedEventFileTest, TruncatedRecordIsDetected) {
  absl::Status s = ReadWith(bytes_.substr(0, bytes_.size() - 2));
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr(absl::StrCat("record at byte ",
                                                  offsets_[2], ": truncated")));
  EXPECT_TRUE(ReadWith(bytes_).ok());
}

}  // namespace
}  // namespace lockstep
