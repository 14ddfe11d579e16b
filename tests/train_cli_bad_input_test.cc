// `lockstep train` on bad input: malformed or missing job files, unknown
// layers, shapes and losses that do not fit the data, bad IDX files,
// storage that cannot be written and unknown flags. Each fails with a
// clear message naming the file or field, a non-zero exit, and nothing
// written to the storage folder. The fixture is in train_cli_fixture.h.
#include <sys/stat.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "tests/subprocess.h"
#include "tests/test_jobs.h"
#include "tests/train_cli_fixture.h"

namespace lockstep {
namespace {

using testing::RunProcess;
using testing::RunResult;
using testing::TinyJob;
using testing::WriteStringToFile;
using train_cli_fixture::Binary;
using train_cli_fixture::Exists;
using train_cli_fixture::kTimeout;
using train_cli_fixture::TrainCliTest;

// ---- Bad input: a clear message naming the file or field, a non-zero
// exit, and nothing written to the storage folder.

class BadInputTest : public TrainCliTest {
 protected:
  void ExpectRejected(const std::string& job_path, const std::string& needle,
                      int exit_code = 2) {
    const std::string storage = dir_ + "/storage";
    RunResult r = Train(job_path, storage);
    ASSERT_TRUE(r.exit.exited) << "hung";
    EXPECT_EQ(r.exit.term_signal, 0) << "crashed: " << r.err;
    EXPECT_EQ(r.exit.exit_code, exit_code) << r.out << r.err;
    EXPECT_NE(r.err.find("lockstep train: error: "), std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
    EXPECT_FALSE(Exists(storage + "/jobs")) << "half-written output";
  }

  // Trains `job` under a 2 GB address-space limit with `flags`, and
  // expects the verb's out-of-memory line: exit 1, no signal, no
  // "terminate called" (an exception that escaped a thread), no result.
  // Returns the storage folder.
  std::string ExpectOutOfMemory(const nlohmann::json& job,
                                const std::vector<std::string>& flags) {
    const std::string storage = dir_ + "/storage";
    std::vector<std::string> argv = {
        "/bin/sh",     "-c",        "ulimit -v 2000000 && exec \"$@\"",
        "sh",          Binary(),    "train",
        WriteJob(job), "--storage", storage};
    argv.insert(argv.end(), flags.begin(), flags.end());
    RunResult r = RunProcess(argv, dir_, kTimeout);
    EXPECT_TRUE(r.exit.exited) << "hung";
    EXPECT_EQ(r.exit.term_signal, 0) << "crashed: " << r.err;
    EXPECT_EQ(r.exit.exit_code, 1) << r.err;
    EXPECT_NE(
        r.err.find("lockstep train: error: out of memory (std::bad_alloc)"),
        std::string::npos)
        << r.err;
    EXPECT_EQ(r.err.find("terminate called"), std::string::npos) << r.err;
    EXPECT_FALSE(Exists(storage + "/jobs/tiny/result.json"));
    return storage;
  }

  // Writes an IDX file: magic, dims, then `payload`.
  std::string WriteIdx(const std::string& name, uint32_t magic,
                       std::vector<uint32_t> dims, const std::string& payload) {
    std::string b;
    auto be32 = [&](uint32_t v) {
      for (int s = 24; s >= 0; s -= 8) b.push_back(char((v >> s) & 0xff));
    };
    be32(magic);
    for (uint32_t d : dims) be32(d);
    b += payload;
    std::string path = dir_ + "/" + name;
    WriteStringToFile(path, b);
    return path;
  }

  nlohmann::json IdxJob(const std::string& train_images,
                        const std::string& train_labels) {
    nlohmann::json job = TinyJob();
    job["model"]["input_shape"] = {4, 4, 1};
    job["data"] = {
        {"format", "mnist_idx"},        {"train_images", train_images},
        {"train_labels", train_labels}, {"test_images", train_images},
        {"test_labels", train_labels},  {"scale", 255}};
    return job;
  }
};

TEST_F(BadInputTest, MalformedJson) {
  const std::string path = dir_ + "/bad.json";
  WriteStringToFile(path, "{\n  \"name\": \"x\",\n  \"seed\": ,\n}");
  ExpectRejected(path, "bad.json: malformed JSON at line 3");
}

TEST_F(BadInputTest, MissingJobFile) {
  ExpectRejected(dir_ + "/nope.json", "No such file or directory");
}

TEST_F(BadInputTest, UnknownLayerType) {
  nlohmann::json job = TinyJob();
  job["model"]["layers"][1]["type"] = "dense3";
  ExpectRejected(WriteJob(job),
                 "model.layers[1].type: unknown layer type \"dense3\"");
}

TEST_F(BadInputTest, DenseAfterConvWithoutFlatten) {
  nlohmann::json job = TinyJob();
  job["model"]["layers"] = nlohmann::json::parse(R"([
      {"type": "conv2d", "filters": 4, "kernel_size": 3},
      {"type": "dense", "units": 10}])");
  // Dense applies to the last axis (as Keras): the output [6, 6, 10] does
  // not fit 10 classes, and the message says where the flatten goes.
  ExpectRejected(WriteJob(job),
                 "model: the model outputs [6, 6, 10] per sample but the data "
                 "has 10 classes (data.num_classes); the last layer needs 10 "
                 "units, after a flatten layer");
}

TEST_F(BadInputTest, BinaryCrossentropyNeedsTwoClassesAndOneOutput) {
  nlohmann::json job = TinyJob({{"loss", "binary_crossentropy"}});
  ExpectRejected(WriteJob(job),
                 "loss: binary_crossentropy needs two classes (labels 0 and "
                 "1), one per sample; the data (synthetic(seed=3, n=1000, "
                 "train)) has 1 label(s) of 10 classes per sample");
  job["data"]["num_classes"] = 2;
  job["model"]["layers"].back()["units"] = 2;
  ExpectRejected(WriteJob(job),
                 "model: binary_crossentropy reads one logit per sample (a "
                 "last dense layer of 1 unit, linear or sigmoid), but the "
                 "model outputs [2] per sample");
}

TEST_F(BadInputTest, NegativeLearningRate) {
  ExpectRejected(WriteJob(TinyJob({{"optimizer", {{"learning_rate", -1}}}})),
                 "optimizer.learning_rate: must be > 0, got -1");
}

TEST_F(BadInputTest, MissingDatasetFile) {
  ExpectRejected(WriteJob(IdxJob(dir_ + "/none-images", dir_ + "/none-labels")),
                 "data.train_images: cannot open \"" + dir_ + "/none-images\"");
}

TEST_F(BadInputTest, TruncatedIdxFile) {
  std::string images =
      WriteIdx("img", 0x803, {10, 4, 4}, std::string(100, 'a'));
  std::string labels = WriteIdx("lab", 0x801, {10}, std::string(10, '\1'));
  ExpectRejected(WriteJob(IdxJob(images, labels)), "truncated");
}

// Malformed data exits 2 like any named bad data file (cli.md), a corrupt
// gzip stream and a folder given as a file included (they exited 1).
TEST_F(BadInputTest, CorruptGzipAndAFolderAreBadData) {
  std::string labels = WriteIdx("lab", 0x801, {10}, std::string(10, '\1'));
  const std::string gz = dir_ + "/img.gz";
  WriteStringToFile(gz, std::string("\x1f\x8b\x08\x00\x00\x00\x00\x00"
                                    "\x00\x03garbage-garbage",
                                    24));
  ExpectRejected(WriteJob(IdxJob(gz, labels)),
                 "data.train_images: \"" + gz + "\": corrupt gzip stream: ");
  mkdir((dir_ + "/folder").c_str(), 0755);
  ExpectRejected(
      WriteJob(IdxJob(dir_ + "/folder", labels)),
      "data.train_images: \"" + dir_ + "/folder\" is a folder, not a file");
}

// Images of another shape with as many values are refused: a test file of
// 2 x 8 images beside 4 x 4 train images, and a model that takes 2 x 8
// images of 4 x 4 data (both trained on scrambled pixels before).
TEST_F(BadInputTest, ImagesOfAnotherShapeAreRefused) {
  const std::string pixels(160, 'a');
  std::string images = WriteIdx("img", 0x803, {10, 4, 4}, pixels);
  std::string wide = WriteIdx("wide", 0x803, {10, 2, 8}, pixels);
  std::string labels = WriteIdx("lab", 0x801, {10}, std::string(10, '\1'));
  nlohmann::json job = IdxJob(images, labels);
  job["data"]["test_images"] = wide;
  ExpectRejected(WriteJob(job), "data: the train samples are [4, 4] (");
  job = IdxJob(images, labels);
  job["model"]["input_shape"] = {2, 8, 1};
  ExpectRejected(WriteJob(job),
                 "model.input_shape: [2, 8, 1] takes images of [2, 8], but the "
                 "data (");
  // A flat model takes them flattened, as before.
  job["model"]["input_shape"] = {16};
  RunResult r = Train(WriteJob(job), dir_ + "/flat");
  EXPECT_EQ(r.exit.exit_code, 0) << r.err;
}

TEST_F(BadInputTest, LabelCountDiffersFromImageCount) {
  std::string images =
      WriteIdx("img", 0x803, {10, 4, 4}, std::string(160, 'a'));
  std::string labels = WriteIdx("lab", 0x801, {9}, std::string(9, '\1'));
  ExpectRejected(WriteJob(IdxJob(images, labels)), "has 9 labels");
}

TEST_F(BadInputTest, LabelOutOfRange) {
  std::string images =
      WriteIdx("img", 0x803, {10, 4, 4}, std::string(160, 'a'));
  std::string payload(10, '\1');
  payload[7] = 12;
  std::string labels = WriteIdx("lab", 0x801, {10}, payload);
  ExpectRejected(WriteJob(IdxJob(images, labels)),
                 "label 12 at index 7 is out of range [0, 10)");
}

TEST_F(BadInputTest, StorageThatCannotBeWritten) {
  const std::string file = dir_ + "/a-file";
  WriteStringToFile(file, "x");
  RunResult r = Train(WriteJob(TinyJob()), file + "/storage");
  ASSERT_TRUE(r.exit.exited);
  EXPECT_EQ(r.exit.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("--storage: cannot create \"" + file + "\""),
            std::string::npos)
      << r.err;
}

// Flags that were silently ignored: a negative --stop-after-steps (no
// limit) and --devices cpu:N for a job of another replica count.
TEST_F(BadInputTest, TrainFlagsThatCannotApplyAreRefused) {
  const std::string job = WriteJob(TinyJob());
  RunResult r = Train(job, dir_ + "/s", {"--stop-after-steps", "-5"});
  EXPECT_EQ(r.exit.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--stop-after-steps: must be 0 or more, got -5"),
            std::string::npos)
      << r.err;
  r = Train(job, dir_ + "/s", {"--devices", "cpu:2"});
  EXPECT_EQ(r.exit.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--devices cpu:2: the job has 1 replicas"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(Exists(dir_ + "/s/jobs"));
  r = Train(job, dir_ + "/s", {"--devices", "cpu:1"});
  EXPECT_EQ(r.exit.exit_code, 0) << r.err;
}

// A global batch past the dataset trains (one step an epoch over every
// sample, as Keras does) and says so.
TEST_F(BadInputTest, ABatchLargerThanTheDataIsNoted) {
  nlohmann::json job = TinyJob();
  job["batch_size_per_replica"] = 100000;
  RunResult r = Train(WriteJob(job), dir_ + "/s");
  EXPECT_EQ(r.exit.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("note: the global batch (100000) is larger than the "
                       "1000 training samples: each epoch is one step over "
                       "all of them"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("1 steps per epoch"), std::string::npos) << r.out;
}

TEST_F(BadInputTest, UnknownFlagAndMissingJob) {
  RunResult r =
      RunProcess({Binary(), "train", "--storag", "x"}, dir_, kTimeout);
  EXPECT_EQ(r.exit.exit_code, 2);
  EXPECT_NE(r.err.find("unknown flag --storag"), std::string::npos) << r.err;
  r = RunProcess({Binary(), "frobnicate"}, dir_, kTimeout);
  EXPECT_EQ(r.exit.exit_code, 2);
  EXPECT_NE(r.err.find("unknown command \"frobnicate\""), std::string::npos);
}

// A model past the machine's memory (here its limit: 2 GB of address
// space) is one line naming memory, exit 1, nothing written; it was an
// uncaught std::bad_alloc (SIGABRT).
TEST_F(BadInputTest, AModelPastMemoryIsAnErrorNotACrash) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "a sanitizer build cannot run under ulimit -v (its shadow "
                  "memory), and its allocator aborts instead of throwing";
#endif
  nlohmann::json job = TinyJob();
  job["model"]["layers"] = nlohmann::json::parse(
      R"([{"type": "flatten"}, {"type": "dense", "units": 200000000},
          {"type": "dense", "units": 10}])");
  const std::string storage = ExpectOutOfMemory(job, {"--threads", "1"});
  EXPECT_FALSE(Exists(storage + "/jobs")) << "half-written output";
}

// Memory that runs out on a replica's lane (two replicas on two threads,
// a batch whose activations pass the limit) reaches the verb's handler
// as the model's does: it ended the process ("terminate called after
// throwing an instance of 'std::bad_alloc'").
TEST_F(BadInputTest, ABatchPastMemoryOnAReplicaThreadIsAnErrorNotACrash) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "a sanitizer build cannot run under ulimit -v (its shadow "
                  "memory), and its allocator aborts instead of throwing";
#endif
  nlohmann::json job = TinyJob();
  job["model"]["layers"] = nlohmann::json::parse(
      R"([{"type": "flatten"},
          {"type": "dense", "units": 8192, "activation": "relu"},
          {"type": "dense", "units": 10}])");
  job["data"]["train_samples"] = 40000;
  job["batch_size_per_replica"] = 16000;
  job["epochs"] = 1;
  job["cluster"]["replicas_per_worker"] = 2;
  ExpectOutOfMemory(job, {"--threads", "2", "--devices", "cpu:2"});
}

