#include "core/checkpoint/checkpoint.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/file_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = JoinPath(::testing::TempDir(),
                    absl::StrCat("ckpt_", info->name(), "/jobs/x/checkpoints"));
    fs::remove_all(dir_);
    kernel_ = Tensor({2, 3}, {1, 2, 3, 4, 5, 6});
    bias_ = Tensor({3}, {0.1f, 0.2f, 0.3f});
    moment_ = Tensor({2, 3}, {6, 5, 4, 3, 2, 1});
  }

  CheckpointState State(int64_t step) {
    CheckpointState s;
    s.step = step;
    s.epoch = step / 7;
    s.step_in_epoch = step % 7;
    s.seed = 0xfedcba9876543210ull;
    s.generation = 3;
    s.optimizer_iterations = step;
    s.job_json = "{\"name\":\"x\",\"seed\":\"\\u00e9\"}";
    s.train_loss = 0.25;
    return s;
  }

  absl::Status Commit(CheckpointStore& store, int64_t step) {
    kernel_.data()[0] = static_cast<float>(step);  // distinguish checkpoints
    return store.Commit(State(step),
                        {{"dense/kernel", &kernel_}, {"dense/bias", &bias_}},
                        {{"adam/m/dense/kernel", &moment_}});
  }

  std::string Path(const std::string& rel) { return JoinPath(dir_, rel); }

  std::string Latest() {
    auto s = ReadFile(Path("latest"));
    return s.ok() ? *s : "<" + std::string(s.status().message()) + ">";
  }

  std::vector<std::string> Entries() {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_)) {
      out.push_back(e.path().filename().string());
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  void FlipByte(const std::string& path, int64_t offset) {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(offset);
    char c;
    f.get(c);
    f.seekp(offset);
    f.put(static_cast<char>(c ^ 0x40));
  }

  // Byte offset of the data section of a safetensors file.
  int64_t DataStart(const std::string& path) {
    auto bytes = ReadFile(path);
    uint64_t n = 0;
    for (int i = 0; i < 8; ++i) {
      n |= static_cast<uint64_t>(static_cast<uint8_t>((*bytes)[i])) << (8 * i);
    }
    return 8 + static_cast<int64_t>(n);
  }

  std::string dir_;
  Tensor kernel_, bias_, moment_;
};

