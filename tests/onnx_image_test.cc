// torchvision's resnet18 (10 classes) brought as ONNX and trained on an
// image folder (MNIST's digits as PNGs, 320 per class; 100 per class to
// test) by a coordinator and 2 workers, beside PyTorch training the module
// it was exported from on the same batches from the same weights, as DDP
// on 2 ranks would (tests/torch_image_steps.py on benchmarks/data_batches'
// samples). After 2 epochs of Adam the test accuracy of lockstep's model
// (its checkpoint, loaded into torchvision's module by name and evaluated
// by torch) is within 0.01 of torch's own, both are above 0.9, and
// lockstep's own evaluation agrees with torch's of its checkpoint.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/fault_fixture.h"
#include "tests/subprocess.h"
#include "tests/torch_util.h"

namespace lockstep {
namespace {

using fault_fixture::FaultTest;
using testing::NewTempDir;
using testing::Runfile;
using testing::RunProcess;
using testing::RunResult;

TEST_F(FaultTest, AnExportedResnet18LearnsAnImageFolderAsTorchDoes) {
  LOCKSTEP_SKIP_OR_FAIL_IF_MISSING(testing::TorchMissing());
  const std::string mnist = testing::MnistDir();
  if (mnist.empty()) {
    GTEST_SKIP() << "needs MNIST: set LOCKSTEP_MNIST_DIR (scripts/test.sh "
                    "does when ../shared/datasets/mnist exists)";
  }
  const std::string dir = NewTempDir("resnet18");
  RunResult folder = RunProcess(
      {"/usr/bin/python3", Runfile("benchmarks/make_image_folder.py"), dir,
       "--mnist", mnist, "--per-class", "320", "--test-per-class", "100"},
      dir, 180);
  ASSERT_EQ(folder.exit.exit_code, 0) << folder.err;
  RunResult ref =
      RunProcess({"/usr/bin/python3", Runfile("tests/torch_onnx_reference.py"),
                  "--out", dir, "--model", "resnet18", "--classes", "10",
                  "--height", "28", "--width", "28", "--seed", "3"},
                 dir, 180);
  ASSERT_EQ(ref.exit.exit_code, 0) << ref.err;
  const nlohmann::json job = {
      {"name", "ft"},
      {"seed", 3},
      {"model", {{"onnx", dir + "/model.onnx"}}},
      {"loss", "sparse_categorical_crossentropy"},
      {"optimizer", {{"type", "adam"}, {"learning_rate", 0.001}}},
      {"data",
       {{"format", "image_folder"},
        {"train_path", dir + "/train"},
        {"test_path", dir + "/test"},
        {"image_size", 28}}},
      {"batch_size_per_replica", 16},
      {"epochs", 2},
      {"checkpoint", {{"every_steps", 0}}},
      {"cluster", {{"workers", 2}, {"replicas_per_worker", 1}}}};
  const std::string batches = dir + "/batches";
  const nlohmann::json result = TrainWithBatches(job, dir, 2);
  ASSERT_TRUE(result.is_object());
  EXPECT_EQ(result["steps"], 200);
  EXPECT_EQ(result["global_batch_size"], 32);
  const std::string checkpoint = result["checkpoint"].get<std::string>();

  RunResult t = RunProcess(
      {"/usr/bin/python3", Runfile("tests/torch_image_steps.py"), "--init",
       dir + "/init.safetensors", "--batches", batches, "--steps", "200",
       "--lr", "0.001", "--replicas", "2", "--model", "resnet18", "--classes",
       "10", "--lockstep", checkpoint + "/model.safetensors"},
      dir, 600);
  ASSERT_EQ(t.exit.exit_code, 0) << t.err;
  const nlohmann::json got = nlohmann::json::parse(t.out, nullptr, false);
  ASSERT_TRUE(got.is_object()) << t.out;
  const double theirs = got["torch"], ours = got["lockstep"];
  const double reported = result["test_accuracy"];
  std::printf(
      "resnet18 on 3,200 digits, 2 epochs: test accuracy torch (DDP-like, "
      "2 ranks) %.4f, lockstep (2 workers) %.4f (its own evaluation %.4f)\n",
      theirs, ours, reported);
  EXPECT_NEAR(ours, theirs, 0.01);
  EXPECT_GT(theirs, 0.9);
  EXPECT_GT(ours, 0.9);
  // 1,000 test images: at most one decided otherwise by rounding.
  EXPECT_NEAR(reported, ours, 0.0011);
}

}  // namespace
}  // namespace lockstep
