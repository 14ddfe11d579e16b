// TrainingSession without a network: ranks as threads over the in-process
// transport train to the bits of one process holding every replica; a stop
// and a restore from the session's own checkpoint end where an
// uninterrupted run does; a leaving rank ends the run on every rank at the
// same step.
#include "core/train/training_session.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "core/checkpoint/tensor_parts.h"
#include "core/collective/in_process_transport.h"
#include "core/train/session_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

using session_testing::Job;
using session_testing::kDropout;
using session_testing::kSyncBatchNorm;
using session_testing::LocalConfig;
using session_testing::MemoryHost;

struct RankRun {
  MemoryHost host;
  absl::StatusOr<TrainingSession::Outcome> outcome =
      absl::UnknownError("not run");
  absl::StatusOr<SessionResult> result = absl::UnknownError("not run");
  int leaving = 0;
  int64_t step = 0;
  absl::Status barrier = absl::UnknownError("not run");
  // After a failed run: what the rank keeps in memory (CopyState).
  absl::StatusOr<std::vector<LoadedCheckpoint>> kept =
      absl::UnknownError("not run");
};

// Where the ranks of a KillAt test are: which ranks have waited for a
// message of the collective the victim dies in.
struct KillGate {
  absl::Mutex mu;
  absl::CondVar cv;
  std::set<int> waiting ABSL_GUARDED_BY(mu);
};

// A rank's transport for a kill at the collective (`bucket`, global step
// `step`): the victim, at its first message of it, waits (up to 10 s)
// until every other rank waits for a message of it too, then is "killed":
// that call fails and the whole ring is aborted, as a kill -9 breaks every
// stream. The others only say when they wait. So each survivor is inside
// that collective when the kill comes, whatever the threads' timing.
class KillAt : public Transport {
 public:
  KillAt(Transport& base, InProcessRing& ring, KillGate& gate, int64_t step,
         int32_t bucket, bool victim)
      : base_(base),
        ring_(ring),
        gate_(gate),
        step_(step),
        bucket_(bucket),
        victim_(victim) {}
  int rank() const override { return base_.rank(); }
  int world_size() const override { return base_.world_size(); }
  absl::Status SendToNext(const CollectiveTag& tag, const void* data,
                          int64_t count, WireType type,
                          const SendTracker& sends) override {
    if (victim_ && Hit(tag)) return Kill();
    return base_.SendToNext(tag, data, count, type, sends);
  }
  absl::Status RecvFromPrev(const CollectiveTag& tag, absl::Time deadline,
                            float* dst, int64_t count, WireType type,
                            RecvOp op) override {
    if (Hit(tag)) {
      if (victim_) return Kill();
      absl::MutexLock lock(&gate_.mu);
      gate_.waiting.insert(base_.rank());
      gate_.cv.SignalAll();
    }
    return base_.RecvFromPrev(tag, deadline, dst, count, type, op);
  }
  void Abort(const absl::Status& reason) override { base_.Abort(reason); }

 private:
  bool Hit(const CollectiveTag& tag) const {
    return tag.step == step_ && tag.bucket == bucket_;
  }
  absl::Status Kill() {
    {
      absl::MutexLock lock(&gate_.mu);
      const int others = base_.world_size() - 1;
      const absl::Time give_up = absl::Now() + absl::Seconds(10);
      while (static_cast<int>(gate_.waiting.size()) < others &&
             absl::Now() < give_up) {
        gate_.cv.WaitWithDeadline(&gate_.mu, give_up);
      }
    }
    const absl::Status killed =
        absl::UnavailableError(absl::StrFormat("rank %d killed", base_.rank()));
    ring_.AbortAll(killed);
    return killed;
  }
  Transport& base_;
  InProcessRing& ring_;
  KillGate& gate_;
  const int64_t step_;
  const int32_t bucket_;
  const bool victim_;
};

// Runs `world` ranks of `spec`, one replica each, as threads over an
// in-process ring; `prepare` sets each rank's host up; `wrap` may put a
// transport of its own around a rank's.
using WrapTransport = std::function<std::unique_ptr<Transport>(
    int rank, Transport& base, InProcessRing& ring)>;
