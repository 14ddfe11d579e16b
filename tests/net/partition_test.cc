// Network drills (DESIGN "Failure and rejoin") with every daemon on a host
// of its own: the coordinator in namespace 0, workers in 1.., joined by a
// switch (tests/net/netlab.h). A link is cut with the switch side of its
// veth down: packets vanish, TCP connections stay open with nobody
// answering, as in a real partition, not a killed process. Each drill ends
// with job ft SUCCEEDED on the fingerprint of an uninterrupted
// `lockstep train`, and prints its figures (detection, steps redone, time
// to recover) for the table in docs/failure.md.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/fault_fixture.h"
#include "tests/net/netlab.h"
#include "tests/subprocess.h"

namespace lockstep {
namespace {

using fault_fixture::Clock;
using fault_fixture::FaultJob;
using fault_fixture::Since;
using testing::NetLab;
using testing::RunResult;
using testing::Subprocess;

constexpr int kCoordinatorHost = 0;
constexpr char kPort[] = "7070";

class NetDrillTest : public fault_fixture::FaultTest {
 protected:
  void SetUp() override {
    const std::string missing = NetLab::MissingTools();
    ASSERT_EQ(missing, "") << missing;
    const std::string why = NetLab::Unavailable();
    if (!why.empty()) GTEST_SKIP() << why;
  }
  void TearDown() override {
    // Processes first: a namespace with a process in it outlives `ip
    // netns del`.
    workers_.clear();
    coordinator_.reset();
    lab_.reset();
  }

