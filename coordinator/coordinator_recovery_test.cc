// The coordinator's recovery without the network: lost, failed, leaving,
// replaced and stalled workers (RECOVERING, a new generation, or FAILED
// with the ranks named), the restart policy, and a restarted coordinator
// resuming from its journal.
#include <cstdint>
#include <limits>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/crc32c.h"
#include "base/file_util.h"
#include "coordinator/coordinator.h"
#include "coordinator/coordinator_test_fixture.h"
#include "coordinator/failures.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/journal.pb.h"
#include "rpc/rpc_util.h"

namespace lockstep {
namespace {

using testing::CoordinatorTest;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::kJob;
namespace v1 = lockstep::v1;

// kJob with a restart policy: {"max_restarts": M, "backoff_seconds": 0,
// "replacement_timeout_seconds": T}.
std::string JobWithRestarts(int max_restarts, double replacement_timeout = 60) {
  std::string job = kJob;
  job.replace(job.rfind('}'), 1,
              absl::StrFormat(", \"restart\": {\"max_restarts\": %d, "
                              "\"backoff_seconds\": 0, "
                              "\"replacement_timeout_seconds\": %g}}",
                              max_restarts, replacement_timeout));
  return job;
}

TEST_F(CoordinatorTest, LostWorkerRecoversAtTheNextGenerationWithANewWorker) {
  const std::string a = Register("hosta");
  Register("hostb");
  ASSERT_TRUE(c_->submissions().Submit(JobWithRestarts(2)).ok());
  // hostb stays silent for 0.4 s > the 0.3 s timeout; hosta beats.
  Pass(0.4);
  Beat(a, "j", 1);
  c_->Tick();
  absl::StatusOr<v1::JobStatus> s = c_->views().Get("j");
  EXPECT_EQ(s->state(), v1::RECOVERING);
  EXPECT_THAT(s->message(),
              HasSubstr("rank 1 (w2 on hostb pid 100, hostb:1) lost: no "
                        "heartbeat for"));
  EXPECT_THAT(s->message(), HasSubstr("needs 2 with >= 1 replicas each; 1 "
                                      "idle qualify"));
  v1::HeartbeatRequest r;
  r.set_worker_id("w2");
  EXPECT_TRUE(absl::IsNotFound(c_->registrations().Heartbeat(r).status()));
  // The survivor is told to stop generation 1, and reports it stopped.
  EXPECT_EQ(Beat(a, "j", 1).command(), v1::HeartbeatResponse::STOP);
  ASSERT_TRUE(c_->reports()
                  .Finish(Failed(a, 1, 0, "stopped by the coordinator",
                                 absl::StatusCode::kCancelled))
                  .ok());
  // A replacement registers: generation 2 starts at once (no back-off).
  const std::string c = Register("hostc");
  s = c_->views().Get("j");
  EXPECT_EQ(s->state(), v1::RUNNING);
  EXPECT_EQ(s->generation(), 2);
  EXPECT_EQ(s->restarts(), 1);
  v1::HeartbeatResponse hb = Beat(a);
  ASSERT_EQ(hb.command(), v1::HeartbeatResponse::RUN);
  EXPECT_EQ(hb.assignment().generation(), 2);
  EXPECT_EQ(hb.assignment().rank(), 0);
  EXPECT_EQ(hb.assignment().peers(1), "hostc:1");
  EXPECT_EQ(Beat(c).assignment().rank(), 1);
  EXPECT_THAT(s->events(s->events_size() - 1),
              HasSubstr("RUNNING generation 2 from step 0 (restart 1 of 2"));
}

TEST_F(CoordinatorTest, ALostWorkerIsListedForAStatedTimeThenForgotten) {
  CoordinatorOptions o = Options();
  o.lost_workers_listed_seconds = 0.5;
  c_ = std::make_unique<Coordinator>(o);
  const std::string a = Register("hosta");
  Register("hostb");
  ASSERT_TRUE(c_->submissions().Submit(JobWithRestarts(2)).ok());
  auto listed = [&] {
    std::vector<std::string> ids;
    const v1::ListJobsResponse all = c_->views().List();
    for (const v1::WorkerStatus& w : all.workers()) {
      ids.push_back(w.worker_id() + (w.alive() ? "" : " lost"));
    }
    return ids;
  };
  Pass(0.4);  // hostb silent past 0.3 s
  Beat(a, "j", 1);
  c_->Tick();
  ASSERT_EQ(c_->views().Get("j")->state(), v1::RECOVERING);
  // While the job that ranks it waits for a replacement, it stays listed
  // (its status names the lost rank), however long that takes.
  Pass(0.6);
  Beat(a, "j", 1);
  c_->Tick();
  EXPECT_THAT(listed(), ElementsAre("w1", "w2 lost"));
  EXPECT_EQ(c_->views().Get("j")->workers_size(), 2);
  // The job ends: no job ranks it any more, and its time is up.
  ASSERT_TRUE(c_->submissions().Cancel("j").ok());
  Beat(a, "j", 1);
  c_->Tick();
  EXPECT_THAT(listed(), ElementsAre("w1"));
  // Its old job's status still answers (no rank table lookup fails).
  EXPECT_EQ(c_->views().Get("j")->state(), v1::CANCELLED);
}

TEST_F(CoordinatorTest, BrokenStreamBlamesTheNeighbourAtOnce) {
  const std::string a = Register("hosta");
  const std::string b = Register("hostb");
  ASSERT_TRUE(c_->submissions().Submit(JobWithRestarts(1)).ok());
  v1::FinishRequest f =
      Failed(a, 1, 0, "the stream from rank 1 (hostb:1) broke",
             absl::StatusCode::kUnavailable);
  f.add_suspect_ranks(1);
  ASSERT_TRUE(c_->reports().Finish(f).ok());
  absl::StatusOr<v1::JobStatus> s = c_->views().Get("j");
  EXPECT_EQ(s->state(), v1::RECOVERING);
  EXPECT_THAT(s->message(),
              HasSubstr("rank 1 (w2 on hostb pid 100, hostb:1) lost: rank 0 "
                        "reports: the stream from rank 1 broke (the "
                        "coordinator's log has its words); recovering"));
  v1::HeartbeatRequest r;
  r.set_worker_id(b);
  EXPECT_TRUE(absl::IsNotFound(c_->registrations().Heartbeat(r).status()));
  // It was alive after all: it registers again and the job goes on.
  Register("hostb");
  EXPECT_EQ(c_->views().Get("j")->state(), v1::RUNNING);
  EXPECT_EQ(c_->views().Get("j")->generation(), 2);
  // A second loss exceeds max_restarts = 1: FAILED naming rank and host.
  f.set_generation(2);
  ASSERT_TRUE(c_->reports().Finish(f).ok());
  s = c_->views().Get("j");
  EXPECT_EQ(s->state(), v1::FAILED);
  EXPECT_THAT(s->message(), HasSubstr("rank 1 (w3 on hostb pid 100, hostb:1) "
                                      "lost"));
  EXPECT_THAT(s->message(),
              HasSubstr("no restart left (restart.max_restarts = 1)"));
}

TEST_F(CoordinatorTest, TheJobsOwnErrorFailsWithoutRestart) {
  const std::string a = Register("hosta");
  Register("hostb");
  ASSERT_TRUE(c_->submissions().Submit(JobWithRestarts(3)).ok());
  v1::FinishRequest f = Failed(a, 1, 0, "data.train_images: no such file",
                               absl::StatusCode::kNotFound);
  ASSERT_TRUE(c_->reports().Finish(f).ok());
  absl::StatusOr<v1::JobStatus> s = c_->views().Get("j");
  EXPECT_EQ(s->state(), v1::FAILED);
  EXPECT_THAT(s->message(), HasSubstr("rank 0 (w1 on hosta pid 100) failed: "
                                      "data.train_images: no such file"));
}

// With three ranks a broken stream is traced along the chain of suspects
// for a moment; a rank's own error meanwhile (its loss diverged) still
// ends the job, instead of being taken for a consequence of the break.
TEST_F(CoordinatorTest, TheJobsOwnErrorFailsItWhileABreakIsTraced) {
  const std::string a = Register("hosta");
  Register("hostb");
  const std::string c = Register("hostc");
  std::string job = JobWithRestarts(3);
  job.replace(job.find("\"workers\": 2"), 12, "\"workers\": 3");
  absl::StatusOr<v1::JobStatus> submitted = c_->submissions().Submit(job);
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  v1::FinishRequest f = Failed(a, 1, 0, "the stream from rank 2 broke",
                               absl::StatusCode::kUnavailable);
  f.add_suspect_ranks(2);
  ASSERT_TRUE(c_->reports().Finish(f).ok());
  ASSERT_EQ(c_->views().Get("j")->state(),
            v1::RUNNING);  // tracing: rank 2 may
                           // name its own suspect
  ASSERT_TRUE(c_->reports()
                  .Finish(Failed(c, 1, 2, "the loss diverged (nan at step 3)",
                                 absl::StatusCode::kInvalidArgument))
                  .ok());
  absl::StatusOr<v1::JobStatus> s = c_->views().Get("j");
  EXPECT_EQ(s->state(), v1::FAILED);
  EXPECT_THAT(s->message(), HasSubstr("rank 2 (w3 on hostc pid 100) failed: "
                                      "the loss diverged (nan at step 3)"));
}

TEST_F(CoordinatorTest, NoReplacementInTimeFailsNamingTheLostRank) {
  Register("hosta");
  const std::string b = Register("hostb");
  ASSERT_TRUE(c_->submissions().Submit(JobWithRestarts(3, 0.2)).ok());
  v1::FinishRequest f = Failed(b, 1, 1, "the worker is shutting down",
                               absl::StatusCode::kCancelled);
  ASSERT_TRUE(c_->reports().Finish(f).ok());
  EXPECT_EQ(c_->views().Get("j")->state(), v1::RECOVERING);
  Pass(0.25);
  c_->Tick();
  absl::StatusOr<v1::JobStatus> s = c_->views().Get("j");
  EXPECT_EQ(s->state(), v1::FAILED);
  EXPECT_THAT(s->message(),
              HasSubstr("rank 1 (w2 on hostb pid 100) failed: the worker is "
                        "shutting down; no replacement worker joined within"));
}

TEST_F(CoordinatorTest, AWorkerLeavingOnSigtermIsNotCountedAsAFailure) {
  const std::string a = Register("hosta");
  std::string b = Register("hostb");
  ASSERT_TRUE(c_->submissions().Submit(JobWithRestarts(1)).ok());
  // The same pod name leaves three times (rolling restarts, a requeued
  // batch job): never excluded, and no restart of the one allowed is
  // spent.
  for (int generation = 1; generation <= 3; ++generation) {
    v1::FinishRequest f =
        Failed(b, generation, 1,
               "stopped by the coordinator (the worker is shutting down)",
               absl::StatusCode::kCancelled);
    f.set_leaving(true);
    ASSERT_TRUE(c_->reports().Finish(f).ok());
    absl::StatusOr<v1::JobStatus> s = c_->views().Get("j");
    ASSERT_EQ(s->state(), v1::RECOVERING);
    EXPECT_THAT(s->message(), HasSubstr("rank 1 (w"));
    EXPECT_THAT(s->message(), HasSubstr("left: the worker is shutting down"));
    v1::HeartbeatRequest r;
    r.set_worker_id(b);
    EXPECT_TRUE(absl::IsNotFound(c_->registrations().Heartbeat(r).status()));
    b = Register("hostb");  // the restarted pod
    s = c_->views().Get("j");
    ASSERT_EQ(s->state(), v1::RUNNING);
    EXPECT_EQ(s->restarts(), 0);
    EXPECT_THAT(s->events(s->events_size() - 1),
                HasSubstr(absl::StrFormat(
                    "RUNNING generation %d from step 0 (after a planned "
                    "leave, ",
                    generation + 1)));
  }
  EXPECT_EQ(c_->views().Get("j")->generation(), 4);
  EXPECT_EQ(Beat(a).assignment().peers(1), "hostb:1");
}

TEST_F(CoordinatorTest, APlannedLeaveSurvivesACoordinatorRestartAndShutdown) {
  // A Slurm cancel: both workers drain and leave while the coordinator
  // shuts down (no new job, no new generation); the next coordinator,
  // from the journal, starts the job for new workers without counting a
  // restart.
  const std::string a = Register("hosta");
  const std::string b = Register("hostb");
  ASSERT_TRUE(c_->submissions().Submit(JobWithRestarts(0)).ok());
  c_->BeginShutdown();
  EXPECT_EQ(c_->views().RunningJobs(), 1);
  absl::StatusOr<v1::JobStatus> refused = c_->submissions().Submit(
      std::string(kJob).replace(std::string(kJob).find("\"j\""), 3, "\"k\""));
  EXPECT_TRUE(absl::IsUnavailable(refused.status())) << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("shutting down"));
  for (const std::string& w : {a, b}) {
    v1::FinishRequest f = Failed(w, 1, w == a ? 0 : 1,
                                 "the worker is shutting down: left after "
                                 "step 0",
                                 absl::StatusCode::kCancelled);
    f.set_leaving(true);
    ASSERT_TRUE(c_->reports().Finish(f).ok());
  }
  EXPECT_EQ(c_->views().RunningJobs(), 0);
  EXPECT_EQ(c_->views().Get("j")->state(), v1::RECOVERING);
  Register("hostc");
  Register("hostd");
  EXPECT_EQ(c_->views().Get("j")->state(),
            v1::RECOVERING);  // not while stopping
  ASSERT_TRUE(c_->SaveJournal().ok());
  c_ = std::make_unique<Coordinator>(Options());
  ASSERT_TRUE(c_->LoadJournal().ok());
  ASSERT_EQ(c_->views().Get("j")->state(), v1::RECOVERING);
  Register("hoste");
  Register("hostf");
  absl::StatusOr<v1::JobStatus> s = c_->views().Get("j");
  ASSERT_EQ(s->state(), v1::RUNNING);  // max_restarts 0, yet it runs
  EXPECT_EQ(s->generation(), 2);
  EXPECT_EQ(s->restarts(), 0);
  EXPECT_THAT(s->events(s->events_size() - 1),
              HasSubstr("RUNNING generation 2 from step 0 (after a planned "
                        "leave, "));
}

TEST_F(CoordinatorTest, ANameThatKeepsFailingIsNotHandedTheJobAgain) {
  const std::string a = Register("hosta");
  std::string b = Register("hostb");
  ASSERT_TRUE(c_->submissions().Submit(JobWithRestarts(5)).ok());
  for (int generation = 1; generation <= 2; ++generation) {
    v1::FinishRequest f = Failed(b, generation, 1, "out of memory",
                                 absl::StatusCode::kResourceExhausted);
    ASSERT_TRUE(c_->reports().Finish(f).ok());
    ASSERT_EQ(c_->views().Get("j")->state(), v1::RECOVERING);
    // The survivor's report lets the next generation start.
    ASSERT_TRUE(c_->reports()
                    .Finish(Failed(a, generation, 0, "stopped",
                                   absl::StatusCode::kCancelled))
                    .ok());
    c_->Tick();
  }
  // hostb failed it twice: both are idle but it is not used again.
  absl::StatusOr<v1::JobStatus> s = c_->views().Get("j");
  EXPECT_EQ(s->state(), v1::RECOVERING);
  EXPECT_THAT(s->message(), HasSubstr("1 excluded after failing this job 2 "
                                      "times"));
  Register("hostc");
  EXPECT_EQ(c_->views().Get("j")->state(), v1::RUNNING);
  EXPECT_EQ(Beat(a).assignment().peers(1), "hostc:1");
}

TEST_F(CoordinatorTest, ARestartedProcessUnderTheSameNameReplacesTheOld) {
  const std::string a = Register("hosta");
  const std::string b = Register("hostb");
  ASSERT_TRUE(c_->submissions().Submit(JobWithRestarts(3)).ok());
  v1::RegisterRequest r;
  r.set_protocol_version(kProtocolVersion);
  r.set_host("hostb");
  r.set_pid(200);  // a new process, same collective address (= name)
  r.set_collective_address("hostb:1");
  r.set_replicas(1);
  absl::StatusOr<v1::RegisterResponse> reg =
      c_->registrations().Register(r, "peer");
  ASSERT_TRUE(reg.ok()) << reg.status();
  absl::StatusOr<v1::JobStatus> s = c_->views().Get("j");
  ASSERT_TRUE(s.ok()) << s.status();
  // Waits for what the survivor kept in memory (its Finish report).
  EXPECT_EQ(s->state(), v1::RECOVERING);
  EXPECT_EQ(s->waiting_for(),
            "1 surviving rank to report what it kept in memory");
  EXPECT_THAT(s->message(), HasSubstr("; recovering: "));
  ASSERT_TRUE(c_->reports()
                  .Finish(Failed(a, 1, 0, "stopped by the coordinator",
                                 absl::StatusCode::kCancelled))
                  .ok());
  s = c_->views().Get("j");
  EXPECT_EQ(s->state(), v1::RUNNING);  // generation 2 with the new process
  EXPECT_EQ(s->generation(), 2);
  EXPECT_THAT(s->events(), ::testing::Contains(HasSubstr(
                               "replaced by a new registration of \"hostb:1\" "
                               "(pid 200)")));
  v1::HeartbeatRequest hb;
  hb.set_worker_id(b);
  absl::Status old = c_->registrations().Heartbeat(hb).status();
  EXPECT_TRUE(absl::IsFailedPrecondition(old)) << old;
  EXPECT_THAT(old.message(), HasSubstr("was replaced by w3"));
  int members = 0;
  const v1::ListJobsResponse list = c_->views().List();
  for (const auto& w : list.workers()) members += w.alive();
  EXPECT_EQ(members, 2);
}

// Once the replaced record is forgotten (or the coordinator restarted),
// the old process of a name, heard again (it was cut off), is told its id
// is unknown and registers again: it started before the name's holder, so
// it is refused and the holder keeps its rank. A later process still takes
// the name over.
TEST_F(CoordinatorTest, AnOlderProcessDoesNotTakeANameBack) {
  const std::string a = Register("hosta");
  v1::RegisterRequest older = testing::TestRegistration("hostb");
  older.set_started_unix_micros(1000);
  ASSERT_TRUE(c_->registrations().Register(older, "peer").ok());
  ASSERT_TRUE(c_->submissions().Submit(JobWithRestarts(3)).ok());
  v1::RegisterRequest newer = older;
  newer.set_pid(200);
  newer.set_started_unix_micros(2000);
  absl::StatusOr<v1::RegisterResponse> holder =
      c_->registrations().Register(newer, "peer");
  ASSERT_TRUE(holder.ok()) << holder.status();
  ASSERT_TRUE(c_->reports()
                  .Finish(Failed(a, 1, 0, "stopped by the coordinator",
                                 absl::StatusCode::kCancelled))
                  .ok());
  ASSERT_EQ(c_->views().Get("j")->generation(),
            2);                              // with the holder as rank 1
  Pass(120);                                 // the replaced record is forgotten
  Beat(holder->worker_id());
  Beat(a);
  c_->Tick();
  absl::StatusOr<v1::RegisterResponse> back =
      c_->registrations().Register(older, "peer");
  ASSERT_TRUE(absl::IsFailedPrecondition(back.status())) << back.status();
  EXPECT_EQ(back.status().message(),
            "the name \"hostb:1\" is held by " + holder->worker_id() +
                " on hostb pid 200, which started after this process (pid "
                "100 on hostb): an older process does not take a name back; "
                "two processes must not share a --name");
  // The holder keeps its rank.
  absl::StatusOr<v1::JobStatus> s = c_->views().Get("j");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->state(), v1::RUNNING) << s->message();
  EXPECT_EQ(s->workers(1).worker_id(), holder->worker_id());
  EXPECT_EQ(Beat(holder->worker_id()).command(), v1::HeartbeatResponse::RUN);
  v1::RegisterRequest later = older;
  later.set_pid(300);
  later.set_started_unix_micros(3000);
  EXPECT_TRUE(c_->registrations().Register(later, "peer").ok());
}

