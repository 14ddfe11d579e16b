// A torch model brought as ONNX trained as a job: `lockstep train` on a
// residual CNN with dropout exported by tests/torch_onnx_reference.py, on
// the built-in synthetic data. It must learn, log what it imported, and
// checkpoint every tensor under the torch state dict's name and shape, so
// the weights load back into the torch module. And the BERT masked LM of
// benchmarks/torch_bert.py exported with its four text inputs, trained on
// the Brown corpus beside the native bert_mlm preset from the same initial
// weights: the two follow each other.
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "gtest/gtest.h"
#include "tests/png_writer.h"
#include "tests/subprocess.h"
#include "tests/test_jobs.h"
#include "tests/torch_util.h"
#include "tests/train_cli_fixture.h"

namespace lockstep {
namespace {

using testing::ReadFileOrEmpty;
using testing::Runfile;
using testing::RunResult;
using testing::TinyJob;
using testing::TorchMissing;
using train_cli_fixture::TrainCliTest;

TEST_F(TrainCliTest, AnExportedTorchCnnTrainsAndCheckpointsUnderItsNames) {
  LOCKSTEP_SKIP_OR_FAIL_IF_MISSING(TorchMissing());
  RunResult ref = testing::RunProcess(
      {"/usr/bin/python3", Runfile("tests/torch_onnx_reference.py"), "--out",
       dir_, "--channels", "1", "--height", "8", "--width", "8", "--filters",
       "8", "--hidden", "32", "--classes", "10", "--dropout", "0.2"},
      dir_, 180);
  ASSERT_TRUE(ref.exit.exited && ref.exit.exit_code == 0) << ref.err;

  nlohmann::json job = TinyJob({{"name", "onnx"}, {"epochs", 4}});
  job["model"] = {{"onnx", "model.onnx"}};
  const std::string storage = dir_ + "/storage";
  RunResult r = Train(WriteJob(job), storage, {"--threads", "2"});
  ASSERT_TRUE(r.exit.exited);
  ASSERT_EQ(r.exit.exit_code, 0) << r.out << r.err;
  const std::string all = r.out + r.err;
  // 15 nodes: 2 Conv, 2 BatchNormalization, 3 Relu, Add, MaxPool, Flatten,
  // 2 Gemm, Dropout and its 2 Constants (ratio, training mode); the relus
  // after bn1 and fc1 fuse into them, the one after the add is a layer;
  // the batch norms' running statistics are parameters (moving averages).
  EXPECT_NE(all.find("/model.onnx: 15 ONNX nodes as 11 layers, input "
                     "[8, 8, 1] (channels last), 16 parameter tensors from "
                     "its initializers"),
            std::string::npos)
      << all;
  nlohmann::json res = Result(storage, "onnx");
  ASSERT_TRUE(res.is_object()) << all;
  EXPECT_GT(res["test_accuracy"].get<double>(), 0.6) << all;  // chance 0.1

  const nlohmann::json want =
      nlohmann::json::parse(ReadFileOrEmpty(dir_ + "/state_dict.json"));
  ASSERT_EQ(want.size(), 16u);  // 6 weights, 6 biases, 4 running statistics
  std::map<std::string, Tensor> ckpt = testing::ReadTensors(
      storage + "/jobs/onnx/checkpoints/" +
      ReadFileOrEmpty(storage + "/jobs/onnx/checkpoints/latest").substr(0, 13) +
      "/model.safetensors");
  ASSERT_EQ(ckpt.size(), want.size());
  for (auto it = want.begin(); it != want.end(); ++it) {
    ASSERT_EQ(ckpt.count(it.key()), 1u) << it.key();
    EXPECT_EQ(nlohmann::json(ckpt.at(it.key()).shape()), it.value())
        << it.key();
  }
}

// An image-folder job (RGB, NHWC as decoded; the graph was exported NCHW)
// and `lockstep predict --image` with its checkpoint: the graph is imported
// again and classifies files by the folders' class names. Two classes:
// images brighter on the left or on the right.
TEST_F(TrainCliTest, AnExportedCnnLearnsAnImageFolderAndPredicts) {
  LOCKSTEP_SKIP_OR_FAIL_IF_MISSING(TorchMissing());
  RunResult ref = testing::RunProcess(
      {"/usr/bin/python3", Runfile("tests/torch_onnx_reference.py"), "--out",
       dir_, "--channels", "3", "--height", "8", "--width", "8", "--filters",
       "4", "--hidden", "8", "--classes", "2"},
      dir_, 180);
  ASSERT_TRUE(ref.exit.exited && ref.exit.exit_code == 0) << ref.err;
  uint32_t rng = 7;
  auto noise = [&rng]() {
    rng = rng * 1664525u + 1013904223u;
    return static_cast<int>((rng >> 24) % 64);
  };
  for (const char* split : {"train", "test"}) {
    for (const char* side : {"left", "right"}) {
      const std::string folder = dir_ + "/" + split + "/" + side;
      ASSERT_EQ(system(("mkdir -p " + folder).c_str()), 0);
      for (int i = 0; i < (std::string(split) == "train" ? 40 : 10); ++i) {
        std::vector<uint8_t> rgb(8 * 8 * 3);
        for (int y = 0; y < 8; ++y) {
          for (int x = 0; x < 8; ++x) {
            const bool lit = (x < 4) == (std::string(side) == "left");
            for (int c = 0; c < 3; ++c) {
              rgb[(y * 8 + x) * 3 + c] =
                  static_cast<uint8_t>((lit ? 150 : 40) + noise());
            }
          }
        }
        testing::WritePng(folder + "/" + std::to_string(i) + ".png", 8, 8, rgb);
      }
    }
  }
  nlohmann::json job = TinyJob({{"name", "sides"}, {"epochs", 6}});
  job["model"] = {{"onnx", "model.onnx"}};
  job["data"] = {{"format", "image_folder"},
                 {"train_path", "train"},
                 {"test_path", "test"},
                 {"image_size", 8}};
  const std::string storage = dir_ + "/storage";
  const std::string path = WriteJob(job);
  RunResult r = Train(path, storage);
  ASSERT_EQ(r.exit.exit_code, 0) << r.out << r.err;
  nlohmann::json res = Result(storage, "sides");
  ASSERT_TRUE(res.is_object()) << r.out;
  EXPECT_GE(res["test_accuracy"].get<double>(), 0.95) << r.out;

  RunResult p = testing::RunProcess(
      {train_cli_fixture::Binary(), "predict", path, "--image",
       dir_ + "/test/right", "--storage", storage, "--top-k", "1"},
      dir_, 60);
  ASSERT_EQ(p.exit.exit_code, 0) << p.out << p.err;
  int right = 0;
  for (size_t at = 0;
       (at = p.out.find(".png: right ", at)) != std::string::npos; ++at) {
    ++right;
  }
  EXPECT_GE(right, 9) << p.out;
  EXPECT_NE(p.out.find("classes from " + dir_ + "/train"), std::string::npos)
      << p.out;
}

// `lockstep check` (as submit) imports the graph: a truncated file, and a
// graph whose input does not fit the data, are refused before any job
// starts, naming the file.
TEST_F(TrainCliTest, CheckRefusesAGraphItCannotTrain) {
  LOCKSTEP_SKIP_OR_FAIL_IF_MISSING(TorchMissing());
  RunResult ref = testing::RunProcess(
      {"/usr/bin/python3", Runfile("tests/torch_onnx_reference.py"), "--out",
       dir_, "--channels", "3", "--height", "8", "--width", "6"},
      dir_, 180);
  ASSERT_TRUE(ref.exit.exited && ref.exit.exit_code == 0) << ref.err;
  nlohmann::json job = TinyJob({{"name", "onnx"}});
  job["model"] = {{"onnx", "model.onnx"}};
  auto check = [&](const std::string& file) {
    return testing::RunProcess(
        {train_cli_fixture::Binary(), "check", WriteJob(job, file)}, dir_, 60);
  };
  RunResult r = check("fits_not.json");
  EXPECT_EQ(r.exit.exit_code, 2);
  EXPECT_NE(r.err.find("lockstep check: error: model.onnx: \"" + dir_ +
                       "/model.onnx\" takes [8, 6, 3] per sample (144 values, "
                       "channels last) but a data sample is [8, 8, 1] (64 "
                       "values)"),
            std::string::npos)
      << r.err;

  const std::string bytes = ReadFileOrEmpty(dir_ + "/model.onnx");
  ASSERT_GT(bytes.size(), 1000u);
  testing::WriteStringToFile(dir_ + "/cut.onnx", bytes.substr(0, 500));
  job["model"]["onnx"] = "cut.onnx";
  r = check("cut.json");
  EXPECT_EQ(r.exit.exit_code, 2);
  EXPECT_NE(r.err.find("lockstep check: error: model.onnx: \"" + dir_ +
                       "/cut.onnx\" is not an ONNX model (500 bytes that do "
                       "not parse as a ModelProto with a graph; truncated?)"),
            std::string::npos)
      << r.err;
  job["model"]["onnx"] = "missing.onnx";
  r = check("missing.json");
  EXPECT_EQ(r.exit.exit_code, 2);
  EXPECT_NE(
      r.err.find("model.onnx: no such file \"" + dir_ + "/missing.onnx\""),
      std::string::npos)
      << r.err;
}

// The exported BERT (benchmarks/torch_bert.py through torch.onnx.export,
// dropout off) trains on a slice of the Brown corpus as the native bert_mlm
// preset does from the same initial weights (the module's, init.safetensors)
// on the same batches (one seed): after one epoch the masked-token accuracy
// on valid.txt is within 0.01 of the native run's and the test loss within
// 1%, and both learned (the test loss far below ln(1024) = 6.93, where
// uniform guessing starts).
TEST_F(TrainCliTest, AnExportedBertFollowsTheNativePresetOnBrown) {
  LOCKSTEP_SKIP_OR_FAIL_IF_MISSING(TorchMissing());
  const std::string brown = testing::BrownDir();
  if (brown.empty()) GTEST_SKIP() << testing::BrownMissing();
  RunResult ref =
      testing::RunProcess({"/usr/bin/python3",
                           Runfile("tests/torch_onnx_text_reference.py"),
                           "--out",
                           dir_,
                           "--export-only",
                           "--vocab",
                           "1024",
                           "--hidden",
                           "32",
                           "--layers",
                           "2",
                           "--heads",
                           "2",
                           "--intermediate",
                           "64",
                           "--length",
                           "32",
                           "--predictions",
                           "5",
                           "--max-positions",
                           "32",
                           "--std",
                           "0.02",
                           "--seed",
                           "4"},
                          dir_, 180);
  ASSERT_TRUE(ref.exit.exited && ref.exit.exit_code == 0) << ref.err;
  testing::WriteStringToFile(
      dir_ + "/train.txt",
      testing::ReadFileOrEmpty(brown + "/train.txt").substr(0, 400000));
  testing::WriteStringToFile(
      dir_ + "/valid.txt",
      testing::ReadFileOrEmpty(brown + "/valid.txt").substr(0, 60000));

  nlohmann::json job = {{"seed", 2},
                        {"loss", "sparse_categorical_crossentropy"},
                        {"optimizer",
                         {{"type", "adamw"},
                          {"learning_rate", 0.002},
                          {"weight_decay", 0.01},
                          {"exclude_from_weight_decay", {"LayerNorm", "bias"}},
                          {"global_clipnorm", 1.0}}},
                        {"data",
                         {{"format", "text"},
                          {"train_path", "train.txt"},
                          {"test_path", "valid.txt"},
                          {"min_line_chars", 20},
                          {"vocab_size", 1024},
                          {"sequence_length", 32},
                          {"mask_rate", 0.15},
                          {"max_predictions", 5}}},
                        {"batch_size_per_replica", 16},
                        {"epochs", 1}};
  nlohmann::json native = job;
  native["name"] = "native";
  native["model"] = {{"preset", "bert_mlm"},
                     {"vocab_size", 1024},
                     {"hidden", 32},
                     {"layers", 2},
                     {"heads", 2},
                     {"intermediate", 64},
                     {"max_positions", 32},
                     {"dropout", 0.0},
                     {"init", {{"safetensors", dir_ + "/init.safetensors"}}}};
  nlohmann::json onnx = job;
  onnx["name"] = "onnx";
  onnx["model"] = {
      {"onnx", "model.onnx"},
      {"input",
       {"token_ids", "segment_ids", "padding_mask", "mask_positions"}}};
  const std::string storage = dir_ + "/storage";
  for (const nlohmann::json* j : {&native, &onnx}) {
    const std::string name = (*j)["name"].get<std::string>();
    RunResult r =
        Train(WriteJob(*j, name + ".json"), storage, {"--threads", "2"});
    ASSERT_TRUE(r.exit.exited && r.exit.exit_code == 0)
        << name << ": " << r.out << r.err;
    if (name == "onnx") {
      EXPECT_NE((r.out + r.err).find("ONNX nodes as"), std::string::npos)
          << r.out << r.err;
    }
  }
  nlohmann::json a = Result(storage, "native");
  nlohmann::json b = Result(storage, "onnx");
  ASSERT_TRUE(a.is_object() && b.is_object());
  const double acc_native = a["test_accuracy"].get<double>();
  const double acc_onnx = b["test_accuracy"].get<double>();
  const double loss_native = a["test_loss"].get<double>();
  const double loss_onnx = b["test_loss"].get<double>();
  std::printf(
      "after 1 epoch: native bert_mlm accuracy %.4f loss %.4f; imported "
      "from ONNX accuracy %.4f loss %.4f (%s samples/s vs %s)\n",
      acc_native, loss_native, acc_onnx, loss_onnx,
      b["samples_per_sec"].dump().c_str(), a["samples_per_sec"].dump().c_str());
  EXPECT_EQ(a["steps"], b["steps"]);
  EXPECT_NEAR(acc_onnx, acc_native, 0.01);
  EXPECT_NEAR(loss_onnx, loss_native, 0.01 * loss_native);
  EXPECT_LT(loss_onnx, 6.93 - 0.5);
}

}  // namespace
}  // namespace lockstep
