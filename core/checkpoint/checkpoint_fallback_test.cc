// CheckpointStore loads that fall back: a damaged, missing, truncated or
// malformed file (tensor data, header, state.json, vocabulary) makes the
// load use the checkpoint before, naming what was wrong; a missing or
// dangling latest uses the newest valid one; all damaged is data loss.
#include "core/checkpoint/checkpoint.h"

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/checkpoint/checkpoint_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;
using testing::CheckpointTest;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST_F(CheckpointTest, VocabularyRoundTripsAndADamagedOneFallsBack) {
  CheckpointStore store(dir_, 3);
  CheckpointState s = State(10);
  s.artifacts["vocab.txt"] = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\n##s\n";
  ASSERT_TRUE(store.Commit(s, {{"w", &bias_}}, {}).ok());
  s = State(20);
  s.artifacts["vocab.txt"] = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\n##ed\n";
  ASSERT_TRUE(store.Commit(s, {{"w", &bias_}}, {}).ok());
  EXPECT_EQ(*ReadFile(Path("step-00000020/vocab.txt")),
            s.artifacts["vocab.txt"]);
  auto loaded = store.LoadLatest(nullptr);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->state.artifacts, s.artifacts);

  // The same length, one byte different: the recorded CRC catches it.
  FlipByte(Path("step-00000020/vocab.txt"), 30);
  std::vector<std::string> warnings;
  loaded = store.LoadLatest(&warnings);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->state.step, 10);
  EXPECT_EQ(loaded->state.artifacts.at("vocab.txt"),
            "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\n##s\n");
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("(vocab.txt: 40 bytes with CRC32C 0x"));

  // A data job writes none.
  ASSERT_TRUE(Commit(store, 30).ok());
  EXPECT_FALSE(fs::exists(Path("step-00000030/vocab.txt")));
  loaded = store.LoadLatest(nullptr);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_TRUE(loaded->state.artifacts.empty());
}

// VerifyCheckpointFiles (a pulled copy) finds what LoadStep finds of the
// files, streaming them: a flipped byte, a missing file, a damaged
// state.json.
TEST_F(CheckpointTest, VerifyingTheFilesFindsTheDamageALoadFinds) {
  CheckpointStore store(dir_, 3);
  CheckpointState s = State(10);
  s.artifacts["vocab.txt"] = "[PAD]\n[UNK]\n";
  ASSERT_TRUE(store.Commit(s, {{"w", &bias_}}, {}).ok());
  const std::string step = Path("step-00000010");
  EXPECT_TRUE(VerifyCheckpointFiles(step).ok());
  const std::string model = *ReadFile(step + "/model.safetensors");
  FlipByte(step + "/model.safetensors", static_cast<int>(model.size()) - 1);
  absl::Status v = VerifyCheckpointFiles(step);
  EXPECT_TRUE(absl::IsDataLoss(v)) << v;
  EXPECT_THAT(v.message(),
              HasSubstr("model.safetensors: " + std::to_string(model.size()) +
                        " bytes with CRC32C 0x"));
  EXPECT_FALSE(store.LoadStep("step-00000010").ok());  // the load agrees
  FlipByte(step + "/model.safetensors", static_cast<int>(model.size()) - 1);
  EXPECT_TRUE(VerifyCheckpointFiles(step).ok());
  fs::remove(step + "/vocab.txt");
  v = VerifyCheckpointFiles(step);
  EXPECT_EQ(v.message(), "vocab.txt: missing");
  std::ofstream(step + "/state.json") << "{";
  v = VerifyCheckpointFiles(step);
  EXPECT_TRUE(absl::IsDataLoss(v)) << v;
  EXPECT_THAT(v.message(), HasSubstr("state.json: malformed JSON"));
}

// A data artifact is a plain file beside the tensors: a name that is a
// path, or one of the checkpoint's own files, is refused when written, and
// a state.json that records one is damage (a read outside the folder never
// happens).
TEST_F(CheckpointTest, ArtifactNamesArePlainFileNames) {
  CheckpointStore store(dir_, 5);
  for (const char* bad : {"../vocab.txt", "a/b", ".hidden", "state.json",
                          "model.safetensors", ""}) {
    CheckpointState s = State(1);
    s.artifacts[bad] = "x";
    absl::Status st = store.Commit(s, {{"w", &bias_}}, {});
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(st.message()),
                HasSubstr(std::string("data artifact name \"") + bad +
                          "\" is not a plain file name"));
  }
  ASSERT_TRUE(Commit(store, 1).ok());
  CheckpointState s = State(2);
  s.artifacts["vocab.txt"] = "[PAD]\n";
  ASSERT_TRUE(store.Commit(s, {{"w", &bias_}}, {}).ok());
  std::string state = *ReadFile(Path("step-00000002/state.json"));
  const size_t at = state.find("\"vocab.txt\"");
  ASSERT_NE(at, std::string::npos) << state;
  state.replace(at, 11, "\"../v.txt\"");
  std::ofstream(Path("step-00000002/state.json")) << state;
  std::vector<std::string> warnings;
  auto loaded = store.LoadLatest(&warnings);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->state.step, 1);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0],
              HasSubstr("records \"../v.txt\", not a plain file name"));
}

TEST_F(CheckpointTest, MissingVocabularyFallsBack) {
  CheckpointStore store(dir_, 3);
  CheckpointState s = State(10);
  s.artifacts["vocab.txt"] = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n";
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

// fp16's loss scale read back is checked: a negative scale is damage that
// names the field, and the checkpoint before is used.
TEST_F(CheckpointTest, ABadLossScaleFallsBackNamingIt) {
  CheckpointStore store(dir_, 5);
  ASSERT_TRUE(Commit(store, 1).ok());
  CheckpointState s = State(2);
  s.loss_scale.scale = 4096;
  ASSERT_TRUE(store.Commit(s, {{"w", &bias_}}, {}).ok());
  const std::string state = Path("step-00000002/state.json");
  std::string text = *ReadFile(state);
  const std::string from = "\"scale\": 4096";
  const size_t at = text.find(from);
  ASSERT_NE(at, std::string::npos) << text;
  text.replace(at, from.size(), "\"scale\": -4096");
  std::ofstream(state, std::ios::trunc) << text;
  std::vector<std::string> warnings;
  auto loaded = store.LoadLatest(&warnings);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->state.step, 1);
  EXPECT_EQ(loaded->state.loss_scale.scale, 0.0);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("step-00000002 is damaged"));
  EXPECT_THAT(warnings[0],
              HasSubstr("loss_scale: the scale must be finite and > 0"));
  EXPECT_THAT(warnings[0], HasSubstr("got scale -4096"));
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

}  // namespace
}  // namespace lockstep