TEST_F(CoordinatorTest, ASurvivorsMemoryStartsTheNextGeneration) {
  const std::string a = Register("hosta");
  const std::string b = Register("hostb");
  const std::string c = Register("hostc");
  ASSERT_TRUE(c_->submissions()
                  .Submit(JobWithRestarts(3))
                  .ok());  // two workers: a and b
  // The idle c claims rank 1 and a later step kept in memory: refused, and
  // its claim is not offered to the next generation.
  v1::FinishRequest fake = Failed(c, 1, 1, "the stream from rank 0 broke",
                                  absl::StatusCode::kUnavailable);
  fake.set_held_step(9);
  fake.set_held_fingerprint("ffffffffffffffffffffffffffffffff");
  EXPECT_TRUE(absl::IsInvalidArgument(c_->reports().Finish(fake)));
  // b's stream breaks; a kept step 7, the last it completed.
  v1::FinishRequest f = Failed(a, 1, 0, "the stream from rank 1 broke",
                               absl::StatusCode::kUnavailable);
  f.add_suspect_ranks(1);
  f.set_held_step(7);
  f.set_held_fingerprint("00112233445566778899aabbccddeeff");
  ASSERT_TRUE(c_->reports().Finish(f).ok());
  c_->Tick();
  absl::StatusOr<v1::JobStatus> s = c_->views().Get("j");
  ASSERT_EQ(s->state(), v1::RUNNING) << s->message();  // with hostc
  EXPECT_EQ(s->generation(), 2);
  EXPECT_EQ(s->step(), 7);
  EXPECT_THAT(s->events(s->events_size() - 1),
              HasSubstr("RUNNING generation 2 from step 7 (rank 0's memory; "
                        "the latest checkpoint is step 0) (restart 1 of 3"));
  EXPECT_THAT(s->events(s->events_size() - 1),
              HasSubstr("; only step 8, which the failure broke, is done "
                        "again)"));
  for (const std::string& w : {a, c}) {
    const v1::Assignment got = Beat(w).assignment();
    EXPECT_EQ(got.start_step(), 7);
    EXPECT_EQ(got.memory_step(), 7);
    EXPECT_EQ(got.memory_donor(), 0);
    EXPECT_EQ(got.memory_fingerprint(), "00112233445566778899aabbccddeeff");
  }
  // A coordinator restarted before c took its assignment hands it the
  // same one: where the generation starts from memory is journaled.
  c_ = std::make_unique<Coordinator>(Options());
  ASSERT_TRUE(c_->LoadJournal().ok());
  const v1::Assignment again = Beat(c).assignment();
  EXPECT_EQ(again.generation(), 2);
  EXPECT_EQ(again.memory_step(), 7);
  EXPECT_EQ(again.memory_donor(), 0);
  EXPECT_EQ(again.memory_fingerprint(), "00112233445566778899aabbccddeeff");
  // Generation 2 fails with nothing kept (GPU replicas, say): generation 3
  // goes back to the checkpoint (none: step 0), not to an older memory.
  f = Failed(c, 2, 1, "out of memory", absl::StatusCode::kResourceExhausted);
  ASSERT_TRUE(c_->reports().Finish(f).ok());
  ASSERT_TRUE(
      c_->reports()
          .Finish(Failed(a, 2, 0, "stopped", absl::StatusCode::kCancelled))
          .ok());
  Register("hostd");
  s = c_->views().Get("j");
  ASSERT_EQ(s->state(), v1::RUNNING);
  EXPECT_EQ(s->generation(), 3);
  EXPECT_EQ(s->step(), 0);
  const v1::Assignment third = Beat(a).assignment();
  EXPECT_EQ(third.start_step(), 0);
  EXPECT_EQ(third.memory_step(), 0);
  (void)b;
}