  // The coordinator on host 0 and `workers` workers on hosts 1..; `hosts`
  // namespaces in all (spares for replacements).
  void StartNet(int hosts, int workers,
                const std::vector<std::string>& coordinator_args = {}) {
    dir_ = testing::NewTempDir(
        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    lab_ = std::make_unique<NetLab>(hosts);
    ASSERT_TRUE(lab_->ok()) << lab_->error();
    address_ = lab_->address(kCoordinatorHost) + ":" + kPort;
    std::vector<std::string> argv = {testing::Runfile("client/lockstep"),
                                     "coordinator",
                                     "--listen",
                                     address_,
                                     "--storage",
                                     dir_ + "/storage",
                                     "--address-file",
                                     dir_ + "/address"};
    argv.insert(argv.end(), coordinator_args.begin(), coordinator_args.end());
    coordinator_ = std::make_unique<Subprocess>(
        lab_->In(kCoordinatorHost, argv), dir_);
    for (int i = 0; i < testing::Scaled(200) && testing::ReadFileOrEmpty(dir_ + "/address")
                                   .empty();
         ++i) {
      usleep(50000);
    }
    ASSERT_FALSE(testing::ReadFileOrEmpty(dir_ + "/address").empty())
        << coordinator_->Stdout() << coordinator_->Stderr();
    for (int host = 1; host <= workers; ++host) StartWorker(host);
    ASSERT_TRUE(WaitForWorkers(workers));
  }

  void StartWorker(int host) {
    std::vector<std::string> argv = {testing::Runfile("client/lockstep"),
                                     "worker",
                                     "--coordinator",
                                     address_,
                                     "--listen",
                                     lab_->address(host) + ":7071",
                                     "--name",
                                     "host" + std::to_string(host),
                                     "--threads",
                                     "1"};
    argv.insert(argv.end(), worker_args_.begin(), worker_args_.end());
    workers_.push_back(
        std::make_unique<Subprocess>(lab_->In(host, argv), dir_));
  }

  bool WaitForWorkers(int alive) {
    const Clock::time_point t0 = Clock::now();
    std::string last;
    while (Since(t0) < testing::Scaled(30)) {
      last = Client({"list"}, 10).out;
      int n = 0;
      static const std::regex alive_line(R"(heartbeat [0-9.]+s ago\n)");
      for (std::sregex_iterator it(last.begin(), last.end(), alive_line);
           it != std::sregex_iterator(); ++it) {
        ++n;
      }
      if (n >= alive) return true;
      usleep(50000);
    }
    ADD_FAILURE() << alive << " workers did not register:\n" << last;
    return false;
  }

  RunResult Client(std::vector<std::string> args,
                   double timeout = 120) override {
    std::vector<std::string> argv = {testing::Runfile("client/lockstep")};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.push_back("--coordinator");
    argv.push_back(address_);
    return testing::RunProcess(lab_->In(kCoordinatorHost, argv), dir_,
                               timeout);
  }
  std::string StorageDir() override { return dir_ + "/storage"; }

  // Runs the job to its end with `watch`; the watch output.
  RunResult Finish() {
    RunResult w = WatchToEnd();
    EXPECT_EQ(w.exit.exit_code, 0) << w.out << w.err;
    return w;
  }

  // Cuts host `host`'s link for `seconds` and heals it; with `stall`,
  // status must meanwhile report the ring stalled (it does after 3 s of
  // waiting). The time of the heal.
  Clock::time_point CutFor(int host, double seconds, bool stall) {
    EXPECT_TRUE(lab_->Cut(host)) << lab_->error();
    const Clock::time_point cut = Clock::now();
    if (stall) {
      std::string last;
      EXPECT_TRUE(WaitForStatus(
          R"(the ring is stalled: rank \d has waited [0-9.]+ s for rank \d)",
          seconds, &last))
          << last;
    }
    usleep(static_cast<useconds_t>(std::max(0.0, seconds - Since(cut)) * 1e6));
    EXPECT_TRUE(lab_->Heal(host)) << lab_->error();
    return Clock::now();
  }

  static void Figure(const std::string& drill, const std::string& text) {
    std::printf("FIGURE %s: %s\n", drill.c_str(), text.c_str());
    RecordProperty(drill, text);
  }

  std::unique_ptr<NetLab> lab_;
  std::vector<std::string> worker_args_;  // every worker's extra flags
  std::string address_;
  std::unique_ptr<Subprocess> coordinator_;
  std::vector<std::unique_ptr<Subprocess>> workers_;
};

TEST_F(NetDrillTest, AWorkerCutOffForLessThanTheTimeoutLosesNothing) {
  const std::string reference = ReferenceFingerprint();
  // Timeouts a deployment on a flaky network might pick: a worker is lost
  // after 12 s of silence, a rank after 16 s of blocking its ring (the
  // stall is reported after 3 s, before a stream's own 5 s keepalive).
  StartNet(3, 2, {"--worker-timeout", "12", "--hang-timeout", "16"});
  ASSERT_EQ(Client({"submit", WriteJob(FaultJob())}).exit.exit_code, 0);
  // A 2 s cut: TCP retransmits once the link is back, the ring goes on in
  // the same generation.
  WaitForStep(150);
  Clock::time_point healed = CutFor(2, 2.0, /*stall=*/false);
  const int first_cut = StatusStep(Client({"status", "ft"}).out);
  WaitForStep(first_cut + 20);
  const double short_resume = Since(healed);
  std::string status = Client({"status", "ft"}).out;
  EXPECT_NE(status.find("RUNNING (generation 1)"), std::string::npos)
      << status;
  // A 6.5 s cut, still under both timeouts: the stall is reported, then the
  // neighbour's stream to the cut rank dies with its unacknowledged data
  // (gRPC's keepalive timeout, 5 s, is the connection's TCP_USER_TIMEOUT):
  // the neighbour reports it and the rank is dropped at once. One
  // generation, from the survivors' memory (or the last checkpoint):
  // nothing is lost.
  WaitForStep(400);
  CutFor(2, 6.5, /*stall=*/true);
  Finish();
  nlohmann::json res = Result();
  EXPECT_EQ(res["fingerprint"], reference);
  // The last generation's start (resumed_from_step is the first's).
  const int resumed = res["membership"].back()["from_step"].get<int>();
  EXPECT_GE(resumed, 350);
  status = Client({"status", "ft"}).out;
  EXPECT_NE(status.find("SUCCEEDED (generation 2) after 1 of 3 restarts"),
            std::string::npos)
      << status;
  Figure("short_worker_cut",
         "2 s cut at step " + std::to_string(first_cut) +
             ": no generation change, 0 steps redone, 20 steps on within " +
             std::to_string(short_resume).substr(0, 4) +
             " s after healing; 6.5 s cut: stall reported, generation 2 from "
             "step " +
             std::to_string(resumed) + " (result.json membership)");
}

TEST_F(NetDrillTest, WithALongerRingKeepaliveA6sCutRidesThrough) {
  const std::string reference = ReferenceFingerprint();
  // The same 6.5 s cut as above, with the workers' ring streams allowed 20 s
  // of unacknowledged data (--ring-keepalive-timeout, kept under the
  // coordinator's --hang-timeout, 24 s here, so that a rank that really
  // hangs is still found by the coordinator first): no stream breaks, no
  // generation changes.
  worker_args_ = {"--ring-keepalive-timeout", "20"};
  StartNet(3, 2, {"--worker-timeout", "12", "--hang-timeout", "24"});
  ASSERT_EQ(Client({"submit", WriteJob(FaultJob())}).exit.exit_code, 0);
  WaitForStep(150);
  const Clock::time_point healed = CutFor(2, 6.5, /*stall=*/true);
  const int at = StatusStep(Client({"status", "ft"}).out);
  WaitForStep(at + 20);
  const double resumed = Since(healed);
  Finish();
  nlohmann::json res = Result();
  EXPECT_EQ(res["fingerprint"], reference);
  EXPECT_EQ(res["resumed_from_step"], 0);
  const std::string status = Client({"status", "ft"}).out;
  EXPECT_NE(status.find("SUCCEEDED (generation 1)"), std::string::npos)
      << status;
  Figure("long_keepalive_cut",
         "6.5 s cut with --ring-keepalive-timeout 20: no generation change, "
         "0 steps redone, 20 steps on within " +
             std::to_string(resumed).substr(0, 4) + " s after healing");
}

TEST_F(NetDrillTest, AWorkerCutOffPastTheTimeoutIsReplacedAndFencedOnHealing) {
  // 8 epochs (2,000 steps): generation 2 still trains when the healed
  // process's generation-1 requests arrive (with FaultJob's 4 it had once
  // ended before, so nothing was fenced).
  const nlohmann::json job = FaultJob({{"epochs", 8}});
  const nlohmann::json alone = TrainAlone(job, testing::NewTempDir("long"));
  ASSERT_TRUE(alone.is_object());
  const std::string reference = alone["fingerprint"];
  StartNet(4, 2, {"--worker-timeout", "3"});
  ASSERT_EQ(Client({"submit", WriteJob(job)}).exit.exit_code, 0);
  WaitForStep(150);
  Subprocess& cut_worker = *workers_[1];  // host 2
  std::smatch id;
  const std::string before = Client({"status", "ft"}).out;
  ASSERT_TRUE(std::regex_search(
      before, id,
      std::regex(
          R"(rank \d (w\d+)(?: \(\S+\))?\s+\S+ pid \d+\s+)" +
          std::regex_replace(lab_->address(2), std::regex(R"(\.)"), R"(\.)") +
          ":7071")))
      << before;
  const std::string cut_id = id[1];
  ASSERT_TRUE(lab_->Cut(2)) << lab_->error();
  const Clock::time_point cut = Clock::now();
  std::string last;
  ASSERT_TRUE(WaitForStatus("RECOVERING", 15, &last)) << last;
  const double detected = Since(cut);
  EXPECT_TRUE(std::regex_search(
      last, std::regex(R"(rank \d \(w\d on \S+ pid \d+, 10\.213\.0\.4:7071\) )"
                       R"(lost)")))
      << last;
  // A fresh worker on host 3 takes the free rank.
  StartWorker(3);
  ASSERT_TRUE(WaitForStatus(R"(RUNNING)", 20, &last)) << last;
  const double recovered = Since(cut);
  // The partition heals while generation 2 trains: the old process is
  // fenced (its generation is over: the coordinator drops it from the job)
  // and registers again as a spare; it writes nothing for generation 2.
  ASSERT_TRUE(lab_->Heal(2)) << lab_->error();
  ASSERT_TRUE(cut_worker.WaitForOutput("registering again", 20))
      << cut_worker.Stdout();
  RunResult w = Finish();
  // From the survivors' memory (the step they completed) when one kept a
  // step past the checkpoint, else from the checkpoint.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      w.out, m,
      std::regex(R"(RUNNING generation 2 from step (\d+) )"
                 R"((\((rank \d's memory); the latest checkpoint is step \d+\) )?)"
                 R"(\(restart 1 of 3)")))
      << w.out;
  const std::string source =
      m[3].matched ? std::string(m[3]) : std::string("the checkpoint");
  EXPECT_NE(w.out.find("SUCCEEDED"), std::string::npos);
  nlohmann::json res = Result();
  EXPECT_EQ(res["fingerprint"], reference);
  // What the healed process tried for generation 1 once generation 2 ran
  // was refused and counted: at least its finish report, named in the
  // coordinator's log; nothing of it is in the job's history.
  ASSERT_TRUE(res["fenced"].is_object()) << res.dump(2);
  EXPECT_GE(res["fenced"].value("finish", 0), 1) << res.dump(2);
  const std::string log = coordinator_->Stdout() + coordinator_->Stderr();
  EXPECT_NE(log.find("refused: a finish request of generation 1 from worker " +
                     cut_id + " "),
            std::string::npos)
      << log;
  // The checkpoints on disk were written by generation 2's ranks (each
  // state.json names the generation whose slices made it).
  const std::string checkpoints = StorageDir() + "/jobs/ft/checkpoints";
  int kept = 0;
  for (const auto& e : std::filesystem::directory_iterator(checkpoints)) {
    if (e.path().filename().string().rfind("step-", 0) != 0) continue;
    const nlohmann::json state = nlohmann::json::parse(
        testing::ReadFileOrEmpty(e.path().string() + "/state.json"), nullptr,
        false);
    ASSERT_TRUE(state.is_object()) << e.path();
    if (state["step"].get<int>() >= std::stoi(m[1])) {
      EXPECT_EQ(state["generation"], 2) << e.path();
      ++kept;
    }
  }
  EXPECT_GE(kept, 1);
  // The healed process is a live spare again.
  EXPECT_TRUE(WaitForWorkers(3));
  Figure("long_worker_cut",
         "lost after " + std::to_string(detected).substr(0, 4) +
             " s (--worker-timeout 3), generation 2 from " + source +
             " at step " + std::string(m[1]) + " " +
             std::to_string(recovered).substr(0, 4) + " s after the cut");
}

TEST_F(NetDrillTest, TheCoordinatorCutOffFromEveryWorkerForAWhile) {
  const std::string reference = ReferenceFingerprint();
  StartNet(3, 2, {"--worker-timeout", "3"});
  ASSERT_EQ(Client({"submit", WriteJob(FaultJob())}).exit.exit_code, 0);
  WaitForStep(150);
  const int cut_at = StatusStep(Client({"status", "ft"}).out);
  ASSERT_TRUE(lab_->Cut(kCoordinatorHost)) << lab_->error();
  const Clock::time_point cut = Clock::now();
  // The outcome is decided: the cut lasts until the coordinator (asked
  // from its own host) has found both workers silent past the 3 s timeout
  // and the job RECOVERING. Meanwhile the ring, which does not pass
  // through the coordinator, trains on.
  std::string last;
  ASSERT_TRUE(WaitForStatus("RECOVERING", 20, &last)) << last;
  const double lost_after = Since(cut);
  // 3 s after the last heartbeat, which came up to 0.5 s before the cut.
  EXPECT_GE(lost_after, 2.4) << "lost before --worker-timeout 3";
  ASSERT_TRUE(lab_->Heal(kCoordinatorHost)) << lab_->error();
  const Clock::time_point healed = Clock::now();
  RunResult w = Finish();
  const double finished = Since(healed);
  nlohmann::json res = Result();
  EXPECT_EQ(res["fingerprint"], reference);
  // Healed, each worker learns it was dropped, ends its run at a step
  // boundary keeping what it trained meanwhile, and registers again
  // offering it: generation 2 starts from that memory (when the step kept
  // is a checkpoint's, the coordinator names the checkpoint instead).
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      w.out, m,
      std::regex(
          R"(RUNNING generation 2 from step (\d+) )"
          R"((\(rank \d's memory; the latest checkpoint is step \d+\) )?)"
          R"(\(restart 1 of 3)")))
      << w.out;
  const int resumed = std::stoi(m[1]);
  EXPECT_TRUE(m[2].matched || resumed % 50 == 0) << w.out;
  EXPECT_GE(resumed, cut_at);
  EXPECT_EQ(res["membership"].back()["from_step"].get<int>(), resumed);
  // The journal agrees with what status says after the end.
  EXPECT_NE(Client({"status", "ft"}).out.find("SUCCEEDED (generation 2)"),
            std::string::npos);
  Figure("coordinator_cut",
         "cut at step " + std::to_string(cut_at) + ", workers lost after " +
             std::to_string(lost_after).substr(0, 4) +
             " s (--worker-timeout 3), generation 2 from step " +
             std::to_string(resumed) +
             (m[2].matched ? " (a worker's memory)" : " (the checkpoint)") +
             ", finished " + std::to_string(finished).substr(0, 4) +
             " s after healing");
}

