// Fill-mask inference on a model trained here: a tiny BERT learns four
// sentences by heart and then fills a [MASK] in one of them; its checkpoint
// carries the vocabulary it was trained with. Bad queries are errors that
// say what is wrong.
#include "core/predict/fill_mask.h"

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/file_util.h"
#include "core/checkpoint/checkpoint.h"
#include "core/job/job_spec.h"
#include "core/train/local_training.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr char kSentences[][40] = {
    "the cat sat on the mat", "a dog ran in the park",
    "my bird flew over the house", "his fish swam under the boat"};

class FillMaskTest : public ::testing::Test {
 protected:
  // Trains once for the whole suite (about two seconds).
  static void SetUpTestSuite() {
    dir_ = new std::string(JoinPath(::testing::TempDir(), "fill_mask"));
    fs::remove_all(*dir_);
    fs::create_directories(*dir_);
    const std::string text = JoinPath(*dir_, "train.txt");
    std::ofstream f(text);
    for (int i = 0; i < 50; ++i) {
      for (const char* s : kSentences) f << s << "\n";
    }
    f.close();
    spec_ = new JobSpec(*ParseJobSpec(JobJson(text)));
    TrainOptions options;
    options.storage_dir = JoinPath(*dir_, "storage");
    options.threads = 1;
    absl::StatusOr<TrainResult> r = RunLocalTraining(*spec_, options);
    ASSERT_TRUE(r.ok()) << r.status();
    trained_ = new TrainResult(*r);
  }
  static void TearDownTestSuite() {
    delete dir_;
    delete spec_;
    delete trained_;
  }

  static std::string JobJson(const std::string& text) {
    return absl::StrCat(R"({"name": "fm", "seed": 3,
      "model": {"preset": "bert_mlm", "vocab_size": 128, "hidden": 32,
                "layers": 1, "heads": 2, "intermediate": 64,
                "max_positions": 16, "dropout": 0.0},
      "loss": "sparse_categorical_crossentropy",
      "optimizer": {"type": "adamw", "learning_rate": 0.005,
                    "weight_decay": 0.0},
      "data": {"format": "text", "train_path": ")",
                        text, R"(", "test_path": ")", text, R"(",
               "min_line_chars": 1, "vocab_size": 128, "sequence_length": 12,
               "pack_lines": false, "max_predictions": 2},
      "batch_size_per_replica": 16, "epochs": 40,
      "checkpoint": {"every_steps": 0, "keep": 1},
      "summary": {"every_steps": 1000},
      "cluster": {"workers": 1, "replicas_per_worker": 1,
                  "collective": "ring"}})");
  }

  static LoadedCheckpoint Checkpoint() {
    absl::StatusOr<LoadedCheckpoint> c = LoadCheckpointAt(
        JoinPath(*dir_, "storage/jobs/fm/checkpoints"), nullptr);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *c : LoadedCheckpoint();
  }

  static std::string* dir_;
  static JobSpec* spec_;
  static TrainResult* trained_;
};
std::string* FillMaskTest::dir_ = nullptr;
JobSpec* FillMaskTest::spec_ = nullptr;
TrainResult* FillMaskTest::trained_ = nullptr;

TEST_F(FillMaskTest, TheTrainedModelFillsTheSentencesItLearned) {
  ASSERT_NE(trained_, nullptr);
  EXPECT_GT(trained_->test_accuracy, 0.9) << "the model did not learn";
  const LoadedCheckpoint c = Checkpoint();
  ASSERT_EQ(c.state.artifacts.count("vocab.txt"), 1u)
      << "the checkpoint has no vocab.txt";
  absl::StatusOr<FillMaskResult> r =
      FillMask(*spec_, c, "the cat [MASK] on the mat", 3);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->vocab_source, JoinPath(c.path, "vocab.txt"));
  EXPECT_THAT(r->tokens, ::testing::ElementsAre("[CLS]", "the", "cat", "[MASK]",
                                                "on", "the", "mat", "[SEP]"));
  EXPECT_THAT(r->positions, ::testing::ElementsAre(3));
  ASSERT_EQ(r->guesses.size(), 1u);
  ASSERT_EQ(r->guesses[0].size(), 3u);
  EXPECT_EQ(r->guesses[0][0].token, "sat");
  EXPECT_GT(r->guesses[0][0].probability, 0.5);
  EXPECT_GE(r->guesses[0][0].probability, r->guesses[0][1].probability);
  EXPECT_GE(r->guesses[0][1].probability, r->guesses[0][2].probability);

  // Two masks, each filled from its own context; case and accents folded
  // as the training data was.
  r = FillMask(*spec_, c, "My BÍRD [MASK] over the [MASK]", 1);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->positions, ::testing::ElementsAre(3, 6));
  ASSERT_EQ(r->guesses.size(), 2u);
  EXPECT_EQ(r->guesses[0][0].token, "flew");
  EXPECT_EQ(r->guesses[1][0].token, "house");
}