TEST_F(CoordinatorTest, WorkersDroppedWhileTrainingOnOfferWhatTheyKept) {
  Register("hosta");
  Register("hostb");
  ASSERT_TRUE(c_->submissions().Submit(JobWithRestarts(3)).ok());
  // Cut off from the coordinator (no heartbeats past the 0.3 s timeout):
  // both are lost while their ring trains on.
  Pass(0.4);
  c_->Tick();
  ASSERT_EQ(c_->views().Get("j")->state(), v1::RECOVERING);
  // Told they were dropped, each registers again with what it kept.
  for (const auto& [host, step] :
       {std::pair<std::string, int>{"hosta", 41}, {"hostb", 42}}) {
    v1::RegisterRequest r = testing::TestRegistration(host);
    r.set_pid(300);
    r.set_held_job("j");
    r.set_held_generation(1);
    r.set_held_step(step);
    r.set_held_fingerprint(std::string(32, host == "hosta" ? 'a' : 'b'));
    ASSERT_TRUE(c_->registrations().Register(r, "peer").ok());
  }
  absl::StatusOr<v1::JobStatus> s = c_->views().Get("j");
  ASSERT_EQ(s->state(), v1::RUNNING) << s->message();
  EXPECT_EQ(s->generation(), 2);
  EXPECT_EQ(s->step(), 42);
  EXPECT_THAT(s->events(s->events_size() - 1),
              HasSubstr("RUNNING generation 2 from step 42 (rank 1's memory; "
                        "the latest checkpoint is step 0)"));
  // A state kept in another generation is not taken.
  ASSERT_TRUE(c_->reports()
                  .Finish(Failed("w4", 2, 1, "out of memory",
                                 absl::StatusCode::kResourceExhausted))
                  .ok());
  v1::RegisterRequest late = testing::TestRegistration("hostc");
  late.set_held_job("j");
  late.set_held_generation(1);
  late.set_held_step(99);
  late.set_held_fingerprint(std::string(32, 'c'));
  ASSERT_TRUE(c_->registrations().Register(late, "peer").ok());
  ASSERT_TRUE(
      c_->reports()
          .Finish(Failed("w3", 2, 0, "stopped", absl::StatusCode::kCancelled))
          .ok());
  s = c_->views().Get("j");
  ASSERT_EQ(s->state(), v1::RUNNING) << s->message();
  EXPECT_EQ(s->generation(), 3);
  EXPECT_EQ(s->step(), 0);
}