std::vector<std::unique_ptr<RankRun>> RunRanks(
    const JobSpec& spec, int world,
    const std::function<void(int, MemoryHost&)>& prepare = nullptr,
    int64_t end_step = -1, const WrapTransport& wrap = nullptr) {
  std::unique_ptr<InProcessRing> ring = InProcessRing::Create(world);
  std::vector<std::unique_ptr<RankRun>> runs;
  for (int r = 0; r < world; ++r) runs.push_back(std::make_unique<RankRun>());
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    if (prepare) prepare(r, runs[r]->host);
    threads.emplace_back([&, r] {
      RankRun& run = *runs[r];
      SessionConfig c = LocalConfig(spec);
      c.replicas = {r};
      c.world_replicas = world;
      c.rank = r;
      c.world = world;
      c.end_step = end_step;
      c.report_fingerprints = true;
      c.fingerprint_every_steps = 5;
      std::unique_ptr<Transport> wrapped =
          wrap ? wrap(r, ring->endpoint(r), *ring) : nullptr;
      c.peers.transport = wrapped ? wrapped.get() : &ring->endpoint(r);
      c.peers.generation = 1;
      c.peers.ring.timeout = absl::Seconds(30);
      c.peers.gradient_ring = c.peers.ring;
      c.peers.bucket_bytes = 256;  // several buckets
      auto session = TrainingSession::Create(std::move(c), &run.host);
      if (!session.ok()) {
        run.outcome = session.status();
        ring->AbortAll(session.status());
        return;
      }
      run.outcome = (*session)->Run();
      if (!run.outcome.ok()) {
        ring->AbortAll(run.outcome.status());
        run.kept = (*session)->CopyState();
      }
      run.leaving = (*session)->leaving();
      run.step = (*session)->step();
      if (run.outcome.ok() &&
          *run.outcome == TrainingSession::Outcome::kLeaving) {
        run.barrier = (*session)->Barrier(kDrainBucket);
      }
      run.result = (*session)->Result();
    });
  }
  for (std::thread& t : threads) t.join();
  return runs;
}

SessionResult RunLocal(const JobSpec& spec, MemoryHost& host) {
  auto session = TrainingSession::Create(LocalConfig(spec), &host);
  EXPECT_TRUE(session.ok()) << session.status();
  if (!session.ok()) return SessionResult();
  absl::StatusOr<TrainingSession::Outcome> outcome = (*session)->Run();
  EXPECT_TRUE(outcome.ok()) << outcome.status();
  absl::StatusOr<SessionResult> result = (*session)->Result();
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? *result : SessionResult();
}

TEST(TrainingSessionTest, TwoRanksOverTheRingTrainAsOneProcessOfTwoReplicas) {
  const JobSpec spec = Job(2);
  MemoryHost local;
  const SessionResult whole = RunLocal(spec, local);
  // 160 samples in global batches of 16: 10 steps an epoch, 2 epochs.
  EXPECT_TRUE(whole.finished);
  EXPECT_EQ(whole.steps, 20);
  EXPECT_EQ(whole.epochs, 2);
  EXPECT_EQ(whole.test.count, 50);
  EXPECT_EQ(whole.fingerprint.size(), 32u);
  EXPECT_TRUE(local.fingerprints.empty());  // not asked for
  EXPECT_EQ(local.samples, 20 * 16);
  // Checkpoints every 4 steps and at each epoch's end; the last is final.
  std::vector<int64_t> saved;
  for (const auto& [step, c] : local.checkpoints) saved.push_back(step);
  EXPECT_EQ(saved, (std::vector<int64_t>{4, 8, 10, 12, 16, 20}));
  EXPECT_EQ(local.final_step, 20);
  EXPECT_EQ(local.events.size(), 2u);
  EXPECT_EQ(local.scalars["train/loss"],
            (std::vector<int64_t>{3, 6, 9, 12, 15, 18}));
  EXPECT_EQ(local.scalars.count("allreduce_seconds"), 0u);

  const auto ranks = RunRanks(spec, 2);
  for (int r = 0; r < 2; ++r) {
    const RankRun& run = *ranks[r];
    ASSERT_TRUE(run.outcome.ok()) << r << ": " << run.outcome.status();
    EXPECT_EQ(*run.outcome, TrainingSession::Outcome::kFinished);
    ASSERT_TRUE(run.result.ok()) << run.result.status();
    // The ring's sum of two replicas is the local sum: the same bits.
    EXPECT_EQ(run.result->fingerprint, whole.fingerprint) << "rank " << r;
    // Each rank evaluated its share; the sum covers the test set.
    EXPECT_EQ(run.result->test.count, 50);
    EXPECT_EQ(run.result->test.correct, whole.test.correct);
    EXPECT_EQ(run.host.samples, 20 * 8);
    // Fingerprints every 5 steps and at the end, the same on both ranks.
    std::vector<int64_t> at;
    for (const auto& [step, fp] : run.host.fingerprints) at.push_back(step);
    EXPECT_EQ(at, (std::vector<int64_t>{5, 10, 15, 20}));
    EXPECT_EQ(run.host.fingerprints.at(20), whole.fingerprint);
    EXPECT_EQ(run.host.scalars.at("allreduce_seconds").size(), 6u);
  }
  EXPECT_EQ(ranks[0]->host.fingerprints, ranks[1]->host.fingerprints);
  EXPECT_EQ(ranks[0]->host.checkpoints.at(12).state.generation, 1);
}

