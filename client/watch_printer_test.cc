// The order and the once-only rules of what `submit --wait` and `watch`
// print, fed JobStatus messages as the coordinator streams them.
#include "client/watch_printer.h"

#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace lockstep {
namespace {

v1::JobStatus Status(v1::JobState state, int64_t step, int64_t epoch,
                     std::vector<std::string> events,
                     const std::string& message = "") {
  v1::JobStatus s;
  s.set_name("quick");
  s.set_state(state);
  s.set_step(step);
  s.set_total_steps(15);
  s.set_epoch(epoch);
  s.set_epochs(3);
  s.set_loss(1.5);
  s.set_workers_alive(2);
  s.set_workers_needed(2);
  s.set_message(message);
  for (std::string& e : events) s.add_events(std::move(e));
  return s;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

constexpr char kDone[] = "15 steps, test accuracy 0.3400";

// A job that ended before the first status came: its whole run arrives at
// once, and the epochs come before the final progress line (they came
// after it). The closing event is left to the verb's last line.
TEST(WatchPrinterTest, AWholeRunAtOnceKeepsItsEpochsBeforeTheLastProgress) {
  std::ostringstream out;
  WatchPrinter print(out);
  const v1::JobStatus end =
      Status(v1::SUCCEEDED, 15, 3,
             {"checkpoint step-5 committed", "[quick] epoch 1 done",
              "[quick] epoch 3 done", std::string("SUCCEEDED: ") + kDone},
             kDone);
  print(end);
  EXPECT_EQ(Lines(out.str()),
            (std::vector<std::string>{
                "checkpoint step-5 committed", "[quick] epoch 1 done",
                "[quick] epoch 3 done", ProgressLine(end)}));
  EXPECT_NE(ProgressLine(end).find("step 15/15"), std::string::npos)
      << ProgressLine(end);
}

// Watched from the start: events as they come, the last progress line
// before the closing events, no progress line twice for one step.
TEST(WatchPrinterTest, AWatchedRunPutsTheLastProgressBeforeTheClosingEvents) {
  std::ostringstream out;
  WatchPrinter print(out);
  const v1::JobStatus running =
      Status(v1::RUNNING, 10, 2, {"[quick] epoch 1 done"});
  print(running);
  print(Status(v1::RUNNING, 10, 2, {}));  // same step: nothing
  const v1::JobStatus end = Status(
      v1::SUCCEEDED, 15, 3,
      {"[quick] epoch 3 done", std::string("SUCCEEDED: ") + kDone}, kDone);
  print(end);
  EXPECT_EQ(Lines(out.str()), (std::vector<std::string>{
                                  "[quick] epoch 1 done", ProgressLine(running),
                                  ProgressLine(end), "[quick] epoch 3 done"}));
}

// A failed job shows no progress line and keeps events that are not its
// closing one.
TEST(WatchPrinterTest, AFailedJobPrintsItsEventsOnly) {
  std::ostringstream out;
  WatchPrinter print(out);
  print(Status(v1::FAILED, 0, 0,
               {"worker w1 lost", "FAILED: data.train_path: missing"},
               "data.train_path: missing"));
  EXPECT_EQ(Lines(out.str()), (std::vector<std::string>{"worker w1 lost"}));
}

// A waiting job: its state once per change, then a countdown every ten
// seconds and every second in the last ten.
TEST(WatchPrinterTest, AWaitingJobCountsDown) {
  std::ostringstream out;
  WatchPrinter print(out);
  for (double left : {25.0, 24.5, 20.0, 19.0, 9.2, 9.0}) {
    v1::JobStatus s = Status(v1::PENDING, 0, 0, {}, "needs 2 workers, has 1");
    s.set_waiting_for("workers");
    s.set_waiting_seconds_left(left);
    print(s);
  }
  EXPECT_EQ(Lines(out.str()), (std::vector<std::string>{
                                  "[quick] PENDING: needs 2 workers, has 1",
                                  "[quick] waiting for workers: 25 s left",
                                  "[quick] waiting for workers: 20 s left",
                                  "[quick] waiting for workers: 10 s left",
                                  "[quick] waiting for workers: 9 s left"}));
}

}  // namespace
}  // namespace lockstep