TEST_F(CoordinatorTest, AStalledRingNamesTheRankStepAndBucketThenDropsIt) {
  CoordinatorOptions o = Options();
  o.hang_report_seconds = 0.5;
  o.hang_timeout_seconds = 2;
  c_ = std::make_unique<Coordinator>(o);
  const std::string a = Register("hosta");
  const std::string b = Register("hostb");
  ASSERT_TRUE(c_->submissions().Submit(JobWithRestarts(3)).ok());
  v1::HeartbeatRequest r;
  r.set_worker_id(a);
  r.set_job("j");
  r.set_generation(1);
  r.mutable_wait()->set_from_rank(1);
  r.mutable_wait()->set_step(130);
  r.mutable_wait()->set_bucket(2);
  r.mutable_wait()->set_seconds(1.5);
  ASSERT_TRUE(c_->registrations().Heartbeat(r).ok());
  Beat(b, "j", 1);  // alive, but its ring waits on it
  c_->Tick();
  absl::StatusOr<v1::JobStatus> s = c_->views().Get("j");
  EXPECT_EQ(s->state(), v1::RUNNING);
  EXPECT_THAT(s->message(),
              HasSubstr("the ring is stalled: rank 0 has waited 1.5 s for "
                        "rank 1 at step 130 (gradient bucket 2)"));
  EXPECT_THAT(s->workers(0).waiting(), HasSubstr("for rank 1 at step 130"));
  r.mutable_wait()->set_seconds(2.5);
  ASSERT_TRUE(c_->registrations().Heartbeat(r).ok());
  Beat(b, "j", 1);
  c_->Tick();
  s = c_->views().Get("j");
  EXPECT_EQ(s->state(), v1::RECOVERING);
  EXPECT_THAT(s->message(),
              HasSubstr("rank 1 (w2 on hostb pid 100, hostb:1) lost: hung: "
                        "rank 0 has waited 2.5 s for rank 1 at step 130 "
                        "(gradient bucket 2)"));
}

