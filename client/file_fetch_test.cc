#include "client/file_fetch.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/file_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

namespace v1 = lockstep::v1;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A fake ReadJobFile over `content` in chunks of 100 bytes. `fault(attempt,
// chunk)` may damage a chunk or return a status that ends the stream
// before that chunk is sent.
struct FakeServer {
  std::string content;
  std::function<absl::Status(int attempt, v1::FileChunk&)> fault;
  std::vector<int64_t> offsets;  // each attempt's requested offset
  int attempts = 0;

  ChunkStream Stream() {
    return [this](int64_t offset, int64_t expect_size,
                  const std::function<bool(const v1::FileChunk&)>& on_chunk)
               -> absl::Status {
      ++attempts;
      offsets.push_back(offset);
      const int64_t size = static_cast<int64_t>(content.size());
      if (expect_size > size) return absl::FailedPreconditionError("changed");
      for (int64_t at = offset;;) {
        v1::FileChunk c;
        const int64_t n = std::min<int64_t>(100, size - at);
        c.set_offset(at);
        c.set_data(content.substr(at, n));
        c.set_crc32(Crc32(0, c.data()));
        c.set_file_size(size);
        if (at + n == size) {
          c.set_last(true);
          c.set_file_crc32(Crc32(0, content));
        }
        if (fault) {
          absl::Status s = fault(attempts, c);
          if (!s.ok()) return s;
        }
        if (!on_chunk(c) || c.last()) return absl::OkStatus();
        at += n;
      }
    };
  }
};

// Options that keep every retry message in *retries.
FetchOptions Recording(std::vector<std::string>* retries) {
  FetchOptions o;
  o.on_retry = [retries](const std::string& s) { retries->push_back(s); };
  return o;
}

std::string Content(int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += static_cast<char>('a' + (i * 31) % 26);
  return s;
}

TEST(FileFetchTest, ACleanTransferTakesOneAttempt) {
  FakeServer server{Content(350)};
  StringSink sink;
  std::vector<std::string> retries;
  FetchOptions o = Recording(&retries);
  ASSERT_TRUE(FetchFile("f", server.Stream(), sink, o).ok());
  EXPECT_EQ(sink.data(), server.content);
  EXPECT_EQ(server.attempts, 1);
  EXPECT_TRUE(retries.empty());
}

TEST(FileFetchTest, ADamagedChunkIsReadAgainFromItsOwnOffset) {
  FakeServer server{Content(350)};
  server.fault = [](int attempt, v1::FileChunk& c) {
    if (attempt == 1 && c.offset() == 200) (*c.mutable_data())[17] ^= 0x04;
    return absl::OkStatus();
  };
  StringSink sink;
  std::vector<std::string> retries;
  FetchOptions o = Recording(&retries);
  ASSERT_TRUE(FetchFile("checkpoints/step-1/model.safetensors", server.Stream(),
                        sink, o)
                  .ok());
  EXPECT_EQ(sink.data(), server.content);
  EXPECT_THAT(server.offsets, ElementsAre(0, 200));
  EXPECT_THAT(retries,
              ElementsAre("checkpoints/step-1/model.safetensors: the chunk at "
                          "byte 200 failed its CRC-32 (damaged on the way); "
                          "reading again from byte 200 (attempt 2 of 5)"));
}

TEST(FileFetchTest, ABrokenStreamResumesWhereItBroke) {
  FakeServer server{Content(350)};
  server.fault = [](int attempt, v1::FileChunk& c) {
    if (attempt == 1 && c.offset() == 100) {
      return absl::UnavailableError("Socket closed");
    }
    return absl::OkStatus();
  };
  StringSink sink;
  ASSERT_TRUE(FetchFile("f", server.Stream(), sink, FetchOptions()).ok());
  EXPECT_EQ(sink.data(), server.content);
  EXPECT_THAT(server.offsets, ElementsAre(0, 100));
}

