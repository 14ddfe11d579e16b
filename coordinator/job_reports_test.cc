// A job's reports: rank 0's scalars reach the event file and the curves
// (a replayed step cuts the curve back), running means draw the curve when
// summaries are off, and checkpoint figures add up.
#include "coordinator/job_reports.h"

#include <filesystem>
#include <string>
#include <vector>

#include "core/summary/event_file_reader.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

lockstep::v1::ProgressReport Report(int64_t step, double loss, double acc) {
  lockstep::v1::ProgressReport r;
  r.set_step(step);
  r.set_loss(loss + 1);  // the running mean, not the summary's value
  r.set_accuracy(acc);
  for (const auto& [tag, v] :
       {std::pair<std::string, double>{"train/loss", loss},
        {"train/accuracy", acc}}) {
    auto* s = r.add_scalars();
    s->set_step(step);
    s->set_tag(tag);
    s->set_value(v);
  }
  return r;
}

TEST(JobReportsTest, ScalarsReachTheEventFileAndTheCurves) {
  const std::string dir = ::testing::TempDir() + "/job_reports_scalars";
  auto reports = JobReports::Open(dir, false);
  ASSERT_TRUE(reports.ok()) << reports.status();
  ASSERT_TRUE((*reports)->Add(Report(10, 0.5, 0.8)).ok());
  ASSERT_TRUE((*reports)->Add(Report(20, 0.25, 0.9)).ok());
  lockstep::v1::ProgressReport eval;
  auto* s = eval.add_scalars();
  s->set_step(20);
  s->set_tag("eval/loss");
  s->set_value(0.3);
  ASSERT_TRUE((*reports)->Add(eval).ok());
  JobReports::Curves c = (*reports)->curves();
  ASSERT_EQ(c.train.size(), 2u);
  EXPECT_EQ(c.train[1], (std::array<double, 3>{20, 0.25, 0.9}));
  ASSERT_EQ(c.eval.size(), 1u);
  EXPECT_EQ(c.eval[0][1], 0.3);
  // A restarted generation replays from step 15: the curve goes back there.
  ASSERT_TRUE((*reports)->Add(Report(15, 0.4, 0.85)).ok());
  c = (*reports)->curves();
  ASSERT_EQ(c.train.size(), 2u);
  EXPECT_EQ(c.train[1][0], 15);

  ASSERT_TRUE((*reports)->Flush().ok());
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    files.push_back(e.path().string());
  }
  ASSERT_EQ(files.size(), 1u);
  absl::StatusOr<EventFile> events = ReadEventFile(files.front());
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_EQ(events->scalars.size(), 7u);
  EXPECT_EQ(events->scalars[2].step, 20);
  EXPECT_EQ(events->scalars[2].tag, "train/loss");
  EXPECT_FLOAT_EQ(events->scalars[2].value, 0.25);
}

TEST(JobReportsTest, RunningMeansDrawTheCurveWithoutSummaries) {
  auto reports =
      JobReports::Open(::testing::TempDir() + "/job_reports_off", true);
  ASSERT_TRUE(reports.ok());
  lockstep::v1::ProgressReport r;
  r.set_step(7);
  r.set_loss(1.5);
  r.set_accuracy(0.5);
  ASSERT_TRUE((*reports)->Add(r).ok());
  const JobReports::Curves c = (*reports)->curves();
  ASSERT_EQ(c.train.size(), 1u);
  EXPECT_EQ(c.train[0], (std::array<double, 3>{7, 1.5, 0.5}));
}

TEST(JobReportsTest, CheckpointFiguresAddUp) {
  auto reports =
      JobReports::Open(::testing::TempDir() + "/job_reports_ck", false);
  ASSERT_TRUE(reports.ok());
  CommitInfo a{true, "/s/step-1", 1000, 0.5};
  CommitInfo b{true, "/s/step-2", 3000, 0.25};
  (*reports)->CheckpointCommitted(a);
  (*reports)->CheckpointCommitted(b);
  (*reports)->CheckpointFailed();
  const JobReports::CheckpointFigures f = (*reports)->checkpoints();
  EXPECT_EQ(f.committed, 2);
  EXPECT_EQ(f.failed, 1);
  EXPECT_EQ(f.last_bytes, 3000);
  EXPECT_EQ(f.bytes_total, 4000);
  EXPECT_DOUBLE_EQ(f.last_seconds, 0.25);
  EXPECT_DOUBLE_EQ(f.seconds_total, 0.75);
}

}  // namespace
}  // namespace lockstep
