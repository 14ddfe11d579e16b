#include "coordinator/job_files.h"

#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

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

uint32_t Crc(const std::string& s) {
  return static_cast<uint32_t>(
      crc32_z(0, reinterpret_cast<const Bytef*>(s.data()), s.size()));
}

class JobFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = JoinPath(
        ::testing::TempDir(),
        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    dir_ = JoinPath(root_, "jobs/j");
    ASSERT_TRUE(MakeDirs(JoinPath(dir_, "checkpoints/step-00000010")).ok());
    ASSERT_TRUE(
        MakeDirs(JoinPath(dir_, "checkpoints/.tmp-step-00000020")).ok());
    ASSERT_TRUE(MakeDirs(JoinPath(dir_, "summaries")).ok());
    for (int i = 0; i < 1000; ++i) body_ += static_cast<char>((i * 7919) % 251);
    Write("result.json", "{\"test_accuracy\": 0.5}\n");
    Write("checkpoints/latest", "step-00000010\n");
    Write("checkpoints/step-00000010/model.safetensors", body_);
    Write("checkpoints/step-00000010/state.json", "{}");
    Write("checkpoints/.tmp-step-00000020/model.safetensors", "half");
    Write("summaries/events.out.tfevents.1", "");
    Write("../secret.txt", "not the job's");
    ASSERT_EQ(symlink(JoinPath(root_, "jobs/secret.txt").c_str(),
                      JoinPath(dir_, "link.txt").c_str()),
              0);
  }
  void Write(const std::string& rel, const std::string& data) {
    ASSERT_TRUE(WriteFileAtomic(JoinPath(dir_, rel), data).ok()) << rel;
  }
  // Every chunk of a read, or the error.
  absl::Status Read(const std::string& path, int64_t offset,
                    int64_t expect_size, int64_t chunk,
                    std::vector<v1::FileChunk>* out) {
    return ReadJobFile(dir_, path, offset, expect_size, chunk,
                       [&](const v1::FileChunk& c) {
                         out->push_back(c);
                         return true;
                       });
  }
  std::string root_, dir_, body_;
};

TEST_F(JobFilesTest, ListsTheJobsOwnFilesSortedWithoutTemporaryOnesOrLinks) {
  absl::StatusOr<v1::ListJobFilesResponse> all = ListJobFiles(dir_, "");
  ASSERT_TRUE(all.ok()) << all.status();
  std::vector<std::string> paths;
  for (const v1::JobFile& f : all->files()) paths.push_back(f.path());
  EXPECT_THAT(paths,
              ElementsAre("checkpoints/latest",
                          "checkpoints/step-00000010/model.safetensors",
                          "checkpoints/step-00000010/state.json", "result.json",
                          "summaries/events.out.tfevents.1"));
  EXPECT_EQ(all->files(1).size(), 1000);
  EXPECT_GT(all->files(1).modified_unix_seconds(), 1.6e9);

  absl::StatusOr<v1::ListJobFilesResponse> step =
      ListJobFiles(dir_, "checkpoints/step-00000010/");
  ASSERT_TRUE(step.ok()) << step.status();
  ASSERT_EQ(step->files_size(), 2);
  EXPECT_EQ(step->files(0).path(),
            "checkpoints/step-00000010/model.safetensors");

  // A folder that does not exist (yet) holds nothing.
  absl::StatusOr<v1::ListJobFilesResponse> none =
      ListJobFiles(dir_, "checkpoints/step-00000099");
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(none->files_size(), 0);

  absl::StatusOr<v1::ListJobFilesResponse> up = ListJobFiles(dir_, "../");
  EXPECT_EQ(up.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(up.status().message(), HasSubstr("leaves the job's folder"));
}

TEST_F(JobFilesTest, ReadsAFileInChunksEachWithItsCrcAndTheWholeFilesAtTheEnd) {
  std::vector<v1::FileChunk> chunks;
  ASSERT_TRUE(
      Read("checkpoints/step-00000010/model.safetensors", 0, 0, 300, &chunks)
          .ok());
  ASSERT_EQ(chunks.size(), 4u);  // 300 + 300 + 300 + 100
  std::string got;
  for (size_t i = 0; i < chunks.size(); ++i) {
    EXPECT_EQ(chunks[i].offset(), static_cast<int64_t>(got.size()));
    EXPECT_EQ(chunks[i].file_size(), 1000);
    EXPECT_EQ(chunks[i].crc32(), Crc(chunks[i].data()));
    EXPECT_EQ(chunks[i].last(), i == 3);
    got += chunks[i].data();
  }
  EXPECT_EQ(got, body_);
  EXPECT_EQ(chunks.back().file_crc32(), Crc(body_));
  EXPECT_EQ(chunks.back().data().size(), 100u);
}

TEST_F(JobFilesTest, AResumedReadStartsAtItsOffsetAndStillChecksTheWholeFile) {
  std::vector<v1::FileChunk> chunks;
  ASSERT_TRUE(Read("checkpoints/step-00000010/model.safetensors", 650, 1000,
                   kJobFileChunkBytes, &chunks)
                  .ok());
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0].offset(), 650);
  EXPECT_EQ(chunks[0].data(), body_.substr(650));
  EXPECT_TRUE(chunks[0].last());
  EXPECT_EQ(chunks[0].file_crc32(), Crc(body_));

  // At the end: only the closing chunk, empty, with the file's CRC.
  chunks.clear();
  ASSERT_TRUE(
      Read("checkpoints/step-00000010/model.safetensors", 1000, 0, 300, &chunks)
          .ok());
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0].data(), "");
  EXPECT_TRUE(chunks[0].last());
  EXPECT_EQ(chunks[0].file_crc32(), Crc(body_));

  // An empty file is one closing chunk too.
  chunks.clear();
  ASSERT_TRUE(Read("summaries/events.out.tfevents.1", 0, 0, 300, &chunks).ok());
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0].file_size(), 0);
  EXPECT_EQ(chunks[0].file_crc32(), 0u);
}