TEST_F(FillMaskTest, ACheckpointWithoutVocabularyRebuildsItFromTheData) {
  LoadedCheckpoint c = Checkpoint();
  c.state.artifacts.clear();  // as written before checkpoints kept it
  absl::StatusOr<FillMaskResult> r =
      FillMask(*spec_, c, "a dog [MASK] in the park", 1);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->vocab_source, "learned again from data.train_path");
  EXPECT_EQ(r->guesses[0][0].token, "ran");
}

TEST_F(FillMaskTest, TheJobsInitialWeightsAreNotNeeded) {
  // A job that started from a safetensors file no longer at hand: the
  // checkpoint holds every parameter, so prediction never opens it.
  std::string json = JobJson(JoinPath(*dir_, "train.txt"));
  json.replace(json.find("\"dropout\": 0.0}"), 15,
               "\"dropout\": 0.0, \"init\": {\"safetensors\": "
               "\"/nonexistent/model.safetensors\"}}");
  absl::StatusOr<JobSpec> spec = ParseJobSpec(json);
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_EQ(spec->model.init_safetensors, "/nonexistent/model.safetensors");
  absl::StatusOr<FillMaskResult> r =
      FillMask(*spec, Checkpoint(), "his fish [MASK] under the boat", 1);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->guesses[0][0].token, "swam");
}

TEST_F(FillMaskTest, BadQueriesSayWhatIsWrong) {
  const LoadedCheckpoint c = Checkpoint();
  auto error = [&](const std::string& text, int k) {
    absl::StatusOr<FillMaskResult> r = FillMask(*spec_, c, text, k);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << text;
    return std::string(r.status().message());
  };
  EXPECT_THAT(error("the cat sat on the mat", 1),
              HasSubstr("the text has no [MASK] to fill"));
  EXPECT_THAT(error("[MASK] [MASK] [MASK]", 1),
              HasSubstr("the text has 3 [MASK]s; the model predicts at most "
                        "2 per sequence (data.max_predictions)"));
  EXPECT_THAT(error("the cat [MASK] on the mat the dog ran in the park", 1),
              HasSubstr("the text is 14 tokens with [CLS] and [SEP]; the "
                        "model reads at most 12 (data.sequence_length)"));
  EXPECT_THAT(error("the [MASK]", 0), HasSubstr("top_k must be at least 1"));
  // More than the vocabulary (128 tokens): all of them, best first.
  absl::StatusOr<FillMaskResult> all =
      FillMask(*spec_, c, "the [MASK]", 100000);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->guesses.size(), 1u);
  EXPECT_EQ(all->guesses[0].size(), 128u);
}

TEST_F(FillMaskTest, AnotherModelOrAnImageJobIsRefused) {
  const LoadedCheckpoint c = Checkpoint();
  std::string wider = JobJson(JoinPath(*dir_, "train.txt"));
  wider.replace(wider.find("\"hidden\": 32"), 12, "\"hidden\": 48");
  absl::StatusOr<JobSpec> parsed = ParseJobSpec(wider);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  absl::StatusOr<FillMaskResult> r = FillMask(*parsed, c, "the [MASK]", 1);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("[32] does not match the model ([48]); it is another "
                        "model (is it this job's checkpoint?)"));

  absl::StatusOr<JobSpec> image = ParseJobSpec(R"({"name": "img",
      "model": {"input_shape": [4], "layers": [{"type": "dense", "units": 2}]},
      "data": {"format": "synthetic"}, "epochs": 1})");
  ASSERT_TRUE(image.ok()) << image.status();
  r = FillMask(*image, c, "the [MASK]", 1);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("job img does not train a masked language model"));
}

TEST_F(FillMaskTest, CheckpointFoldersByNameAndMissingOnes) {
  const std::string ckpts = JoinPath(*dir_, "storage/jobs/fm/checkpoints");
  absl::StatusOr<LoadedCheckpoint> latest =
      LoadCheckpointAt(ckpts + "/", nullptr);
  ASSERT_TRUE(latest.ok()) << latest.status();
  absl::StatusOr<LoadedCheckpoint> step =
      LoadCheckpointAt(latest->path, nullptr);
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ(step->state.step, latest->state.step);
  EXPECT_EQ(step->state.artifacts, latest->state.artifacts);

  absl::StatusOr<LoadedCheckpoint> none =
      LoadCheckpointAt(JoinPath(*dir_, "nowhere"), nullptr);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(none.status().message()),
              HasSubstr("nowhere\": not a folder"));
  none = LoadCheckpointAt(*dir_, nullptr);  // a folder with no checkpoint
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(none.status().message()),
              HasSubstr("no checkpoint in"));
}

}  // namespace
}  // namespace lockstep