TEST_F(NetDrillTest, AnAsymmetricCutBetweenRingNeighboursIsNamedAndRecovered) {
  const std::string reference = ReferenceFingerprint();
  // Workers on hosts 1 and 2 train; host 3 is a spare.
  StartNet(4, 2, {"--worker-timeout", "8", "--hang-timeout", "16"});
  StartWorker(3);
  ASSERT_TRUE(WaitForWorkers(3));
  ASSERT_EQ(Client({"submit", WriteJob(FaultJob())}).exit.exit_code, 0);
  WaitForStep(150);
  // Host 1 can no longer send to host 2; both still reach the coordinator
  // (heartbeats go on), so only the ring can tell.
  ASSERT_TRUE(lab_->Block(1, 2)) << lab_->error();
  const Clock::time_point cut = Clock::now();
  std::string last;
  EXPECT_TRUE(WaitForStatus(
      R"(the ring is stalled: rank \d has waited [0-9.]+ s for rank \d)", 8,
      &last))
      << last;
  // The spare takes the rank at once: RECOVERING may pass between two
  // looks, generation 2 then says why it began.
  ASSERT_TRUE(
      WaitForStatus(R"(RECOVERING|RUNNING \(generation [2-9]\))", 20, &last))
      << last;
  const double detected = Since(cut);
  // The rank whose stream died reports its neighbour: that one is dropped
  // (which side is at fault cannot be known from inside the ring).
  EXPECT_TRUE(std::regex_search(
      last, std::regex(R"(rank \d \(w\d on \S+ pid \d+, 10\.213\.0\.\d:7071\) )"
                       R"(lost: rank \d reports: )")))
      << last;
  std::smatch why;
  std::regex_search(last, why, std::regex(R"(lost: [^\n]{0,240})"));
  RunResult w = Finish();
  // The last generation: it ran to the end.
  std::string gen, from;
  static const std::regex running(R"(RUNNING generation (\d+) from step (\d+))");
  for (std::sregex_iterator it(w.out.begin(), w.out.end(), running);
       it != std::sregex_iterator(); ++it) {
    gen = (*it)[1];
    from = (*it)[2];
  }
  EXPECT_GE(std::stoi(gen.empty() ? "0" : gen), 2) << w.out;
  nlohmann::json res = Result();
  EXPECT_EQ(res["fingerprint"], reference);
  ASSERT_TRUE(lab_->Unblock(1, 2)) << lab_->error();
  Figure("asymmetric_cut",
         "host 1 -> host 2 blackholed at step 150: RECOVERING after " +
             std::to_string(detected).substr(0, 4) + " s (" +
             std::string(why.empty() ? "" : why.str()) +
             "), the last generation " + gen + " from step " + from);
}

