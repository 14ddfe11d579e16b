// Every job in examples/ parses into a JobSpec (its data paths need not
// exist: they are read when a job runs), and its model builds over the
// data's sample shape (from the layers' initializers: pretrained files are
// not shipped).
#include <string>

#include "core/job/job_spec.h"
#include "core/model/model.h"
#include "gtest/gtest.h"
#include "tests/subprocess.h"

namespace lockstep {
namespace {

class ExamplesTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ExamplesTest, ParsesAndBuilds) {
  const std::string path = testing::Runfile("examples/" + GetParam());
  absl::StatusOr<JobSpec> spec = LoadJobSpec(path, "");
  ASSERT_TRUE(spec.ok()) << spec.status();
  if (spec->model.single_input_shape().empty() &&
      spec->model.inputs.size() == 1) {
    GTEST_SKIP() << "the sample shape comes from the data files";
  }
  spec->model.init_safetensors.clear();  // pretrained weights: not shipped
  absl::StatusOr<std::unique_ptr<Model>> m = Model::Build(spec->model, 1);
  ASSERT_TRUE(m.ok()) << m.status();
}

INSTANTIATE_TEST_SUITE_P(
    Jobs, ExamplesTest,
    ::testing::Values("default.json", "mnist_mlp.json", "mnist_cnn.json",
                      "mnist_cnn_multiworker.json", "bert_mlm_brown.json",
                      "mobilenet_finetune.json", "quickstart.json"),
    [](const ::testing::TestParamInfo<std::string>& info) {
      std::string name = info.param.substr(0, info.param.find('.'));
      return name;
    });

}  // namespace
}  // namespace lockstep