TEST_F(CoordinatorTest, ARestartedCoordinatorResumesFromTheJournal) {
  const std::string a = Register("hosta");
  const std::string b = Register("hostb");
  ASSERT_TRUE(c_->submissions().Submit(kJob).ok());
  const CoordinatorOptions o = Options();
  c_ = std::make_unique<Coordinator>(o);  // the old one "died"
  ASSERT_TRUE(c_->LoadJournal().ok());
  absl::StatusOr<v1::JobStatus> s = c_->views().Get("j");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->state(), v1::RUNNING);
  EXPECT_EQ(s->generation(), 1);
  // Its workers go on heartbeating under their ids, nothing is stopped.
  EXPECT_EQ(Beat(a, "j", 1).command(), v1::HeartbeatResponse::NONE);
  EXPECT_EQ(Beat(b, "j", 1).command(), v1::HeartbeatResponse::NONE);
  // The journaled job is the name's: the same spec returns it.
  bool existing = false;
  ASSERT_TRUE(c_->submissions().Submit(kJob, SubmitMode::kNew, &existing).ok());
  EXPECT_TRUE(existing);
  // A new worker gets the next id, not a reused one.
  EXPECT_EQ(Register("hostc"), "w3");
  // A damaged journal is refused, naming the file.
  const std::string path = c_->journal_store().Where();
  std::string bytes = *ReadFile(path);
  bytes[bytes.size() / 2] ^= 1;
  ASSERT_TRUE(WriteFileAtomic(path, bytes).ok());
  Coordinator fresh(o);
  absl::Status load = fresh.LoadJournal();
  EXPECT_TRUE(absl::IsDataLoss(load)) << load;
  EXPECT_THAT(load.message(), HasSubstr(path + " is damaged (CRC mismatch)"));
}