// `check` (what `submit` sends) resolves relative data paths to absolute
// ones: the workers do not share this working folder. A job named by a
// relative path, and --data-dir relative too; --data-on-workers leaves the
// paths as given (they are the workers' own).
TEST_F(BadInputTest, CheckSendsAbsoluteDataPaths) {
  mkdir((dir_ + "/d").c_str(), 0755);
  WriteIdx("d/img", 0x803, {10, 4, 4}, std::string(160, 'a'));
  WriteIdx("d/lab", 0x801, {10}, std::string(10, '\1'));
  testing::WriteStringToFile(dir_ + "/d/job.json", IdxJob("img", "lab").dump());
  // Run from dir_ (RunProcess keeps the test's working folder).
  auto train_images = [&](std::vector<std::string> args) {
    std::vector<std::string> argv = {
        "/bin/sh", "-c", "cd \"$0\" && exec \"$@\"", dir_, Binary(), "check"};
    argv.insert(argv.end(), args.begin(), args.end());
    RunResult r = RunProcess(argv, dir_, kTimeout);
    EXPECT_EQ(r.exit.exit_code, 0) << r.err;
    const nlohmann::json j =
        nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
    return j.is_object() ? j["data"].value("train_images", "") : r.out;
  };
  EXPECT_EQ(train_images({"d/job.json"}), dir_ + "/d/img");
  EXPECT_EQ(train_images({"./d/job.json"}), dir_ + "/d/img");
  EXPECT_EQ(train_images({dir_ + "/d/job.json"}), dir_ + "/d/img");
  EXPECT_EQ(
      train_images({WriteJob(IdxJob("d/img", "d/lab")), "--data-dir", "."}),
      dir_ + "/d/img");
  EXPECT_EQ(train_images({"d/job.json", "--data-on-workers"}), "d/img");
}