TEST(TrainingSessionTest, AStoppedRunResumesFromItsCheckpointToTheSameBits) {
  const JobSpec spec = Job(1);
  MemoryHost whole_host;
  const SessionResult whole = RunLocal(spec, whole_host);

  MemoryHost first;
  first.stop_after = 7;
  auto session = TrainingSession::Create(LocalConfig(spec), &first);
  ASSERT_TRUE(session.ok()) << session.status();
  absl::StatusOr<TrainingSession::Outcome> outcome = (*session)->Run();
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(*outcome, TrainingSession::Outcome::kStopped);
  EXPECT_EQ((*session)->step(), 7);
  ASSERT_TRUE((*session)->SaveCheckpoint().ok());
  ASSERT_TRUE((*session)->SaveCheckpoint().ok());  // once per step
  ASSERT_EQ(first.checkpoints.count(7), 1u);
  EXPECT_EQ(first.checkpoints.at(7).state.step_in_epoch, 7);  // 20 an epoch
  absl::StatusOr<SessionResult> partial = (*session)->Result();
  ASSERT_TRUE(partial.ok());
  EXPECT_FALSE(partial->finished);
  EXPECT_NE(partial->fingerprint, whole.fingerprint);

  MemoryHost second;
  second.start = first.checkpoints.at(7);
  auto resumed = TrainingSession::Create(LocalConfig(spec), &second);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ((*resumed)->restored_from(), "memory/step-00000007");
  EXPECT_EQ((*resumed)->step(), 7);
  ASSERT_TRUE((*resumed)->Run().ok());
  absl::StatusOr<SessionResult> rest = (*resumed)->Result();
  ASSERT_TRUE(rest.ok());
  EXPECT_TRUE(rest->finished);
  EXPECT_EQ(rest->resumed_from_step, 7);
  EXPECT_EQ(rest->fingerprint, whole.fingerprint);
  EXPECT_EQ(second.samples, (40 - 7) * 8);
}

// The largest difference between two checkpoints' model tensors.
float MaxParamDifference(const LoadedCheckpoint& a, const LoadedCheckpoint& b) {
  float most = 0;
  EXPECT_EQ(a.model.size(), b.model.size());
  for (size_t i = 0; i < a.model.size() && i < b.model.size(); ++i) {
    EXPECT_EQ(a.model[i].first, b.model[i].first);
    const std::vector<float>& x = a.model[i].second.values();
    const std::vector<float>& y = b.model[i].second.values();
    EXPECT_EQ(x.size(), y.size());
    for (size_t k = 0; k < x.size() && k < y.size(); ++k) {
      most = std::max(most, std::abs(x[k] - y[k]));
    }
  }
  return most;
}