TEST_F(CheckpointTest, NoCheckpointIsNotFound) {
  CheckpointStore store(dir_, 2);
  std::vector<std::string> warnings;
  EXPECT_EQ(store.LoadLatest(&warnings).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_THAT(store.ListSteps(), IsEmpty());
}

TEST_F(CheckpointTest, CommitKeepsTheNewestAndRoundTrips) {
  CheckpointStore store(dir_, 2);
  for (int64_t step : {100, 200, 1200}) ASSERT_TRUE(Commit(store, step).ok());
  EXPECT_THAT(store.ListSteps(), ElementsAre("step-00000200", "step-00001200"));
  EXPECT_EQ(Latest(), "step-00001200\n");
  EXPECT_THAT(Entries(),
              ElementsAre("latest", "step-00000200", "step-00001200"));
  EXPECT_THAT(fs::exists(Path("step-00001200/model.safetensors")), true);
  EXPECT_THAT(fs::exists(Path("step-00001200/optimizer.safetensors")), true);
  EXPECT_THAT(fs::exists(Path("step-00001200/state.json")), true);

  std::vector<std::string> warnings;
  auto loaded = store.LoadLatest(&warnings);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_THAT(warnings, IsEmpty());
  const CheckpointState want = State(1200);
  EXPECT_EQ(loaded->state.step, 1200);
  EXPECT_EQ(loaded->state.epoch, want.epoch);
  EXPECT_EQ(loaded->state.step_in_epoch, want.step_in_epoch);
  EXPECT_EQ(loaded->state.seed, want.seed);
  EXPECT_EQ(loaded->state.generation, 3);
  EXPECT_EQ(loaded->state.optimizer_iterations, 1200);
  EXPECT_EQ(loaded->state.job_json, want.job_json);
  EXPECT_EQ(loaded->state.train_loss, 0.25);
  EXPECT_EQ(loaded->path, Path("step-00001200"));
  ASSERT_EQ(loaded->model.size(), 2u);
  EXPECT_EQ(loaded->model[0].first, "dense/bias");
  EXPECT_EQ(loaded->model[0].second.values(), bias_.values());
  EXPECT_EQ(loaded->model[1].first, "dense/kernel");
  EXPECT_EQ(loaded->model[1].second.shape(), (Shape{2, 3}));
  EXPECT_EQ(loaded->model[1].second.values()[0], 1200.0f);
  ASSERT_EQ(loaded->optimizer.size(), 1u);
  EXPECT_EQ(loaded->optimizer[0].first, "adam/m/dense/kernel");
  EXPECT_EQ(loaded->optimizer[0].second.values(), moment_.values());

  auto state = ReadFile(Path("step-00001200/state.json"));
  ASSERT_TRUE(state.ok());
  EXPECT_THAT(*state, HasSubstr("\"tensors\""));
  EXPECT_THAT(*state, HasSubstr("\"crc32c\""));
  EXPECT_THAT(*state, HasSubstr("\"file\": \"optimizer.safetensors\""));
}

TEST_F(CheckpointTest, NanLossRoundTripsAsNan) {
  CheckpointStore store(dir_, 2);
  CheckpointState s = State(5);
  s.train_loss = std::nan("");
  ASSERT_TRUE(store.Commit(s, {{"w", &bias_}}, {}).ok());
  auto loaded = store.LoadLatest(nullptr);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_TRUE(std::isnan(loaded->state.train_loss));
  EXPECT_TRUE(loaded->optimizer.empty());
}

TEST_F(CheckpointTest, VocabularyRoundTripsAndADamagedOneFallsBack) {
  CheckpointStore store(dir_, 3);
  CheckpointState s = State(10);
  s.vocab = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\n##s\n";
  ASSERT_TRUE(store.Commit(s, {{"w", &bias_}}, {}).ok());
  s = State(20);
  s.vocab = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\n##ed\n";
  ASSERT_TRUE(store.Commit(s, {{"w", &bias_}}, {}).ok());
  EXPECT_EQ(*ReadFile(Path("step-00000020/vocab.txt")), s.vocab);
  auto loaded = store.LoadLatest(nullptr);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->state.vocab, s.vocab);

  // The same length, one byte different: the recorded CRC catches it.
  FlipByte(Path("step-00000020/vocab.txt"), 30);
  std::vector<std::string> warnings;
  loaded = store.LoadLatest(&warnings);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->state.step, 10);
  EXPECT_EQ(loaded->state.vocab,
            "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\n##s\n");
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("(vocab.txt: 40 bytes with CRC32C 0x"));

  // A data job writes none.
  ASSERT_TRUE(Commit(store, 30).ok());
  EXPECT_FALSE(fs::exists(Path("step-00000030/vocab.txt")));
  loaded = store.LoadLatest(nullptr);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->state.vocab, "");
}

TEST_F(CheckpointTest, MissingVocabularyFallsBack) {
  CheckpointStore store(dir_, 3);
  CheckpointState s = State(10);
  s.vocab = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n";
  ASSERT_TRUE(store.Commit(s, {{"w", &bias_}}, {}).ok());
  s.step = 20;
  ASSERT_TRUE(store.Commit(s, {{"w", &bias_}}, {}).ok());
  fs::remove(Path("step-00000020/vocab.txt"));
  std::vector<std::string> warnings;
  auto loaded = store.LoadLatest(&warnings);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->state.step, 10);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("(vocab.txt: missing)"));
}

TEST_F(CheckpointTest, FlippedByteFallsBackNamingTheTensor) {
  CheckpointStore store(dir_, 3);
  ASSERT_TRUE(Commit(store, 1000).ok());
  ASSERT_TRUE(Commit(store, 1200).ok());
  const std::string model = Path("step-00001200/model.safetensors");
  // Data order is by name: dense/bias (12 bytes), then dense/kernel.
  FlipByte(model, DataStart(model) + 12 + 5);
  std::vector<std::string> warnings;
  auto loaded = store.LoadLatest(&warnings);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->state.step, 1000);
  EXPECT_EQ(loaded->model[1].second.values()[0], 1000.0f);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0],
              HasSubstr("checkpoint step-00001200 is damaged "
                        "(model.safetensors: tensor dense/kernel CRC32C 0x"));
  EXPECT_THAT(warnings[0], HasSubstr("recorded); falling back to "
                                     "step-00001000"));
}

TEST_F(CheckpointTest, FlippedHeaderByteIsCaught) {
  CheckpointStore store(dir_, 3);
  ASSERT_TRUE(Commit(store, 1).ok());
  ASSERT_TRUE(Commit(store, 2).ok());
  const std::string opt = Path("step-00000002/optimizer.safetensors");
  FlipByte(opt, DataStart(opt) - 1);  // a padding space or the closing brace
  std::vector<std::string> warnings;
  auto loaded = store.LoadLatest(&warnings);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->state.step, 1);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("optimizer.safetensors"));
}