// A rank whose end is reported is not handed its generation again by a
// coordinator restarted before the other ranks ended; the job then ends
// with the first rank's result (result.json is made from rank 0's report).
TEST_F(CoordinatorTest, ARestartedCoordinatorKeepsTheRanksThatFinished) {
  Register("hosta");
  Register("hostb");
  ASSERT_TRUE(c_->submissions().Submit(kJob).ok());
  ASSERT_TRUE(c_->reports().Finish(Finished(0, 0.75)).ok());
  const std::string first = RankHolder(0);
  c_ = std::make_unique<Coordinator>(Options());  // the old one "died"
  ASSERT_TRUE(c_->LoadJournal().ok());
  // Rank 0 finished and idles: nothing to run.
  const v1::HeartbeatResponse idle = Beat(first);
  EXPECT_EQ(idle.command(), v1::HeartbeatResponse::NONE)
      << idle.assignment().ShortDebugString();
  ASSERT_TRUE(c_->reports().Finish(Finished(1, 0.5)).ok());
  absl::StatusOr<v1::JobStatus> s = c_->views().Get("j");
  EXPECT_EQ(s->state(), v1::SUCCEEDED) << s->message();
  EXPECT_EQ(s->test_accuracy(), 0.75);
}

// The journal file at `path` with its payload edited by `edit` and framed
// again ("LSJRNL01", the payload's CRC32C little-endian, the payload), the
// way a damaged but well-framed journal would reach LoadJournal.
template <typename Edit>
void EditJournal(const std::string& path, Edit edit) {
  std::string bytes = *ReadFile(path);
  v1::Journal j;
  ASSERT_TRUE(j.ParseFromString(bytes.substr(12)));
  edit(j);
  const std::string payload = j.SerializeAsString();
  const uint32_t crc = Crc32c(payload.data(), payload.size());
  bytes.resize(8);
  for (int i = 0; i < 4; ++i)
    bytes.push_back(static_cast<char>(crc >> (8 * i)));
  ASSERT_TRUE(WriteFileAtomic(path, bytes + payload).ok());
}

