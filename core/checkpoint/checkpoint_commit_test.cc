// CheckpointStore commits: the newest kept, round trips, an injected or
// real write failure leaving latest unchanged, stale temporary folders and
// folders newer than latest cleaned, duplicate names refused, a deposed
// HA leader's late commit leaving a later leader's checkpoints alone.
#include "core/checkpoint/checkpoint.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/checkpoint/checkpoint_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;
using testing::CheckpointTest;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

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

// fp16's loss scale goes into state.json and back; a job without one
// writes no "loss_scale" (every other checkpoint's bytes unchanged); a
// scale that is not a finite positive number is refused, not written.
TEST_F(CheckpointTest, LossScaleRoundTripsAndIsWrittenOnlyWhenSet) {
  CheckpointStore store(dir_, 3);
  ASSERT_TRUE(Commit(store, 1).ok());
  auto text = ReadFile(Path("step-00000001/state.json"));
  ASSERT_TRUE(text.ok());
  EXPECT_THAT(*text, Not(HasSubstr("loss_scale")));
  CheckpointState s = State(2);
  s.loss_scale.scale = 8192;
  s.loss_scale.good_steps = 1999;
  s.loss_scale.skipped_steps = 3;
  ASSERT_TRUE(store.Commit(s, {{"w", &bias_}}, {}).ok());
  auto loaded = store.LoadLatest(nullptr);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->state.loss_scale.scale, 8192.0);
  EXPECT_EQ(loaded->state.loss_scale.good_steps, 1999);
  EXPECT_EQ(loaded->state.loss_scale.skipped_steps, 3);
  for (double bad : {-1.0, std::nan(""), HUGE_VAL}) {
    CheckpointState b = State(3);
    b.loss_scale.scale = bad;
    const absl::Status st = store.Commit(b, {{"w", &bias_}}, {});
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(st.message(), HasSubstr("loss_scale must be 0 (none) or "
                                        "finite and > 0"));
  }
  EXPECT_EQ(Latest(), "step-00000002\n");
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

// Two HA coordinators on one storage: a deposed leader (term 5) whose
// commit was under way when a later one (term 7) took over.
TEST_F(CheckpointTest, ADeposedLeadersLateCommitLeavesTheLaterLeadersAlone) {
  CheckpointStore deposed(dir_, 3), leader(dir_, 3);
  deposed.set_term(5);
  leader.set_term(7);
  ASSERT_TRUE(Commit(deposed, 100).ok());
  // The later leader's commit under way, and crash leftovers of term 5 and
  // of a store without a term: the deposed one's commit removes only the
  // leftovers.
  for (const char* tmp :
       {".tmp-t7-step-00000150-0badf00d", ".tmp-t5-step-00000090-deadbeef",
        ".tmp-step-00000080-deadbeef"}) {
    fs::create_directories(Path(tmp));
  }
  ASSERT_TRUE(Commit(deposed, 120).ok());
  EXPECT_THAT(Entries(), ElementsAre(".tmp-t7-step-00000150-0badf00d", "latest",
                                     "step-00000100", "step-00000120"));
  auto state = ReadFile(Path("step-00000120/state.json"));
  ASSERT_TRUE(state.ok());
  EXPECT_THAT(*state, HasSubstr("\"term\": 5,"));
  fs::remove_all(Path(".tmp-t7-step-00000150-0badf00d"));

  // The later leader resumed from step 120 and committed 150 and 200; the
  // deposed one's late commit of step 160 would have pruned them (newer
  // than its step) and pointed `latest` back: refused, nothing touched.
  ASSERT_TRUE(Commit(leader, 150).ok());
  ASSERT_TRUE(Commit(leader, 200).ok());
  const std::vector<std::string> before = Entries();
  absl::Status late = Commit(deposed, 160);
  EXPECT_EQ(late.code(), absl::StatusCode::kFailedPrecondition) << late;
  EXPECT_THAT(late.message(),
              HasSubstr("cannot commit checkpoint step-00000160: "
                        "step-00000200 was committed by a later leader "
                        "(term 7; this coordinator's term is 5)"));
  EXPECT_EQ(Entries(), before);
  EXPECT_EQ(Latest(), "step-00000200\n");
  // Older than the later leader's `latest` is refused too.
  EXPECT_EQ(Commit(deposed, 110).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Entries(), before);

  // The later leader, in turn, takes a deposed leader's folder after its
  // step for an abandoned timeline.
  fs::create_directories(Path("step-00000300"));
  std::ofstream(Path("step-00000300/state.json")) << R"({"term": 5})";
  ASSERT_TRUE(Commit(leader, 250).ok());
  EXPECT_THAT(Entries(), ElementsAre("latest", "step-00000150", "step-00000200",
                                     "step-00000250"));
}

// The later leader commits while the deposed one writes its files: the
// check before the rename refuses, and the written folder goes.
TEST_F(CheckpointTest, ALaterLeadersCommitDuringTheWriteIsNotUndone) {
  CheckpointStore deposed(dir_, 3);
  deposed.set_term(5);
  ASSERT_TRUE(Commit(deposed, 100).ok());
  deposed.SetFaultHookForTesting(
      [&](const std::string& stage, const std::string&) {
        if (stage == "state.json") {  // the later leader's step 110 lands
          fs::create_directories(Path("step-00000110"));
          std::ofstream(Path("step-00000110/state.json")) << R"({"term": 7})";
        }
        return absl::OkStatus();
      });
  absl::Status late = Commit(deposed, 105);
  EXPECT_EQ(late.code(), absl::StatusCode::kFailedPrecondition) << late;
  EXPECT_THAT(late.message(), HasSubstr("step-00000110 was committed by a "
                                        "later leader (term 7;"));
  EXPECT_THAT(Entries(),
              ElementsAre("latest", "step-00000100", "step-00000110"));
  EXPECT_EQ(Latest(), "step-00000100\n");
}

TEST_F(CheckpointTest, AStoreWithoutATermWritesNone) {
  CheckpointStore store(dir_, 3);
  ASSERT_TRUE(Commit(store, 7).ok());
  auto state = ReadFile(Path("step-00000007/state.json"));
  ASSERT_TRUE(state.ok());
  EXPECT_THAT(*state, Not(HasSubstr("\"term\"")));
}

TEST_F(CheckpointTest, DuplicateNamesAcrossFilesAreRefused) {
  CheckpointStore store(dir_, 2);
  absl::Status s = store.Commit(State(1), {{"w", &bias_}}, {{"w", &moment_}});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(store.ListSteps(), IsEmpty());
}

}  // namespace
}  // namespace lockstep