TEST_F(CheckpointTest, TruncatedFileFallsBack) {
  CheckpointStore store(dir_, 3);
  ASSERT_TRUE(Commit(store, 1000).ok());
  ASSERT_TRUE(Commit(store, 1200).ok());
  const std::string model = Path("step-00001200/model.safetensors");
  fs::resize_file(model, fs::file_size(model) - 4);
  std::vector<std::string> warnings;
  auto loaded = store.LoadLatest(&warnings);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->state.step, 1000);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("(model.safetensors: "));
  EXPECT_THAT(warnings[0], HasSubstr("bytes"));
}

TEST_F(CheckpointTest, MissingStateJsonFallsBack) {
  CheckpointStore store(dir_, 3);
  ASSERT_TRUE(Commit(store, 1000).ok());
  ASSERT_TRUE(Commit(store, 1200).ok());
  fs::remove(Path("step-00001200/state.json"));
  std::vector<std::string> warnings;
  auto loaded = store.LoadLatest(&warnings);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->state.step, 1000);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0],
              HasSubstr("step-00001200 is damaged (state.json: "
                        "missing); falling back to step-00001000"));
}

TEST_F(CheckpointTest, MalformedStateJsonAndMissingFileFallBack) {
  CheckpointStore store(dir_, 5);
  ASSERT_TRUE(Commit(store, 1).ok());
  ASSERT_TRUE(Commit(store, 2).ok());
  ASSERT_TRUE(Commit(store, 3).ok());
  std::ofstream(Path("step-00000003/state.json")) << "{\"step\": 3,";
  fs::remove(Path("step-00000002/optimizer.safetensors"));
  std::vector<std::string> warnings;
  auto loaded = store.LoadLatest(&warnings);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->state.step, 1);
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_THAT(warnings[0], HasSubstr("(state.json: malformed"));
  EXPECT_THAT(warnings[1],
              HasSubstr("step-00000002 is damaged (optimizer.safetensors: "
                        "missing); falling back to step-00000001"));
}

TEST_F(CheckpointTest, WronglyTypedStateFieldFallsBackNamingTheField) {
  CheckpointStore store(dir_, 5);
  ASSERT_TRUE(Commit(store, 1).ok());
  ASSERT_TRUE(Commit(store, 2).ok());
  const std::string state = Path("step-00000002/state.json");
  std::string text = *ReadFile(state);
  const std::string from = "\"optimizer_iterations\": 2";
  const size_t at = text.find(from);
  ASSERT_NE(at, std::string::npos) << text;
  text.replace(at, from.size(), "\"optimizer_iterations\": 2.5");
  std::ofstream(state, std::ios::trunc) << text;
  std::vector<std::string> warnings;
  auto loaded = store.LoadLatest(&warnings);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->state.step, 1);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0],
              HasSubstr("step-00000002 is damaged (state.json: malformed ("));
  EXPECT_THAT(warnings[0], HasSubstr("optimizer_iterations"));
  EXPECT_THAT(warnings[0], HasSubstr("2.5"));
}

TEST_F(CheckpointTest, AllDamagedIsDataLoss) {
  CheckpointStore store(dir_, 3);
  ASSERT_TRUE(Commit(store, 1000).ok());
  ASSERT_TRUE(Commit(store, 1200).ok());
  fs::remove(Path("step-00001200/state.json"));
  const std::string model = Path("step-00001000/model.safetensors");
  FlipByte(model, DataStart(model) + 1);
  std::vector<std::string> warnings;
  auto loaded = store.LoadLatest(&warnings);
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(loaded.status().message(),
              HasSubstr("step-00001200 (state.json"));
  EXPECT_THAT(loaded.status().message(),
              HasSubstr("step-00001000 (model.safetensors: tensor dense/bias"));
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_THAT(warnings[1], HasSubstr("no older checkpoint"));
}

