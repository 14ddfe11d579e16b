// The published figures, on real MNIST: the Keras multi-GPU guide's MLP
// (2 epochs, >= 0.97 test accuracy) and the TensorFlow tutorial's CNN
// (3 epochs, in one process and on a two-worker cluster), trained by the
// real binary from examples/. The CNN's floor
// is 0.98, not the 0.985 goal: PyTorch on the identical recipe
// (Glorot init, Adam 1e-3 eps 1e-7, batch 64, 3 epochs) ends at
// 0.9795-0.9824 and lockstep at 0.981-0.984 over seeds; see docs/performance.md.
// Needs LOCKSTEP_MNIST_DIR (scripts/test.sh sets it when the data exists).
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "gtest/gtest.h"
#include "tests/local_cluster.h"
#include "tests/subprocess.h"

namespace lockstep {
namespace {

using testing::NewTempDir;
using testing::ReadFileOrEmpty;
using testing::Runfile;
using testing::RunProcess;
using testing::RunResult;
using testing::WriteStringToFile;

class MnistAccuracyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    mnist_ = testing::MnistDir();
    if (mnist_.empty()) GTEST_SKIP() << testing::MnistMissing();
    tmp_ = NewTempDir("mnist");
  }

  // examples/NAME.json with its data paths pointed at MNIST_DIR, written
  // to a temporary file; returns its path.
  std::string ExampleJob(const std::string& name) {
    nlohmann::json job = nlohmann::json::parse(
        ReadFileOrEmpty(Runfile("examples/" + name + ".json")));
    for (const char* key :
         {"train_images", "train_labels", "test_images", "test_labels"}) {
      std::string rel = job["data"][key];
      job["data"][key] = mnist_ + rel.substr(rel.find('/'));
    }
    const std::string path = tmp_ + "/" + name + ".json";
    WriteStringToFile(path, job.dump());
    return path;
  }

  // Trains examples/NAME.json in one process and returns result.json.
  nlohmann::json TrainExample(const std::string& name) {
    const std::string path = ExampleJob(name);
    RunResult r = RunProcess({Runfile("client/lockstep"), "train", path,
                              "--storage", tmp_ + "/storage", "--threads", "2"},
                             tmp_, 900);
    EXPECT_TRUE(r.exit.exited) << "timed out";
    EXPECT_EQ(r.exit.exit_code, 0) << r.out << r.err;
    // The log a user sees, for the record.
    std::cout << r.out.substr(r.out.size() > 2000 ? r.out.size() - 2000 : 0);
    return nlohmann::json::parse(
        ReadFileOrEmpty(tmp_ + "/storage/jobs/" + name + "/result.json"),
        nullptr, false);
  }

  std::string mnist_, tmp_;
};

TEST_F(MnistAccuracyTest, KerasGuideMlpTwoEpochs) {
  nlohmann::json res = TrainExample("mnist_mlp");
  ASSERT_TRUE(res.is_object());
  EXPECT_EQ(res["epochs"], 2);
  EXPECT_EQ(res["steps"], 2 * 938);  // ceil(60000 / 64) per epoch
  EXPECT_GE(res["test_accuracy"].get<double>(), 0.97);
}

TEST_F(MnistAccuracyTest, TutorialCnnThreeEpochs) {
  nlohmann::json res = TrainExample("mnist_cnn");
  ASSERT_TRUE(res.is_object());
  EXPECT_EQ(res["epochs"], 3);
  EXPECT_EQ(res["steps"], 3 * 938);
  EXPECT_GE(res["test_accuracy"].get<double>(), 0.98);
}

// The multi-worker tutorial's setting: the same CNN trained by a coordinator
// and two worker processes (1 replica each, batch 64 per replica, 3 epochs).
TEST_F(MnistAccuracyTest, TutorialCnnTwoWorkersThreeEpochs) {
  testing::LocalCluster cluster(NewTempDir("mnist_cluster"));
  ASSERT_TRUE(cluster.ok()) << cluster.error();
  std::string why;
  ASSERT_TRUE(cluster.StartWorkers(2, 1, 1, &why)) << why;
  RunResult r = cluster.Client(
      {"submit", ExampleJob("mnist_cnn_multiworker"), "--wait"}, 900);
  EXPECT_TRUE(r.exit.exited) << "timed out";
  EXPECT_EQ(r.exit.exit_code, 0) << r.out << r.err;
  std::cout << r.out.substr(r.out.size() > 2000 ? r.out.size() - 2000 : 0);
  nlohmann::json res = nlohmann::json::parse(
      ReadFileOrEmpty(cluster.storage() +
                      "/jobs/mnist_cnn_multiworker/result.json"),
      nullptr, false);
  ASSERT_TRUE(res.is_object());
  EXPECT_EQ(res["replicas"], 2);
  EXPECT_EQ(res["steps"], 3 * 469);  // ceil(60000 / 128) per epoch
  EXPECT_GE(res["test_accuracy"].get<double>(), 0.985);
}

}  // namespace
}  // namespace lockstep