TEST(FileFetchTest, AWholeFileThatFailsItsCrcIsReadAgainFromTheStart) {
  FakeServer server{Content(250)};
  server.fault = [](int attempt, v1::FileChunk& c) {
    if (attempt == 1 && c.last()) c.set_file_crc32(c.file_crc32() ^ 1);
    return absl::OkStatus();
  };
  StringSink sink;
  std::vector<std::string> retries;
  FetchOptions o = Recording(&retries);
  ASSERT_TRUE(FetchFile("f", server.Stream(), sink, o).ok());
  EXPECT_EQ(sink.data(), server.content);
  EXPECT_THAT(server.offsets, ElementsAre(0, 0));
  ASSERT_EQ(retries.size(), 1u);
  EXPECT_THAT(retries[0], HasSubstr("the whole file (250 bytes) failed its "
                                    "CRC-32; reading it again from the start"));
}

TEST(FileFetchTest, WhatNoRetryMendsIsReturnedAtOnce) {
  for (absl::Status refusal :
       {absl::NotFoundError("path \"x\": no such file in the job's folder"),
        absl::InvalidArgumentError("path \"../x\": leaves the job's folder"),
        absl::UnauthenticatedError("a wrong bearer token")}) {
    FakeServer server{Content(10)};
    server.fault = [&](int, v1::FileChunk&) { return refusal; };
    StringSink sink;
    absl::Status s = FetchFile("x", server.Stream(), sink, FetchOptions());
    EXPECT_EQ(s, refusal);
    EXPECT_EQ(server.attempts, 1);
  }
}

TEST(FileFetchTest, GivesUpAfterItsAttemptsNamingTheFileAndTheLastProblem) {
  FakeServer server{Content(150)};
  server.fault = [](int, v1::FileChunk& c) {
    if (c.offset() == 100) (*c.mutable_data())[0] ^= 1;
    return absl::OkStatus();
  };
  StringSink sink;
  FetchOptions o;
  o.max_attempts = 3;
  absl::Status s = FetchFile("result.json", server.Stream(), sink, o);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(s.message(),
            "result.json: not fetched after 3 attempts: the chunk at byte 100 "
            "failed its CRC-32 (damaged on the way)");
  EXPECT_EQ(server.attempts, 3);
  EXPECT_EQ(sink.size(), 100);  // the verified part is kept
}

TEST(FileFetchTest, AFileThatChangedIsReadAgainFromTheStart) {
  FakeServer server{Content(250)};
  server.fault = [&server](int attempt, v1::FileChunk& c) {
    if (attempt == 1 && c.offset() == 100) {
      server.content = Content(120);  // rewritten between the attempts
      return absl::UnavailableError("Socket closed");
    }
    return absl::OkStatus();
  };
  StringSink sink;
  ASSERT_TRUE(FetchFile("f", server.Stream(), sink, FetchOptions()).ok());
  EXPECT_EQ(sink.data(), Content(120));
  EXPECT_THAT(server.offsets, ElementsAre(0, 100, 0));
}

TEST(FileFetchTest, ADiskSinkContinuesAPartialFileAndCommitsByRename) {
  const std::string path = JoinPath(::testing::TempDir(), "pulled.bin");
  FakeServer server{Content(350)};
  ASSERT_TRUE(
      WriteFileAtomic(path + ".partial", server.content.substr(0, 230)).ok());
  absl::StatusOr<std::unique_ptr<DiskSink>> sink = DiskSink::Open(path);
  ASSERT_TRUE(sink.ok()) << sink.status();
  EXPECT_EQ((*sink)->size(), 230);
  ASSERT_TRUE(FetchFile("f", server.Stream(), **sink, FetchOptions()).ok());
  EXPECT_THAT(server.offsets, ElementsAre(230));
  ASSERT_TRUE((*sink)->Commit().ok());
  absl::StatusOr<std::string> got = ReadFile(path);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, server.content);
  EXPECT_FALSE(ReadFile(path + ".partial").ok());

  // A partial file that is not a prefix of the file fails the whole-file
  // CRC and is fetched again from the start.
  ASSERT_TRUE(WriteFileAtomic(path + ".partial", "garbage").ok());
  server.offsets.clear();
  sink = DiskSink::Open(path);
  ASSERT_TRUE(sink.ok());
  ASSERT_TRUE(FetchFile("f", server.Stream(), **sink, FetchOptions()).ok());
  EXPECT_THAT(server.offsets, ElementsAre(7, 0));
  ASSERT_TRUE((*sink)->Commit().ok());
  got = ReadFile(path);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, server.content);
}

}  // namespace
}  // namespace lockstep
