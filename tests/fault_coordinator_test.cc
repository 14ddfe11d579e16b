// Fault injection on the coordinator and its storage (DESIGN "Failure and
// rejoin"): kill -9 the coordinator and start it again on the same
// storage, corrupt the latest checkpoint, and run out of file space during
// checkpoint writes. Each test asserts the job's outcome, the reason the
// coordinator reports and that the final parameters are byte-identical to
// an uninterrupted run of the same job. The fixture is in fault_fixture.h.
#include <dirent.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "core/checkpoint/checkpoint.h"
#include "gtest/gtest.h"
#include "tests/fault_fixture.h"
#include "tests/subprocess.h"

namespace lockstep {
namespace {

using fault_fixture::FaultJob;
using fault_fixture::FaultTest;
using testing::ReadFileOrEmpty;
using testing::Runfile;
using testing::RunResult;
using testing::Subprocess;
using testing::WriteStringToFile;

TEST_F(FaultTest, CoordinatorKilledAndRestartedResumesItsJob) {
  const std::string reference = ReferenceFingerprint();
  Start();
  // With the sample audit on: the ranks wait at their next record while
  // the coordinator is down, and no record is lost or taken twice.
  const nlohmann::json job = fault_fixture::Audited(FaultJob());
  ASSERT_EQ(Client({"submit", WriteJob(job)}).exit.exit_code, 0);
  // A watcher started before the crash rides through it.
  std::vector<std::string> argv = {Runfile("client/lockstep"), "watch", "ft",
                                   "--coordinator", cluster_->address()};
  Subprocess watcher(argv, dir_);
  WaitForStep(150);
  cluster_->coordinator().Signal(SIGKILL);
  ASSERT_TRUE(cluster_->coordinator().Wait(10).exited);
  const CheckpointStore store(cluster_->storage() + "/jobs/ft/checkpoints", 3);
  const std::vector<std::string> before = store.ListSteps();
  ASSERT_FALSE(before.empty());
  // The outage lasts until a worker has found the coordinator gone: it
  // waits at its next sample record, retrying every second. Either one:
  // a rank whose record was kept just before the kill goes on to the
  // step's collective and waits there for the other.
  const std::string retrying = "retrying the sample record every second";
  bool found = false;
  for (int i = 0; i < 60 && !found; ++i) {
    for (int w = 0; w < 2 && !found; ++w) {
      found = cluster_->worker(w).WaitForOutput(retrying, 0.25);
    }
  }
  ASSERT_TRUE(found) << cluster_->worker(0).Stdout()
                     << cluster_->worker(1).Stdout();
  ASSERT_TRUE(cluster_->RestartCoordinator()) << cluster_->error();
  const testing::ExitInfo e = watcher.Wait(180);
  ASSERT_TRUE(e.exited) << watcher.Stdout();
  EXPECT_EQ(e.exit_code, 0) << watcher.Stdout() << watcher.Stderr();
  EXPECT_NE(watcher.Stderr().find("reconnecting"), std::string::npos)
      << watcher.Stderr();
  EXPECT_NE(watcher.Stdout().find("coordinator restarted: RUNNING at "
                                  "generation 1 taken over from the journal"),
            std::string::npos)
      << watcher.Stdout();
  EXPECT_NE(watcher.Stdout().find("job ft SUCCEEDED: 1000 steps"),
            std::string::npos)
      << watcher.Stdout();
  EXPECT_NE(cluster_->coordinator().Stdout().find(
                "2 workers expected to heartbeat again"),
            std::string::npos)
      << cluster_->coordinator().Stdout();
  nlohmann::json res = Result();
  ASSERT_TRUE(res.is_object());
  EXPECT_EQ(res["fingerprint"], reference);
  // No restart was needed: the workers waited out the outage in
  // generation 1 (without the audit they train on through it).
  RunResult s = Client({"status", "ft"});
  EXPECT_NE(s.out.find("job ft: SUCCEEDED (generation 1)"), std::string::npos)
      << s.out;
  // Every committed checkpoint is whole: the latest verifies and is the
  // last step; nothing committed before the crash was damaged.
  std::vector<std::string> warnings;
  absl::StatusOr<LoadedCheckpoint> latest = store.LoadLatest(&warnings);
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(latest->state.step, 1000);
  EXPECT_TRUE(warnings.empty());
  // The restarted coordinator knows the finished job from its journal:
  // submitting its name with the same spec again returns that job and runs
  // nothing; --resume resumes at its last step and ends at once with the
  // same bytes.
  ExpectExactlyOnce(4);
  RunResult again = Client({"submit", WriteJob(job), "--wait"});
  EXPECT_EQ(again.exit.exit_code, 0) << again.out << again.err;
  EXPECT_NE(again.out.find("job ft was submitted before with this spec and "
                           "ended SUCCEEDED: 1000 steps"),
            std::string::npos)
      << again.out;
  RunResult resumed = Client({"submit", WriteJob(job), "--resume", "--wait"});
  EXPECT_EQ(resumed.exit.exit_code, 0) << resumed.out << resumed.err;
  EXPECT_NE(resumed.out.find("RUNNING generation 2 from step 1000"),
            std::string::npos)
      << resumed.out;
  EXPECT_EQ(Result()["fingerprint"], reference);
}

TEST_F(FaultTest, DamagedLatestCheckpointFallsBackToThePreviousOne) {
  const std::string reference = ReferenceFingerprint();
  Start();
  // 3 of the 4 epochs (750 steps), then damage the step-750 checkpoint.
  RunResult first =
      Client({"submit", WriteJob(FaultJob({{"epochs", 3}})), "--wait"});
  ASSERT_EQ(first.exit.exit_code, 0) << first.out << first.err;
  const std::string dir = cluster_->storage() + "/jobs/ft/checkpoints";
  const std::string model = dir + "/step-00000750/model.safetensors";
  std::string bytes = ReadFileOrEmpty(model);
  ASSERT_GT(bytes.size(), 1000u);
  bytes[bytes.size() - 100] ^= 0x40;  // one flipped bit in a tensor
  WriteStringToFile(model, bytes);
  // The full job resumes from step 700, says why, and ends with the bytes
  // of the uninterrupted run.
  RunResult second =
      Client({"submit", WriteJob(FaultJob()), "--resume", "--wait"});
  ASSERT_EQ(second.exit.exit_code, 0) << second.out << second.err;
  EXPECT_TRUE(std::regex_search(
      second.out,
      std::regex(R"(warning: .*step-00000750.*(CRC|crc|checksum))")))
      << second.out;
  EXPECT_NE(second.out.find("RUNNING generation 2 from step 700"),
            std::string::npos)
      << second.out;
  EXPECT_EQ(Result()["fingerprint"], reference);
}

// The checkpoint folder's entries (none when it is missing).
std::vector<std::string> Entries(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string n = e->d_name;
      if (n != "." && n != "..") out.push_back(n);
    }
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST_F(FaultTest, OutOfFileSpaceForEveryCheckpointFailsTheJobNotItsPointer) {
  Start();
  // The coordinator may write files of at most 64 KiB: each checkpoint
  // (about 0.4 MB) fails half-way, the journal and summaries fit.
  struct rlimit limit = {64 << 10, 64 << 10};
  ASSERT_EQ(
      prlimit(cluster_->coordinator().pid(), RLIMIT_FSIZE, &limit, nullptr), 0);
  // One epoch (250 steps): training is not stopped for want of the
  // periodic checkpoints, each failure is reported, but without its final
  // checkpoint the job has not succeeded: every restart (from the
  // survivors' memory of step 250) tries it again, then the job fails
  // naming it.
  RunResult r =
      Client({"submit", WriteJob(FaultJob({{"epochs", 1}})), "--wait"});
  EXPECT_NE(r.exit.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(std::regex_search(
      r.out,
      std::regex(R"(checkpoint step 50 not committed: .*File too large)")))
      << r.out;
  EXPECT_TRUE(std::regex_search(
      r.out,
      std::regex(R"(checkpoint step 250 not committed: .*File too large)")))
      << r.out;
  // No worker is blamed (none is excluded): each restart starts from the
  // memory of step 250 of the rank whose commit failed.
  EXPECT_TRUE(std::regex_search(
      r.out, std::regex(R"(job ft FAILED: the final checkpoint \(step 250\) )"
                        R"(was not committed: .*no restart left)")))
      << r.out;
  EXPECT_TRUE(std::regex_search(
      r.out,
      std::regex(R"(RUNNING generation 4 from step 250 \(rank \d's )"
                 R"(memory; the latest checkpoint is step 0\) \(restart )"
                 R"(3 of 3, [0-9.]+ s after the failure; nothing is )"
                 R"(done again: the state of the last step\))")))
      << r.out;
  EXPECT_EQ(r.out.find("excluded"), std::string::npos) << r.out;
  // No half-written checkpoint is left or pointed to, and no result.
  const std::string dir = cluster_->storage() + "/jobs/ft/checkpoints";
  EXPECT_EQ(ReadFileOrEmpty(dir + "/latest"), "");
  const std::vector<std::string> left = Entries(dir);
  EXPECT_TRUE(left.empty()) << left.size() << " entries, first " << left[0];
  EXPECT_FALSE(Result().is_object());
}

TEST_F(FaultTest, FinalCheckpointRefusedOnceIsCommittedFromMemory) {
  const std::string reference = ReferenceFingerprint();
  Start();
  std::vector<std::string> argv = {Runfile("client/lockstep"),
                                   "submit",
                                   WriteJob(FaultJob()),
                                   "--wait",
                                   "--coordinator",
                                   cluster_->address()};
  Subprocess submit(argv, dir_);
  WaitForStep(900);
  // Storage fills up before the last step (1000): its checkpoint fails.
  struct rlimit limit = {64 << 10, RLIM_INFINITY};
  ASSERT_EQ(
      prlimit(cluster_->coordinator().pid(), RLIMIT_FSIZE, &limit, nullptr), 0);
  ASSERT_TRUE(submit.WaitForOutput(
      "the final checkpoint (step 1000) was not committed", 60))
      << submit.Stdout() << submit.Stderr();
  // Space again: the next generation starts from the memory of step 1000
  // and commits it (restarts are 0.2 s apart; three are allowed).
  limit = {RLIM_INFINITY, RLIM_INFINITY};
  ASSERT_EQ(
      prlimit(cluster_->coordinator().pid(), RLIMIT_FSIZE, &limit, nullptr), 0);
  const testing::ExitInfo e = submit.Wait(120);
  ASSERT_TRUE(e.exited);
  EXPECT_EQ(e.exit_code, 0) << submit.Stdout() << submit.Stderr();
  const std::string out = submit.Stdout();
  EXPECT_TRUE(
      std::regex_search(out, std::regex(R"(generation \d+ from step 1000)")))
      << out;
  const nlohmann::json result = Result();
  ASSERT_TRUE(result.is_object()) << out;
  EXPECT_EQ(result["fingerprint"], reference);
  EXPECT_NE(result["checkpoint"].get<std::string>().find("step-00001000"),
            std::string::npos)
      << result.dump();
  const std::string dir = cluster_->storage() + "/jobs/ft/checkpoints";
  EXPECT_EQ(ReadFileOrEmpty(dir + "/latest"), "step-00001000\n");
}

}  // namespace
}  // namespace lockstep