// The daemons' flags are checked before anything listens or dials: each
// refusal names the flag (a bare --listen host once bound gRPC's default
// port 443; an --advertise port past 65535 was taken as given).
TEST_F(BadInputTest, DaemonFlagsNameWhatIsWrong) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"worker", "--listen", "127.0.0.1:99999"},
       "--listen \"127.0.0.1:99999\": give host:port with a port from 0 to "
       "65535"},
      {{"worker", "--advertise", "127.0.0.1:99999"},
       "--advertise \"127.0.0.1:99999\": give host:port with a port from 0 "
       "to 65535"},
      {{"worker", "--advertise", ":7071"}, "--advertise \":7071\": no host"},
      {{"worker", "--lanes", "17"}, "--lanes must be 1..16"},
      {{"worker", "--threads", "5000"},
       "--threads must be 0 (every core) to 1024"},
      {{"worker", "--replicas", "2", "--devices", "cpu:3"},
       "--replicas 2 and --devices cpu:3 (3 replicas) disagree: give one of "
       "them"},
      {{"coordinator", "--listen", "[::1"}, "--listen \"[::1\": an unclosed ["},
      {{"coordinator", "--listen", "127.0.0.1:http"},
       "give host:port with a port from 0 to 65535"},
      {{"coordinator", "--advertise", "chief:70000"},
       "--advertise \"chief:70000\": give host:port"},
  };
  for (const auto& [flags, needle] : cases) {
    std::vector<std::string> argv = {Binary()};
    argv.insert(argv.end(), flags.begin(), flags.end());
    if (flags[0] == "worker") {
      argv.insert(argv.end(), {"--coordinator", "127.0.0.1:1"});
    } else {
      argv.insert(argv.end(), {"--storage", dir_ + "/cst"});
    }
    RunResult r = RunProcess(argv, dir_, kTimeout);
    ASSERT_TRUE(r.exit.exited) << "hung: " << flags[1];
    EXPECT_EQ(r.exit.exit_code, 2) << flags[1] << ": " << r.err;
    EXPECT_NE(r.err.find("lockstep " + flags[0] + ": "), std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  }
  EXPECT_FALSE(Exists(dir_ + "/cst")) << "a refused coordinator wrote storage";
}

}  // namespace
}  // namespace lockstep