TEST(TrainingSessionTest, AccumulatedMicroBatchesTrainLikeTheWholeBatch) {
  // Two replicas of 8 samples a step: whole, or in micro-batches of 4 or 2.
  // The same samples, the same gradient up to the order of float sums.
  const JobSpec whole_spec = Job(2, 10, 8, 1, "");
  MemoryHost whole_host;
  const SessionResult whole = RunLocal(whole_spec, whole_host);
  ASSERT_TRUE(whole.finished);
  for (int64_t micros : {2, 4}) {
    SCOPED_TRACE(absl::StrFormat("%d micro-batches", micros));
    const JobSpec spec = Job(2, 10, 8, micros, "");
    EXPECT_EQ(spec.batch_size_per_replica, 8 / micros);
    EXPECT_EQ(spec.global_batch_size(), 16);
    MemoryHost host;
    const SessionResult acc = RunLocal(spec, host);
    EXPECT_TRUE(acc.finished);
    EXPECT_EQ(acc.steps, 20);  // 160 samples in global batches of 16
    EXPECT_EQ(host.samples, 20 * 16);
    // Different sums of the same terms: a different fingerprint, the same
    // training within float rounding. Tolerances: 20 Adam steps at lr
    // 0.01 move weights by up to 0.2; rounding differences stay below
    // 1e-5 of that.
    EXPECT_NE(acc.fingerprint, whole.fingerprint);
    EXPECT_LT(MaxParamDifference(host.checkpoints.at(20),
                                 whole_host.checkpoints.at(20)),
              2e-6);
    EXPECT_NEAR(acc.train.mean_loss(), whole.train.mean_loss(), 1e-5);
    EXPECT_NEAR(acc.test.mean_loss(), whole.test.mean_loss(), 1e-5);
    EXPECT_EQ(acc.test.correct, whole.test.correct);
    // A restart mid-run still lands on the uninterrupted bits.
    MemoryHost resumed_host;
    resumed_host.start = host.checkpoints.at(8);
    const SessionResult resumed = RunLocal(spec, resumed_host);
    EXPECT_EQ(resumed.resumed_from_step, 8);
    EXPECT_EQ(resumed.fingerprint, acc.fingerprint);
  }
}

// Two ranks of `spec` (one replica each) end on the bits of one process
// holding both replicas, each having trained its half of the samples.
void ExpectTwoRanksTrainAsOneProcess(const JobSpec& spec) {
  MemoryHost local;
  const SessionResult whole = RunLocal(spec, local);
  ASSERT_TRUE(whole.finished);
  const auto ranks = RunRanks(spec, 2);
  for (int r = 0; r < 2; ++r) {
    const RankRun& run = *ranks[r];
    ASSERT_TRUE(run.outcome.ok()) << r << ": " << run.outcome.status();
    ASSERT_TRUE(run.result.ok()) << run.result.status();
    EXPECT_EQ(run.result->fingerprint, whole.fingerprint) << "rank " << r;
    EXPECT_EQ(run.host.samples, local.samples / 2) << "rank " << r;
  }
}

TEST(TrainingSessionTest, AccumulatingRanksTrainAsOneProcessOfTheirReplicas) {
  // Each replica adds up its own micro-batches before any sum over
  // replicas, so a worker per replica gets the bits of one process holding
  // both, dropout included.
  ExpectTwoRanksTrainAsOneProcess(Job(2, 10, 8, 2));
}

TEST(TrainingSessionTest, SyncBatchNormSumsEachMicroBatchOverTheRanks) {
  // Each micro-batch's statistics are summed over the ranks under its own
  // collective ids; the moving averages take every micro-batch's.
  ExpectTwoRanksTrainAsOneProcess(Job(2, 10, 8, 2, kSyncBatchNorm));
  EXPECT_EQ(BucketName(kPassSumBucket + kPassSumMicroStride + 4 * 3 + 1),
            "sum 1 of graph node 3 in the pass (sync batch norm), "
            "micro-batch 1");
}