// A rank's worker lost before the restart (the journal keeps only live
// workers): a running job keeps its rank table whole with a lost stand-in
// whose heartbeat age is counted from the restart (it read 56 years, from
// 1970); a finished job's ranks are history and add no stand-in to the
// worker list.
TEST_F(CoordinatorTest, ARankLostBeforeARestartIsListedOnlyWhileItsJobRuns) {
  Register("hosta");
  Register("hostb");
  ASSERT_TRUE(c_->submissions().Submit(kJob).ok());
  const CoordinatorOptions o = Options();
  ASSERT_TRUE(c_->SaveJournal().ok());
  const std::string path = c_->journal_store().Where();
  const std::string good = *ReadFile(path);
  auto drop_second_worker = [](v1::Journal& j) {
    j.mutable_workers()->RemoveLast();
  };
  EditJournal(path, drop_second_worker);
  {
    Coordinator running(o);
    ASSERT_TRUE(running.LoadJournal().ok());
    const v1::ListJobsResponse l = running.views().List();
    ASSERT_EQ(l.workers_size(), 2);
    const v1::WorkerStatus& gone = l.workers(1);
    EXPECT_FALSE(gone.alive());
    EXPECT_EQ(gone.pid(), 0);
    EXPECT_LT(gone.heartbeat_age_seconds(), 60.0);
  }
  ASSERT_TRUE(WriteFileAtomic(path, good).ok());
  EditJournal(path, [&](v1::Journal& j) {
    drop_second_worker(j);
    j.mutable_jobs(0)->mutable_status()->set_state(v1::SUCCEEDED);
  });
  Coordinator finished(o);
  ASSERT_TRUE(finished.LoadJournal().ok());
  const v1::ListJobsResponse l = finished.views().List();
  EXPECT_EQ(l.workers_size(), 1);
}

