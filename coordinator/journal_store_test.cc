// The journal's file store: what it writes reads back, none is nullopt,
// each kind of damage is DataLoss naming the file and what is wrong, and a
// write that fails leaves the previous journal whole.
#include "coordinator/journal_store.h"

#include <sys/stat.h>

#include <cstdlib>
#include <string>

#include "base/crc32c.h"
#include "base/file_util.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

std::string TempDir() {
  std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/journalXXXXXX";
  EXPECT_NE(mkdtemp(dir.data()), nullptr);
  return dir;
}

lockstep::v1::Journal Sample(int64_t sequence) {
  lockstep::v1::Journal j;
  j.set_sequence(sequence);
  j.set_next_worker(7);
  auto* job = j.add_jobs();
  job->set_job_json(R"({"name": "mnist"})");
  job->set_start_step(120);
  return j;
}

TEST(FileJournalStoreTest, WritesReadBackAndNoneIsNullopt) {
  const std::string dir = TempDir();
  FileJournalStore store(dir);
  EXPECT_EQ(store.Where(), dir + "/coordinator/journal.pb");
  auto none = store.Read();
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->has_value());

  ASSERT_TRUE(store.Write(Sample(1)).ok());
  ASSERT_TRUE(store.Write(Sample(2)).ok());  // replaces
  auto read = FileJournalStore(dir).Read();
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_TRUE(read->has_value());
  EXPECT_EQ((*read)->SerializeAsString(), Sample(2).SerializeAsString());

  // The format: magic, CRC32C of the payload (little-endian), payload.
  auto bytes = ReadFile(store.Where());
  ASSERT_TRUE(bytes.ok());
  const std::string payload = Sample(2).SerializeAsString();
  ASSERT_EQ(bytes->size(), 12 + payload.size());
  EXPECT_EQ(bytes->substr(0, 8), "LSJRNL01");
  const uint32_t crc = Crc32c(payload.data(), payload.size());
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(static_cast<uint8_t>((*bytes)[8 + i]), (crc >> (8 * i)) & 0xff);
  }
  EXPECT_EQ(bytes->substr(12), payload);
}

TEST(FileJournalStoreTest, DamageIsDataLossNamingTheFileAndWhat) {
  const std::string dir = TempDir();
  FileJournalStore store(dir);
  ASSERT_TRUE(store.Write(Sample(3)).ok());
  const std::string good = *ReadFile(store.Where());
  struct Case {
    std::string bytes, why;
  };
  std::string flipped = good;
  flipped[flipped.size() - 1] ^= 0x40;
  std::string garbage = "LSJRNL01";
  const std::string junk = "\xff\xff\xff\xff\xff";
  const uint32_t crc = Crc32c(junk.data(), junk.size());
  for (int i = 0; i < 4; ++i) garbage += static_cast<char>(crc >> (8 * i));
  garbage += junk;
  for (const Case& c :
       {Case{"", "no lockstep journal header"},
        Case{"LSJRNL02" + good.substr(8), "no lockstep journal header"},
        Case{good.substr(0, 10), "no lockstep journal header"},
        Case{flipped, "CRC mismatch"}, Case{garbage, "unparsable payload"}}) {
    ASSERT_TRUE(WriteFileAtomic(store.Where(), c.bytes).ok());
    auto read = store.Read();
    ASSERT_FALSE(read.ok()) << c.why;
    EXPECT_TRUE(absl::IsDataLoss(read.status())) << read.status();
    EXPECT_EQ(read.status().message(),
              "the journal " + store.Where() + " is damaged (" + c.why +
                  "); move it aside to start without the previous jobs "
                  "(their checkpoints stay in place)");
  }
}

TEST(FileJournalStoreTest, AFailedWriteLeavesThePreviousJournal) {
  const std::string dir = TempDir();
  FileJournalStore store(dir);
  ASSERT_TRUE(store.Write(Sample(4)).ok());
  // The temporary file cannot be made (its name is taken by a folder; a
  // read-only folder would not stop root).
  ASSERT_EQ(mkdir((store.Where() + ".tmp").c_str(), 0755), 0);
  absl::Status s = store.Write(Sample(5));
  EXPECT_EQ(s.message(),
            "cannot write \"" + store.Where() + ".tmp\": Is a directory");
  auto read = store.Read();
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_TRUE(read->has_value());
  EXPECT_EQ((*read)->sequence(), 4);
}

}  // namespace
}  // namespace lockstep
