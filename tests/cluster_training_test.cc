// Training on a real local cluster: `lockstep coordinator` and two
// `lockstep worker` processes on 127.0.0.1 with free ports. Checks a job
// trained by two workers (parameters identical to the same job run by
// `lockstep train`, checkpoints and event files that verify, a resubmit
// that resumes), the job's ring settings, bf16 compression, batch norm
// statistics across workers, and image_folder data with a damaged file.
// The fixture is in cluster_fixture.h.
#include <dirent.h>
#include <sys/stat.h>

#include <cerrno>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "core/checkpoint/checkpoint.h"
#include "core/summary/event_file_reader.h"
#include "gtest/gtest.h"
#include "tests/cluster_fixture.h"
#include "tests/png_writer.h"
#include "tests/subprocess.h"

namespace lockstep {
namespace {

using cluster_fixture::Binary;
using cluster_fixture::ClusterTest;
using cluster_fixture::kTimeout;
using cluster_fixture::TinyJob;
using testing::ReadFileOrEmpty;
using testing::RunProcess;
using testing::RunResult;
using testing::WriteStringToFile;

TEST_F(ClusterTest, TwoWorkersTrainLikeOneProcessAndLeaveVerifiedFiles) {
  StartWorkers(2);
  const std::string job = WriteJob(TinyJob());
  RunResult r = Client({"submit", job, "--wait"});
  ASSERT_TRUE(r.exit.exited);
  ASSERT_EQ(r.exit.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("RUNNING generation 1 from step 0: rank 0 = w1"),
            std::string::npos)
      << r.out;
  std::regex progress(
      R"(\[tiny\] epoch [1-3]/3  step \d+/96  loss \d+\.\d{4}  acc \d\.\d{4}  lr \S+  [\d,]+ samples/s  ETA \S+  workers 2/2)");
  EXPECT_TRUE(std::regex_search(r.out, progress)) << r.out;
  EXPECT_NE(r.out.find("epoch 3 done"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("job tiny SUCCEEDED: 96 steps"), std::string::npos)
      << r.out;
  // In the order they happened: the last epoch's line, then the final
  // checkpoint's commit (the chief reports before it uploads).
  const size_t committed = r.out.find("step-00000096 committed");
  ASSERT_NE(committed, std::string::npos) << r.out;
  EXPECT_LT(r.out.find("epoch 3 done"), committed) << r.out;

  nlohmann::json res = Result(storage_, "tiny");
  ASSERT_TRUE(res.is_object()) << r.out;
  EXPECT_EQ(res["steps"], 96);  // ceil(1000 / (2 x 16)) x 3
  EXPECT_EQ(res["replicas"], 2);
  EXPECT_GT(res["test_accuracy"].get<double>(), 0.5);

  // The same job in one process (2 local replicas) ends with the same bytes:
  // for two ranks the ring sum g0 + g1 is the local sum.
  RunResult local = RunProcess(
      {Binary(), "train", job, "--storage", dir_ + "/local", "--threads", "1"},
      dir_, kTimeout);
  ASSERT_EQ(local.exit.exit_code, 0) << local.err;
  nlohmann::json lres = Result(dir_ + "/local", "tiny");
  EXPECT_EQ(res["fingerprint"], lres["fingerprint"]);
  EXPECT_EQ(res["test_accuracy"], lres["test_accuracy"]);

  // Checkpoints committed by the coordinator verify and hold the last step.
  CheckpointStore store(storage_ + "/jobs/tiny/checkpoints", 3);
  std::vector<std::string> warnings;
  absl::StatusOr<LoadedCheckpoint> ckpt = store.LoadLatest(&warnings);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  EXPECT_EQ(ckpt->state.step, 96);
  EXPECT_TRUE(warnings.empty());
  EXPECT_EQ(store.ListSteps().size(), 3u);  // keep = 3

  // The event file's every record verifies; the chief's metrics are there.
  const std::string sdir = storage_ + "/jobs/tiny/summaries";
  DIR* d = opendir(sdir.c_str());
  ASSERT_NE(d, nullptr);
  std::vector<std::string> files;
  while (dirent* e = readdir(d)) {
    if (std::string(e->d_name).rfind("events.out.tfevents.", 0) == 0) {
      files.push_back(sdir + "/" + e->d_name);
    }
  }
  closedir(d);
  ASSERT_EQ(files.size(), 1u);
  absl::StatusOr<EventFile> events = ReadEventFile(files[0]);
  ASSERT_TRUE(events.ok()) << events.status();
  int losses = 0, evals = 0;
  std::map<int64_t, double> allreduce, waited;
  for (const ScalarEvent& e : events->scalars) {
    losses += e.tag == "train/loss";
    evals += e.tag == "eval/accuracy";
    if (e.tag == "allreduce_seconds") allreduce[e.step] = e.value;
    if (e.tag == "allreduce_wait_seconds") waited[e.step] = e.value;
  }
  EXPECT_EQ(losses, 9);  // every 10 of 96 steps
  EXPECT_EQ(evals, 3);
  // The sampled steps' all-reduce time, and the part of it the step waited
  // for after backward: not more than the whole (give or take a thread's
  // wake-up: the wait starts before the last bucket's all-reduce does).
  ASSERT_EQ(waited.size(), 9u);
  for (const auto& [step, wait] : waited) {
    ASSERT_EQ(allreduce.count(step), 1u) << step;
    EXPECT_GT(allreduce[step], 0.0) << step;
    EXPECT_GE(wait, 0.0) << step;
    EXPECT_LE(wait, allreduce[step] + 0.02) << step;
  }

  // Submitted again with more epochs, the name's job is refused naming the
  // field; with --resume it continues from its last checkpoint (the
  // workers fetch it from the coordinator) and ends with the bytes of an
  // uninterrupted 6-epoch run.
  const std::string longer = WriteJob(TinyJob({{"epochs", 6}}), "longer.json");
  RunResult refused = Client({"submit", longer});
  EXPECT_EQ(refused.exit.exit_code, 2);
  EXPECT_NE(refused.err.find("job \"tiny\" already exists (SUCCEEDED at step "
                             "96) with another spec: epochs (3 -> 6)"),
            std::string::npos)
      << refused.err;
  RunResult again = Client({"submit", longer, "--resume", "--wait"});
  ASSERT_EQ(again.exit.exit_code, 0) << again.out << again.err;
  EXPECT_NE(again.out.find("RUNNING generation 2 from step 96"),
            std::string::npos)
      << again.out;
  RunResult straight = RunProcess({Binary(), "train", longer, "--storage",
                                   dir_ + "/straight", "--threads", "1"},
                                  dir_, kTimeout);
  ASSERT_EQ(straight.exit.exit_code, 0) << straight.err;
  EXPECT_EQ(Result(storage_, "tiny")["steps"], 192);
  EXPECT_EQ(Result(storage_, "tiny")["fingerprint"],
            Result(dir_ + "/straight", "tiny")["fingerprint"]);
  res = Result(storage_, "tiny");

  RunResult st = Client({"status", "tiny"});
  EXPECT_EQ(st.exit.exit_code, 0);
  EXPECT_NE(st.out.find("job tiny: SUCCEEDED (generation 2)"),
            std::string::npos)
      << st.out;
  EXPECT_NE(st.out.find(res["fingerprint"].get<std::string>()),
            std::string::npos);
  RunResult list = Client({"list"});
  EXPECT_TRUE(std::regex_search(
      list.out, std::regex(R"(tiny\s+SUCCEEDED\s+2\s+192/192\s+[01]\.\d{4})")))
      << list.out;
  EXPECT_NE(list.out.find("workers: 2"), std::string::npos) << list.out;
}

// The job's ring settings reach the workers: one stream, and 4 KiB messages,
// which cut each ring segment (1,205 floats: the MLP's 2,410 gradients in
// one bucket, over two ranks) into two chunks. The bytes are still those of
// one process.
TEST_F(ClusterTest, TheJobsRingSettingsChangeTheMessagesNotTheBytes) {
  StartWorkers(2);
  const std::string job = WriteJob(TinyJob(nlohmann::json::parse(
      R"({"cluster": {"bucket_kib": 64, "ring_chunk_kib": 4,
                      "ring_streams": 1}})")));
  RunResult r = Client({"submit", job, "--wait"});
  ASSERT_TRUE(r.exit.exited);
  ASSERT_EQ(r.exit.exit_code, 0) << r.out << r.err;
  EXPECT_NE(workers_[0]->Stdout().find(
                "over a ring of 1 stream(s), messages up to 4 KiB"),
            std::string::npos)
      << workers_[0]->Stdout();
  RunResult local = RunProcess(
      {Binary(), "train", job, "--storage", dir_ + "/local", "--threads", "1"},
      dir_, kTimeout);
  ASSERT_EQ(local.exit.exit_code, 0) << local.err;
  EXPECT_EQ(Result(storage_, "tiny")["fingerprint"],
            Result(dir_ + "/local", "tiny")["fingerprint"]);
}

// cluster.compression "bf16": the gradients cross the ring as bfloat16.
// The run differs from the float32 one (each sum is rounded), the workers
// still agree on every parameter (the job checks their fingerprints), and
// the model learns as well.
TEST_F(ClusterTest, CompressedGradientsTrainAndTheWorkersStillAgree) {
  StartWorkers(2);
  const std::string job = WriteJob(TinyJob(
      nlohmann::json::parse(R"({"cluster": {"compression": "bf16"}})")));
  RunResult r = Client({"submit", job, "--wait"});
  ASSERT_TRUE(r.exit.exited);
  ASSERT_EQ(r.exit.exit_code, 0) << r.out << r.err;
  EXPECT_NE(workers_[1]->Stdout().find(
                "as bfloat16 on the wire (cluster.compression)"),
            std::string::npos)
      << workers_[1]->Stdout();
  RunResult local = RunProcess(
      {Binary(), "train", job, "--storage", dir_ + "/local", "--threads", "1"},
      dir_, kTimeout);
  ASSERT_EQ(local.exit.exit_code, 0) << local.err;
  const nlohmann::json res = Result(storage_, "tiny");
  const nlohmann::json exact = Result(dir_ + "/local", "tiny");
  EXPECT_NE(res["fingerprint"], exact["fingerprint"]);
  EXPECT_GT(res["test_accuracy"].get<double>(), 0.5);
  EXPECT_NEAR(res["test_accuracy"].get<double>(),
              exact["test_accuracy"].get<double>(), 0.05);
}

// Batch norm across workers: each replica normalizes with its own batch,
// and the running statistics travel with the gradients, so 2 workers end
// with the bytes of one process with 2 local replicas, running statistics
// included (the job checks the workers' fingerprints on the way). With
// `sync: true` the statistics are the global batch's, summed inside the
// pass (between the workers over the ring): the same holds (for two the
// ring's sum is the local one), and the bytes are not those of sync false.
TEST_F(ClusterTest, BatchNormRunningStatisticsAgreeAcrossWorkers) {
  StartWorkers(2);
  std::string fingerprints[2];
  for (bool sync : {false, true}) {
    nlohmann::json model = nlohmann::json::parse(R"({
      "model": {"input_shape": [8, 8, 1], "layers": [
        {"type": "conv2d", "name": "conv", "filters": 8, "kernel_size": 3,
         "padding": 1, "use_bias": false},
        {"type": "batch_norm", "name": "bn", "momentum": 0.9,
         "activation": "relu6"},
        {"type": "flatten"},
        {"type": "dense", "units": 10}]}})");
    model["model"]["layers"][1]["sync"] = sync;
    model["name"] = sync ? "sync" : "local";
    const std::string name = model["name"];
    const std::string job = WriteJob(TinyJob(model), name + ".json");
    RunResult r = Client({"submit", job, "--wait"});
    ASSERT_TRUE(r.exit.exited);
    ASSERT_EQ(r.exit.exit_code, 0) << r.out << r.err;
    RunResult local = RunProcess({Binary(), "train", job, "--storage",
                                  dir_ + "/local", "--threads", "1"},
                                 dir_, kTimeout);
    ASSERT_EQ(local.exit.exit_code, 0) << local.err;
    const nlohmann::json res = Result(storage_, name);
    EXPECT_EQ(res["fingerprint"], Result(dir_ + "/local", name)["fingerprint"])
        << name;
    EXPECT_GT(res["test_accuracy"].get<double>(), 0.5) << name;
    fingerprints[sync] = res["fingerprint"];
  }
  EXPECT_NE(fingerprints[0], fingerprints[1]);
}

// image_folder data on a cluster: each worker decodes its shard's PNGs; a
// damaged file is skipped by whichever worker meets it, and the job counts
// it once in result.json and its events.
TEST_F(ClusterTest, ImageFolderWithADamagedFileTrainsAndCountsItOnce) {
  const std::string root = dir_ + "/images";
  for (int label = 0; label < 2; ++label) {
    const std::string cls = root + (label == 0 ? "/red" : "/blue");
    ASSERT_EQ(mkdir(root.c_str(), 0755) == 0 || errno == EEXIST, true);
    ASSERT_EQ(mkdir(cls.c_str(), 0755), 0);
    for (int i = 0; i < 48; ++i) {
      std::vector<uint8_t> rgb(8 * 8 * 3);
      for (int k = 0; k < 64; ++k) {
        const uint8_t v = static_cast<uint8_t>(120 + (k * 7 + i * 13) % 100);
        rgb[k * 3 + (label == 0 ? 0 : 2)] = v;
        rgb[k * 3 + 1] = static_cast<uint8_t>((k * 31 + i) % 60);
      }
      testing::WritePng(cls + "/" + std::to_string(i) + ".png", 8, 8, rgb);
    }
  }
  WriteStringToFile(root + "/red/damaged.png",
                    ReadFileOrEmpty(root + "/red/0.png").substr(0, 30));
  StartWorkers(2);
  nlohmann::json job = TinyJob();
  job["epochs"] = 4;
  job["data"] = {{"format", "image_folder"},
                 {"train_path", root},
                 {"validation_split", 0.25},
                 {"image_size", 8}};
  job["model"] = nlohmann::json::parse(R"({"input_shape": [8, 8, 3],
      "layers": [{"type": "flatten"}, {"type": "dense", "units": 2}]})");
  RunResult r = Client({"submit", WriteJob(job), "--wait"});
  ASSERT_TRUE(r.exit.exited);
  ASSERT_EQ(r.exit.exit_code, 0) << r.out << r.err;
  const nlohmann::json res = Result(storage_, "tiny");
  ASSERT_TRUE(res.is_object()) << r.out;
  EXPECT_EQ(res["skipped_samples"], 1) << r.out;
  EXPECT_GT(res["test_accuracy"].get<double>(), 0.9) << r.out;
  EXPECT_NE(r.out.find("1 samples could not be read and were skipped"),
            std::string::npos)
      << r.out;
}

}  // namespace
}  // namespace lockstep