// Found by journal_fuzzer: counters at int64's end overflowed at the next
// write or registration, and a worker naming a job with an empty rank table
// divided by a world of 0 in its status.
TEST_F(CoordinatorTest, AJournalsCountersAndRanksAreCheckedBeforeUse) {
  Register("hosta");
  Register("hostb");
  ASSERT_TRUE(c_->submissions().Submit(kJob).ok());
  const CoordinatorOptions o = Options();
  c_ = std::make_unique<Coordinator>(o);
  ASSERT_TRUE(c_->LoadJournal().ok());
  const std::string path = c_->journal_store().Where();
  const std::string good = *ReadFile(path);

  EditJournal(path, [](v1::Journal& j) {
    j.set_sequence(std::numeric_limits<int64_t>::max());
  });
  absl::Status load = Coordinator(o).LoadJournal();
  EXPECT_TRUE(absl::IsDataLoss(load)) << load;
  EXPECT_THAT(load.message(),
              HasSubstr("is damaged (sequence 9223372036854775807 out of "
                        "range)"));

  // At the bound (2^62) it loads, and so does the journal it rewrites (the
  // sequence stays at the bound).
  ASSERT_TRUE(WriteFileAtomic(path, good).ok());
  EditJournal(path, [](v1::Journal& j) { j.set_sequence(int64_t{1} << 62); });
  {
    Coordinator at_bound(o);
    ASSERT_TRUE(at_bound.LoadJournal().ok());
  }
  load = Coordinator(o).LoadJournal();
  EXPECT_TRUE(load.ok()) << load;

  ASSERT_TRUE(WriteFileAtomic(path, good).ok());
  EditJournal(path, [](v1::Journal& j) { j.set_next_worker(-5); });
  load = Coordinator(o).LoadJournal();
  EXPECT_TRUE(absl::IsDataLoss(load)) << load;
  EXPECT_THAT(load.message(),
              HasSubstr("is damaged (next worker number -5 out of range)"));

  // A finished report or a memory donor outside the job's two ranks.
  ASSERT_TRUE(WriteFileAtomic(path, good).ok());
  EditJournal(path, [](v1::Journal& j) {
    j.mutable_jobs(0)->add_finished()->set_rank(7);
  });
  load = Coordinator(o).LoadJournal();
  EXPECT_TRUE(absl::IsDataLoss(load)) << load;
  EXPECT_THAT(load.message(),
              HasSubstr("is damaged (job j: a finish report of rank 7 in a "
                        "world of 2)"));
  ASSERT_TRUE(WriteFileAtomic(path, good).ok());
  EditJournal(path, [](v1::Journal& j) {
    j.mutable_jobs(0)->set_memory_step(30);
    j.mutable_jobs(0)->set_memory_donor(2);
  });
  load = Coordinator(o).LoadJournal();
  EXPECT_TRUE(absl::IsDataLoss(load)) << load;
  EXPECT_THAT(load.message(),
              HasSubstr("is damaged (job j: memory donor rank 2 in a world of "
                        "2)"));

  // Rank 1 of job j, whose journaled rank table is empty: loaded, listed
  // without a shard (there is no world to split the batch by).
  ASSERT_TRUE(WriteFileAtomic(path, good).ok());
  EditJournal(path, [](v1::Journal& j) {
    ASSERT_EQ(j.jobs_size(), 1);
    j.mutable_jobs(0)->clear_ranks();
  });
  Coordinator damaged(o);
  ASSERT_TRUE(damaged.LoadJournal().ok());
  const v1::ListJobsResponse list = damaged.views().List();
  ASSERT_EQ(list.workers_size(), 2);
  for (const v1::WorkerStatus& w : list.workers()) {
    EXPECT_EQ(w.job(), "j");
    EXPECT_EQ(w.shard(), "") << w.name();
  }
}

// A reason is cut once, with one note at its end, also when it quotes a
// reason already cut (the message read "(the coordinator's log has its …
// (the coordinator's log has the rest)").
TEST(BriefReasonTest, OneNoteAtTheEndHoweverOftenCut) {
  const std::string more = " … (the coordinator's log has the rest)";
  EXPECT_EQ(BriefReason("short"), "short");
  const std::string inner =
      BriefReason(std::string(100, 'a') + " " + std::string(100, 'b'));
  EXPECT_EQ(inner, std::string(100, 'a') + more);
  const std::string outer =
      BriefReason("could not connect to rank 2: " + inner);
  EXPECT_EQ(outer.find(more), outer.size() - more.size()) << outer;
  EXPECT_EQ(outer.find("log has"), outer.rfind("log has")) << outer;
  // Short enough once the inner note is gone: kept whole, one note.
  EXPECT_EQ(BriefReason("a: " + inner), "a: " + std::string(100, 'a') + more);
}

}  // namespace
}  // namespace lockstep