TEST_F(JobFilesTest, RefusesOffsetsPastTheEndAndAFileThatShrank) {
  std::vector<v1::FileChunk> chunks;
  absl::Status past = Read("result.json", 1000, 0, 300, &chunks);
  EXPECT_EQ(past.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(past.message(), HasSubstr("offset 1000 is outside the file's"));
  absl::Status shrank = Read("result.json", 10, 5000, 300, &chunks);
  EXPECT_EQ(shrank.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(shrank.message(),
              HasSubstr("changed since the transfer began: it holds 23 "
                        "bytes, 5000 were announced"));
  EXPECT_TRUE(chunks.empty());
}

TEST_F(JobFilesTest, ServesNothingOutsideTheJobsFolder) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"../secret.txt", "leaves the job's folder"},
      {"checkpoints/../../secret.txt", "leaves the job's folder"},
      {"/etc/passwd", "absolute"},
      {"", "empty"},
      {"checkpoints//latest", "an empty component"},
      {"checkpoints/.tmp-step-00000020/model.safetensors", "a hidden name"},
      {"link.txt", "is a symbolic link"},
      {"result.json/x", "is not a folder"},
      {"checkpoints", "not a regular file"},
      {std::string("result.json\0x", 13), "holds a NUL byte"},
  };
  for (const auto& [path, why] : bad) {
    std::vector<v1::FileChunk> chunks;
    absl::Status s = Read(path, 0, 0, 300, &chunks);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument)
        << path << ": " << s;
    EXPECT_THAT(s.message(), HasSubstr(why)) << path;
    EXPECT_TRUE(chunks.empty()) << path;
  }
  std::vector<v1::FileChunk> chunks;
  absl::Status missing = Read("nope.json", 0, 0, 300, &chunks);
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(
      missing.message(),
      HasSubstr("path \"nope.json\": no such file in the job's folder"));
}

TEST_F(JobFilesTest, StopsWhenTheClientLeaves) {
  int calls = 0;
  absl::Status s =
      ReadJobFile(dir_, "checkpoints/step-00000010/model.safetensors", 0, 0,
                  100, [&](const v1::FileChunk&) { return ++calls < 2; });
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(calls, 2);
}

TEST_F(JobFilesTest, TheStorageIdIsMadeOnceAndKept) {
  absl::StatusOr<std::string> first = LoadOrCreateStorageId(root_);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->size(), 32u);
  EXPECT_EQ(first->find_first_not_of("0123456789abcdef"), std::string::npos);
  absl::StatusOr<std::string> again = LoadOrCreateStorageId(root_);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *first);
  absl::StatusOr<std::string> file =
      ReadFile(JoinPath(root_, "coordinator/storage_id"));
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(*file, *first + "\n");
  absl::StatusOr<std::string> other =
      LoadOrCreateStorageId(JoinPath(root_, "other"));
  ASSERT_TRUE(other.ok());
  EXPECT_NE(*other, *first);
}

}  // namespace
}  // namespace lockstep