TEST_F(CheckpointTest, InjectedWriteErrorLeavesLatestUnchanged) {
  CheckpointStore store(dir_, 3);
  ASSERT_TRUE(Commit(store, 1000).ok());
  for (const std::string stage : {"model.safetensors", "optimizer.safetensors",
                                  "state.json", "rename", "latest"}) {
    std::string failed_path;
    store.SetFaultHookForTesting(
        [&](const std::string& s, const std::string& path) {
          if (s != stage) return absl::OkStatus();
          failed_path = path;
          return absl::ResourceExhaustedError(
              absl::StrCat("writing \"", path, "\": No space left on device"));
        });
    absl::Status s = Commit(store, 1200);
    EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << stage;
    EXPECT_THAT(s.message(), HasSubstr(absl::StrCat(
                                 "cannot commit checkpoint step-00001200: "
                                 "writing \"",
                                 failed_path, "\": No space left on device")))
        << stage;
    EXPECT_EQ(Latest(), "step-00001000\n") << stage;
    EXPECT_THAT(Entries(), ElementsAre("latest", "step-00001000")) << stage;
  }
  store.SetFaultHookForTesting(nullptr);
  auto loaded = store.LoadLatest(nullptr);
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ(loaded->state.step, 1000);
  ASSERT_TRUE(Commit(store, 1200).ok());
  EXPECT_EQ(Latest(), "step-00001200\n");
}

TEST_F(CheckpointTest, RealRenameFailureOfLatestLeavesItUnchanged) {
  CheckpointStore store(dir_, 3);
  ASSERT_TRUE(Commit(store, 1000).ok());
  // A directory where latest.tmp goes makes the pointer write fail for real
  // (works as root, unlike chmod).
  fs::create_directories(Path("latest.tmp/blocker"));
  absl::Status s = Commit(store, 1200);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr(Path("latest.tmp")));
  EXPECT_EQ(Latest(), "step-00001000\n");
  EXPECT_THAT(store.ListSteps(), ElementsAre("step-00001000"));
  fs::remove_all(Path("latest.tmp"));
  EXPECT_THAT(Entries(), ElementsAre("latest", "step-00001000"));
}

TEST_F(CheckpointTest, StaleTempFolderIsIgnoredThenCleaned) {
  CheckpointStore store(dir_, 3);
  ASSERT_TRUE(Commit(store, 1000).ok());
  fs::create_directories(Path(".tmp-step-00001200-deadbeef"));
  std::ofstream(Path(".tmp-step-00001200-deadbeef/model.safetensors")) << "x";
  EXPECT_THAT(store.ListSteps(), ElementsAre("step-00001000"));
  auto loaded = store.LoadLatest(nullptr);
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ(loaded->state.step, 1000);
  ASSERT_TRUE(Commit(store, 1200).ok());
  EXPECT_THAT(Entries(),
              ElementsAre("latest", "step-00001000", "step-00001200"));
}

TEST_F(CheckpointTest, MissingOrDanglingLatestUsesNewestValid) {
  CheckpointStore store(dir_, 3);
  ASSERT_TRUE(Commit(store, 1).ok());
  ASSERT_TRUE(Commit(store, 2).ok());
  fs::remove(Path("latest"));
  std::vector<std::string> warnings;
  auto loaded = store.LoadLatest(&warnings);
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ(loaded->state.step, 2);
  EXPECT_THAT(warnings, ElementsAre(HasSubstr("missing")));

  std::ofstream(Path("latest")) << "step-00000009\n";
  warnings.clear();
  loaded = store.LoadLatest(&warnings);
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ(loaded->state.step, 2);
  EXPECT_THAT(warnings, ElementsAre(HasSubstr("names step-00000009")));
}

TEST_F(CheckpointTest, FolderNewerThanLatestIsNotUsedAndLaterRemoved) {
  CheckpointStore store(dir_, 5);
  ASSERT_TRUE(Commit(store, 1).ok());
  ASSERT_TRUE(Commit(store, 2).ok());
  ASSERT_TRUE(Commit(store, 3).ok());
  // As after a fallback: latest names an older checkpoint.
  std::ofstream(Path("latest")) << "step-00000001\n";
  auto loaded = store.LoadLatest(nullptr);
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ(loaded->state.step, 1);
  // Training goes on from step 1: re-committing step 2 replaces the old
  // folder, and step 3 (another timeline) goes.
  ASSERT_TRUE(Commit(store, 2).ok());
  EXPECT_THAT(Entries(),
              ElementsAre("latest", "step-00000001", "step-00000002"));
  loaded = store.LoadLatest(nullptr);
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ(loaded->state.step, 2);
}

TEST_F(CheckpointTest, DuplicateNamesAcrossFilesAreRefused) {
  CheckpointStore store(dir_, 2);
  absl::Status s = store.Commit(State(1), {{"w", &bias_}}, {{"w", &moment_}});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(store.ListSteps(), IsEmpty());
}

}  // namespace
}  // namespace lockstep
