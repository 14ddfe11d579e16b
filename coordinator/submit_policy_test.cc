#include "coordinator/submit_policy.h"

#include <string>

#include "absl/strings/str_format.h"
#include "core/job/job_spec.h"
#include "core/job/job_spec_diff.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

JobSpec Job(double learning_rate = 0.001, int units = 2, int steps = 10) {
  absl::StatusOr<JobSpec> spec = ParseJobSpec(absl::StrFormat(
      R"({"name": "j", "model": {"input_shape": [4], "layers": [
            {"type": "dense", "units": %d}]},
          "optimizer": {"type": "adam", "learning_rate": %g},
          "data": {"format": "synthetic"}, "steps": %d})",
      units, learning_rate, steps));
  EXPECT_TRUE(spec.ok()) << spec.status();
  return *spec;
}

PriorJob Prior(const JobSpec& spec, const char* state, bool ended) {
  PriorJob p;
  p.spec = &spec;
  p.state = state;
  p.ended = ended;
  p.step = 7;
  return p;
}

TEST(JobSpecDifferencesTest, NamesEveryChangedFieldWithBothValues) {
  EXPECT_TRUE(JobSpecDifferences(Job(), Job()).empty());
  EXPECT_THAT(JobSpecDifferences(Job(), Job(0.002, 3, 20)),
              ElementsAre("model.layers[0].units (2 -> 3)",
                          "optimizer.learning_rate (0.001 -> 0.002)",
                          "steps (10 -> 20)"));
  EXPECT_THAT(JobSpecDifferences(Job(), Job(0.002, 3, 20), "model"),
              ElementsAre("model.layers[0].units (2 -> 3)"));
  EXPECT_EQ(JoinDifferences({"a (1 -> 2)", "b (x -> y)", "c (3 -> 4)"}, 2),
            "a (1 -> 2), b (x -> y) and 1 more");
}

TEST(SubmitPolicyTest, ANewNameStartsAndUnknownCheckpointsAreNeverMixedIn) {
  const JobSpec spec = Job();
  EXPECT_EQ(*DecideSubmit(spec, SubmitMode::kNew, nullptr, -1),
            SubmitAction::kStart);
  absl::StatusOr<SubmitAction> unknown =
      DecideSubmit(spec, SubmitMode::kNew, nullptr, 40);
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(unknown.status().message(),
              HasSubstr("job \"j\" has checkpoints on the storage (up to step "
                        "40) from a run this coordinator has no record of"));
  EXPECT_EQ(*DecideSubmit(spec, SubmitMode::kResume, nullptr, 40),
            SubmitAction::kResume);
  EXPECT_EQ(*DecideSubmit(spec, SubmitMode::kRestart, nullptr, 40),
            SubmitAction::kRestart);
}

TEST(SubmitPolicyTest, TheSameSpecReturnsTheJobWhateverItsState) {
  const JobSpec spec = Job();
  for (const auto& [state, ended] :
       {std::pair{"PENDING", false}, std::pair{"RUNNING", false},
        std::pair{"RECOVERING", false}, std::pair{"SUCCEEDED", true},
        std::pair{"FAILED", true}, std::pair{"CANCELLED", true}}) {
    const JobSpec old = Job();
    const PriorJob prior = Prior(old, state, ended);
    EXPECT_EQ(*DecideSubmit(spec, SubmitMode::kNew, &prior, 5),
              SubmitAction::kReturnExisting)
        << state;
  }
}

TEST(SubmitPolicyTest, AnotherSpecIsRefusedNamingTheFields) {
  const JobSpec old = Job();
  const PriorJob done = Prior(old, "SUCCEEDED", true);
  absl::StatusOr<SubmitAction> r =
      DecideSubmit(Job(0.002), SubmitMode::kNew, &done, 10);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(r.status().message(),
              HasSubstr("job \"j\" already exists (SUCCEEDED at step 7) with "
                        "another spec: optimizer.learning_rate (0.001 -> "
                        "0.002); submit with --resume (Python: resume=True)"));

  // A running job is never replaced: cancel it first.
  const PriorJob running = Prior(old, "RUNNING", false);
  for (SubmitMode mode :
       {SubmitMode::kNew, SubmitMode::kResume, SubmitMode::kRestart}) {
    absl::StatusOr<SubmitAction> busy =
        DecideSubmit(Job(0.002), mode, &running, 10);
    EXPECT_EQ(busy.status().code(), absl::StatusCode::kAlreadyExists);
    EXPECT_THAT(busy.status().message(),
                HasSubstr("is already RUNNING at step 7 with another spec: "
                          "optimizer.learning_rate (0.001 -> 0.002); cancel "
                          "it first (lockstep cancel j)"));
  }
}

TEST(SubmitPolicyTest, ResumeNeedsTheSameModelRestartTakesAnything) {
  const JobSpec old = Job();
  const PriorJob done = Prior(old, "SUCCEEDED", true);
  EXPECT_EQ(*DecideSubmit(Job(0.002, 2, 40), SubmitMode::kResume, &done, 10),
            SubmitAction::kResume);
  EXPECT_EQ(*DecideSubmit(Job(0.002, 2, 40), SubmitMode::kResume, &done, -1),
            SubmitAction::kStart);  // nothing committed to resume from
  absl::StatusOr<SubmitAction> wider =
      DecideSubmit(Job(0.001, 5), SubmitMode::kResume, &done, 10);
  EXPECT_EQ(wider.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(wider.status().message(),
              HasSubstr("--resume (resume=True) continues the same model "
                        "from its checkpoint, but the model differs: "
                        "model.layers[0].units (2 -> 5); --restart "
                        "(restart=True) starts over"));
  EXPECT_EQ(*DecideSubmit(Job(0.001, 5), SubmitMode::kRestart, &done, 10),
            SubmitAction::kRestart);
}

}  // namespace
}  // namespace lockstep