// One worker's host on a 100 Mbit/s link (tbf both ways), the others on
// the switch's full speed: the coordinator names that worker's rank as the
// straggler (status, an event, /metrics), the job goes on and ends on the
// fingerprint of the same job with no shaping, which names no straggler.
// Three workers: in a ring of two both links cross the slow host, so
// there is no fast link to compare with (coordinator/straggler.h).
TEST_F(NetDrillTest, AWorkerOnA100MbitLinkIsNamedTheStraggler) {
  StartNet(4, 3);
  nlohmann::json job = FaultJob({{"epochs", 2}, {"cluster", {{"workers", 3}}}});
  // The same job on an unshaped network: the reference.
  ASSERT_EQ(Client({"submit", WriteJob(job)}).exit.exit_code, 0);
  const Clock::time_point fast_start = Clock::now();
  RunResult fast = Finish();
  const double fast_seconds = Since(fast_start);
  EXPECT_EQ(fast.out.find("straggler"), std::string::npos) << fast.out;
  const nlohmann::json reference = Result();
  ASSERT_TRUE(reference.is_object()) << fast.out;

  constexpr int kSlowHost = 2;
  ASSERT_TRUE(lab_->Shape(kSlowHost, 100'000'000)) << lab_->error();
  job["name"] = "slow";
  ASSERT_EQ(Client({"submit", WriteJob(job, "slow.json")}).exit.exit_code, 0);
  const Clock::time_point slow_start = Clock::now();
  std::string last;
  ASSERT_TRUE(WaitForStatus(R"(RUNNING)", 30, &last, "slow")) << last;
  // Its rank: the worker whose collective address is on the slow host.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      last, m,
      std::regex(R"(rank (\d) w\d+ [^\n]*)" + lab_->address(kSlowHost) +
                 ":7071")))
      << last;
  const std::string rank = m[1];
  ASSERT_TRUE(WaitForStatus(
      "straggler: rank " + rank + R"( \(host2 on [^)]*\): its ring links are )"
      R"(slow \(rank \d -> rank )" + rank + R"( [0-9.]+ ms/MiB, rank )" + rank +
      R"( -> rank \d [0-9.]+ ms/MiB, against [0-9.]+ ms/MiB on the fastest )"
      R"(link\): its host's network holds the job back)",
      30, &last, "slow"))
      << last << "\nthe job's events:\n"
      << Client({"watch", "slow"}, 180).out;
  const double named = Since(slow_start);
  std::smatch text;
  std::regex_search(last, text, std::regex(R"(straggler: ([^\n]*))"));
  // The figures behind it, per worker in status and on /metrics' source.
  EXPECT_TRUE(std::regex_search(
      last, std::regex(R"(recently: ring in [0-9.]+ ms/MiB, own work )"
                       R"([0-9.]+ ms/step)")))
      << last;
  RunResult slow = Client({"watch", "slow"}, 180);
  EXPECT_EQ(slow.exit.exit_code, 0) << slow.out << slow.err;
  const double slow_seconds = Since(slow_start);
  EXPECT_NE(slow.out.find("straggler: rank " + rank + " (host2 on"),
            std::string::npos)
      << slow.out;
  const nlohmann::json res = Result("slow");
  ASSERT_TRUE(res.is_object()) << slow.out;
  EXPECT_EQ(res["fingerprint"], reference["fingerprint"]);
  EXPECT_EQ(res["steps"], reference["steps"]);
  Figure("straggler",
         "3 workers, host 2 at 100 Mbit/s: named after " +
             std::to_string(named).substr(0, 4) + " s (" + text[1].str() +
             "); the job took " + std::to_string(slow_seconds).substr(0, 4) +
             " s against " + std::to_string(fast_seconds).substr(0, 4) +
             " s unshaped, same fingerprint");
}

}  // namespace
}  // namespace lockstep