TEST(TrainingSessionTest, Bf16RanksTrainAsOneProcessAndOffFloat32) {
  // "precision": "bf16" (the conv and dense layers' products from
  // bfloat16-rounded inputs): two ranks still end on one process's bits,
  // and on other bits than the float32 job's.
  JobSpec bf16 = Job(2);
  bf16.precision = Precision::kBf16;
  ExpectTwoRanksTrainAsOneProcess(bf16);
  MemoryHost a, b;
  const SessionResult with_bf16 = RunLocal(bf16, a);
  const SessionResult with_fp32 = RunLocal(Job(2), b);
  ASSERT_TRUE(with_bf16.finished && with_fp32.finished);
  EXPECT_NE(with_bf16.fingerprint, with_fp32.fingerprint);
  // Still learning the same task: the losses stay close.
  EXPECT_NEAR(with_bf16.train.mean_loss(), with_fp32.train.mean_loss(),
              0.05 * with_fp32.train.mean_loss());
}

TEST(TrainingSessionTest, CpuReplicasRefuseFp16) {
  // fp16's loss scaling lives in the GPUs' update; a CPU job is told to
  // use bf16, before any step.
  JobSpec spec = Job(1);
  spec.precision = Precision::kFp16;
  MemoryHost host;
  auto session = TrainingSession::Create(LocalConfig(spec), &host);
  ASSERT_FALSE(session.ok());
  EXPECT_EQ(session.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(session.status().message(),
            "precision: \"fp16\" runs on GPU replicas only (its loss scaling "
            "lives in the GPUs' update); use \"bf16\" on CPU replicas, which "
            "needs no loss scaling");
}

TEST(TrainingSessionTest, GpuReplicasRefuseAccumulationWithSyncBatchNorm) {
  SessionConfig c = LocalConfig(Job(1, 10, 8, 2, kSyncBatchNorm));
  c.cuda_devices = {0};
  MemoryHost host;
  auto session = TrainingSession::Create(std::move(c), &host);
  ASSERT_FALSE(session.ok());
  EXPECT_EQ(session.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(session.status().message(),
            "gradient_accumulation_steps: GPU replicas accumulate 2 "
            "micro-batches, but sync batch norm's sums inside each "
            "micro-batch's pass are not built for GPUs; run the job on CPU "
            "replicas, or without \"sync\" batch norm, or give each GPU the "
            "whole batch_size_per_replica");
}

// One generation of an elastic job: `world` workers of one replica, from
// `start` (null: step 0) to `end_step`, as ranks over the ring or as one
// process holding them all; the state at its end (a checkpoint of it).
struct Generation {
  int world;
  int64_t end_step;
};
std::optional<LoadedCheckpoint> RunGeneration(
    const JobSpec& spec, const Generation& g,
    const std::optional<LoadedCheckpoint>& start, bool ranks,
    std::string* fingerprint) {
  if (ranks) {
    auto runs = RunRanks(
        spec, g.world, [&](int, MemoryHost& host) { host.start = start; },
        g.end_step);
    for (int r = 0; r < g.world; ++r) {
      EXPECT_TRUE(runs[r]->outcome.ok()) << runs[r]->outcome.status();
      EXPECT_EQ(runs[r]->step, g.end_step) << r;
    }
    *fingerprint = runs[0]->result.ok() ? runs[0]->result->fingerprint : "";
    auto it = runs[0]->host.checkpoints.find(g.end_step);
    if (it == runs[0]->host.checkpoints.end()) return std::nullopt;
    return it->second;
  }
  MemoryHost host;
  host.start = start;
  SessionConfig c = LocalConfig(spec);
  c.replicas.clear();
  for (int r = 0; r < g.world; ++r) c.replicas.push_back(r);
  c.world_replicas = g.world;
  c.end_step = g.end_step;
  auto session = TrainingSession::Create(std::move(c), &host);
  EXPECT_TRUE(session.ok()) << session.status();
  if (!session.ok()) return std::nullopt;
  EXPECT_TRUE((*session)->Run().ok());
  absl::StatusOr<SessionResult> result = (*session)->Result();
  *fingerprint = result.ok() ? result->fingerprint : "";
  auto it = host.checkpoints.find(g.end_step);
  if (it == host.checkpoints.end()) return std::nullopt;
  return it->second;
}

// Runs `history` from step 0 and returns the fingerprint at its end.
std::string RunHistory(const JobSpec& spec,
                       const std::vector<Generation>& history, bool ranks) {
  std::optional<LoadedCheckpoint> state;
  std::string fingerprint;
  for (const Generation& g : history) {
    state = RunGeneration(spec, g, state, ranks, &fingerprint);
    EXPECT_TRUE(state.has_value()) << "no checkpoint at " << g.end_step;
    if (!state.has_value()) return "";
  }
  EXPECT_EQ(fingerprint.size(), 32u);
  return fingerprint;
}

// An elastic job's result is a pure function of its membership history:
// 3 workers to step 4, 2 (each replica's half of the global batch in two
// micro-batches) to step 12, 3 again to the end, replayed, ends on the
// same bits; a run that never changed its world on others.
TEST(TrainingSessionTest, AnElasticHistoryReplaysToTheSameBits) {
  JobSpec spec = Job(3);  // global batch 24, 160 samples: 7 steps an epoch
  spec.cluster.min_workers = 2;
  ASSERT_TRUE(spec.elastic());
  const std::vector<Generation> history = {{3, 4}, {2, 12}, {3, 14}};
  const std::string first = RunHistory(spec, history, true);
  EXPECT_EQ(RunHistory(spec, history, true), first);
  EXPECT_NE(RunHistory(spec, {{3, 14}}, true), first);
}

// Two ranks sum as one process of two replicas does (the ring's order for
// two): so a history of 2, 1 and 2 workers replayed in one process ends on
// the ranks' bits.
TEST(TrainingSessionTest, AnElasticHistoryOfRanksEqualsOneProcessReplayingIt) {
  JobSpec spec = Job(2);  // global batch 16: at one worker 2 micro-batches
  spec.cluster.min_workers = 1;
  const std::vector<Generation> history = {{2, 4}, {1, 12}, {2, 20}};
  EXPECT_EQ(RunHistory(spec, history, true), RunHistory(spec, history, false));
}

TEST(TrainingSessionTest, EndStepStopsShortOfTheJob) {
  const JobSpec spec = Job(1);
  SessionConfig c = LocalConfig(spec);
  c.end_step = 3;
  MemoryHost host;
  auto session = TrainingSession::Create(std::move(c), &host);
  ASSERT_TRUE(session.ok());
  absl::StatusOr<TrainingSession::Outcome> outcome = (*session)->Run();
  ASSERT_TRUE(outcome.ok());
  EXPECT_EQ(*outcome, TrainingSession::Outcome::kFinished);
  EXPECT_EQ((*session)->step(), 3);
  // The run's end is a progress boundary; the job's is not reached.
  EXPECT_EQ(host.progress_steps, (std::vector<int64_t>{3}));
  EXPECT_FALSE((*session)->Result()->finished);
}

TEST(TrainingSessionTest, ALeavingRankEndsTheRunOnEveryRankAtOneStep) {
  const JobSpec spec = Job(2);
  const auto ranks = RunRanks(spec, 2, [](int rank, MemoryHost& host) {
    if (rank == 1) host.leave_after = 2;  // says so in step 3's sum
  });
  for (int r = 0; r < 2; ++r) {
    const RankRun& run = *ranks[r];
    ASSERT_TRUE(run.outcome.ok()) << run.outcome.status();
    EXPECT_EQ(*run.outcome, TrainingSession::Outcome::kLeaving) << r;
    EXPECT_EQ(run.step, 3) << r;
    EXPECT_EQ(run.leaving, 1) << r;
    EXPECT_TRUE(run.barrier.ok()) << run.barrier;
  }
}

TEST(TrainingSessionTest, DataThatDoesNotFitTheModelIsNamed) {
  const JobSpec spec = Job(1, 7);  // 10 classes in the data
  MemoryHost host;
  auto session = TrainingSession::Create(LocalConfig(spec), &host);
  ASSERT_FALSE(session.ok());
  EXPECT_EQ(session.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(session.status().message().find("data has 10 classes"),
            std::string::npos)
      << session.status();
}

// An IDX file: magic 0x0803 (images of rows x cols) or 0x0801 (labels).
void WriteIdx(const std::string& path, bool images, uint32_t count,
              const std::string& body) {
  std::string h = {0, 0, 8, static_cast<char>(images ? 3 : 1)};
  auto be32 = [&h](uint32_t v) {
    for (int s = 24; s >= 0; s -= 8) h.push_back(static_cast<char>(v >> s));
  };
  be32(count);
  if (images) {
    be32(2);
    be32(2);
  }
  std::ofstream(path, std::ios::binary) << h << body;
}

TEST(TrainingSessionTest, AnEmptyTestSetIsNamed) {
  const std::string dir = ::testing::TempDir();
  WriteIdx(dir + "/train-images", true, 2, std::string(8, '\x10'));
  WriteIdx(dir + "/train-labels", false, 2, std::string("\x01\x00", 2));
  WriteIdx(dir + "/test-images", true, 0, "");  // a valid file of 0 images
  WriteIdx(dir + "/test-labels", false, 0, "");
  absl::StatusOr<JobSpec> spec = ParseJobSpec(absl::StrFormat(R"({
    "name": "empty_test", "steps": 1,
    "model": {"input_shape": [2, 2, 1], "layers": [{"type": "flatten"},
              {"type": "dense", "units": 2}]},
    "data": {"format": "mnist_idx", "num_classes": 2,
             "train_images": "%s/train-images",
             "train_labels": "%s/train-labels",
             "test_images": "%s/test-images", "test_labels": "%s/test-labels"},
    "batch_size_per_replica": 2})",
                                                              dir, dir, dir,
                                                              dir));
  ASSERT_TRUE(spec.ok()) << spec.status();
  MemoryHost host;
  auto session = TrainingSession::Create(LocalConfig(*spec), &host);
  ASSERT_FALSE(session.ok());
  EXPECT_EQ(session.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string message(session.status().message());
  EXPECT_EQ(message.rfind("data: the test set (", 0), 0u) << message;
  EXPECT_NE(message.find("/test-images + "), std::string::npos) << message;
  EXPECT_NE(message.find(
                "/test-labels) is empty: there would be nothing to evaluate"),
            std::string::npos)
      << message;
}

namespace kept_parts {

// The whole state from the parts survivors kept at `step`: each old rank's
// part from itself when it survived, else from the next rank.
LoadedCheckpoint Assemble(const std::map<int, const LoadedCheckpoint*>& kept,
                          int world) {
  TensorParts model, optimizer;
  LoadedCheckpoint out;
  for (int k = 0; k < world; ++k) {
    const int holder = kept.count(k) ? k : (k + 1) % world;
    const LoadedCheckpoint& c = *kept.at(holder);
    out.state = c.state;
    for (int kind = 0; kind < 2; ++kind) {
      for (const TensorPart& p :
           kind == 0 ? c.model_parts : c.optimizer_parts) {
        if (p.owner != k) continue;
        EXPECT_TRUE((kind == 0 ? model : optimizer)
                        .Add("kept", p.name, p.shape, p.offset, p.data.data(),
                             p.data.size())
                        .ok());
      }
    }
  }
  EXPECT_TRUE(model.CheckCoverage("kept", "parameter").ok());
  EXPECT_TRUE(optimizer.CheckCoverage("kept", "optimizer state").ok());
  for (auto& [name, t] : model.tensors()) out.model.emplace_back(name, t);
  for (auto& [name, t] : optimizer.tensors()) {
    out.optimizer.emplace_back(name, t);
  }
  return out;
}

bool SameTensors(const std::vector<std::pair<std::string, Tensor>>& a,
                 const std::vector<std::pair<std::string, Tensor>>& b) {
  std::map<std::string, const Tensor*> by_name;
  for (const auto& [name, t] : b) by_name[name] = &t;
  if (a.size() != b.size()) return false;
  for (const auto& [name, t] : a) {
    auto it = by_name.find(name);
    if (it == by_name.end() || it->second->shape() != t.shape() ||
        std::memcmp(it->second->data(), t.data(), sizeof(float) * t.size()) !=
            0) {
      ADD_FAILURE() << "tensor " << name << " differs";
      return false;
    }
  }
  return true;
}

}  // namespace kept_parts

// Sharded optimizer state with copies, 3 ranks: rank 2 is "killed" while
// ranks 0 and 1 wait inside a chosen collective of step 6 (global step
// index; 6 steps done). The parts they keep (rank 2's own part is rank 0's
// copy) make, bit for bit, the state an unsharded run of the 3 ranks
// checkpoints at the latest step they share: killed in the first
// reduce-scatter, step 6; at the barrier before the update, 6 and 7 on both
// (the update made on the kept copy); in the parameters' all-gather, 7
// (the update made, not gathered).
// cluster.shard with one rank in the generation: said, not silent (the
// whole state is on it).
TEST(TrainingSessionTest, ShardingOverOneRankSaysItHoldsTheWholeState) {
  JobSpec spec = Job(1);
  spec.cluster.shard = ShardMode::kOptimizer;
  const auto ranks =
      RunRanks(spec, 1, [](int, MemoryHost& host) { host.sharded_ok = true; });
  ASSERT_TRUE(ranks[0]->outcome.ok()) << ranks[0]->outcome.status();
  EXPECT_THAT(ranks[0]->host.logs,
              ::testing::Contains(
                  "cluster.shard: one worker this generation, so it holds the "
                  "whole optimizer state (the job shards it when it runs on "
                  "more)"));
}

TEST(TrainingSessionTest, KeptPartsOfShardedCopiesAreTheUnshardedState) {
  JobSpec spec = Job(3);
  spec.optimizer.global_clipnorm = 0.05;  // the norm's sum and its clip
  spec.checkpoint.every_steps = 1;
  const auto whole_run = RunRanks(spec, 3);
  ASSERT_TRUE(whole_run[0]->outcome.ok()) << whole_run[0]->outcome.status();
  const MemoryHost& local = whole_run[0]->host;
  spec.cluster.shard = ShardMode::kOptimizer;
  spec.checkpoint.every_steps = 1000;  // none before the kill
  ASSERT_TRUE(spec.cluster.copies);
  struct Case {
    int32_t bucket;
    std::vector<int64_t> steps;  // what each survivor keeps
  };
  for (const Case& c : std::vector<Case>{{0, {6}},
                                         {kUpdateBarrierBucket, {6, 7}},
                                         {kParamGatherBucket, {7}}}) {
    SCOPED_TRACE(BucketName(c.bucket));
    KillGate gate;
    const auto ranks =
        RunRanks(spec, 3, nullptr, -1,
                 [&](int r, Transport& base,
                     InProcessRing& ring) -> std::unique_ptr<Transport> {
                   return std::make_unique<KillAt>(base, ring, gate, 6,
                                                   c.bucket, r == 2);
                 });
    std::map<int64_t, std::map<int, const LoadedCheckpoint*>> by_step;
    for (int r = 0; r < 2; ++r) {
      ASSERT_FALSE(ranks[r]->outcome.ok());
      ASSERT_TRUE(ranks[r]->kept.ok()) << ranks[r]->kept.status();
      std::vector<int64_t> steps;
      for (const LoadedCheckpoint& k : *ranks[r]->kept) {
        by_step[k.state.step][r] = &k;
        steps.push_back(k.state.step);
      }
      EXPECT_EQ(steps, c.steps) << "rank " << r;
    }
    // The latest step every survivor keeps.
    const int64_t want = c.steps.back();
    ASSERT_EQ(by_step[want].size(), 2u) << "step " << want;
    const LoadedCheckpoint whole = kept_parts::Assemble(by_step[want], 3);
    const LoadedCheckpoint& ref = local.checkpoints.at(want);
    EXPECT_EQ(whole.state.step, want);
    EXPECT_EQ(whole.state.optimizer_iterations, ref.state.optimizer_iterations);
    EXPECT_TRUE(kept_parts::SameTensors(whole.model, ref.model));
    EXPECT_TRUE(kept_parts::SameTensors(whole.optimizer, ref.optimizer));
  }
}

}  // namespace
}  // namespace lockstep
