// Synthetic data: its shape, sizes and determinism, and that it can be
// learned (a nearest-class-mean classifier) but not trivially.
#include "core/data/dataset.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <vector>

#include "absl/status/statusor.h"
#include "core/data/data_loader.h"
#include "core/data/synthetic_data.h"
#include "core/data/synthetic_format.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

TEST(SyntheticTest, ShapeSizesAndDeterminism) {
  DataSpec spec = SyntheticDataSpec();
  absl::StatusOr<Dataset> train = LoadDataset(spec, Split::kTrain);
  absl::StatusOr<Dataset> train2 = LoadDataset(spec, Split::kTrain);
  absl::StatusOr<Dataset> test = LoadDataset(spec, Split::kTest);
  ASSERT_TRUE(train.ok() && train2.ok() && test.ok());
  EXPECT_EQ(train->sample_shape, SyntheticSampleShape());
  EXPECT_EQ(train->sample_shape, (Shape{8, 8, 1}));
  EXPECT_EQ(train->num_samples, 8192);
  EXPECT_EQ(test->num_samples, 2048);
  EXPECT_EQ(train->num_classes, 10);
  EXPECT_EQ(train->features.size(), 8192u * 64);
  EXPECT_EQ(train->source, "synthetic(seed=1234, n=8192, train)");
  EXPECT_EQ(train->features, train2->features);
  EXPECT_EQ(train->labels, train2->labels);
  EXPECT_NE(
      std::vector<float>(train->features.begin(), train->features.begin() + 64),
      std::vector<float>(test->features.begin(), test->features.begin() + 64));
  std::vector<int> hist(10, 0);
  for (int32_t l : train->labels) {
    ASSERT_GE(l, 0);
    ASSERT_LT(l, 10);
    ++hist[l];
  }
  for (int h : hist) EXPECT_NEAR(h, 819, 120);
  for (float v : train->features)
    ASSERT_TRUE(std::isfinite(v) && std::abs(v) <= 1);

  // A prefix of a larger set equals the smaller set; another seed differs.
  SyntheticConfig synthetic;
  synthetic.train_samples = 100;
  absl::StatusOr<Dataset> small =
      LoadDataset(SyntheticDataSpec(synthetic), Split::kTrain);
  ASSERT_TRUE(small.ok());
  EXPECT_TRUE(std::equal(small->features.begin(), small->features.end(),
                         train->features.begin()));
  synthetic.seed = 99;
  absl::StatusOr<Dataset> other =
      LoadDataset(SyntheticDataSpec(synthetic), Split::kTrain);
  ASSERT_TRUE(other.ok());
  EXPECT_NE(other->features, small->features);
}

TEST(SyntheticTest, LearnableButNotTrivial) {
  // Nearest class mean, fitted on train and scored on test: a crude linear
  // classifier (about 0.97 with the defaults; chance is 0.1), so a small MLP
  // has room to pass 0.9.
  const DataSpec spec = SyntheticDataSpec();
  absl::StatusOr<Dataset> train = LoadDataset(spec, Split::kTrain);
  absl::StatusOr<Dataset> test = LoadDataset(spec, Split::kTest);
  ASSERT_TRUE(train.ok() && test.ok());
  const int64_t per = 64, classes = 10;
  std::vector<double> mean(classes * per, 0.0);
  std::vector<int64_t> count(classes, 0);
  for (int64_t i = 0; i < train->num_samples; ++i) {
    const int32_t c = train->labels[i];
    ++count[c];
    for (int64_t k = 0; k < per; ++k) {
      mean[c * per + k] += train->features[i * per + k];
    }
  }
  for (int64_t c = 0; c < classes; ++c) {
    for (int64_t k = 0; k < per; ++k) mean[c * per + k] /= count[c];
  }
  int64_t correct = 0;
  for (int64_t i = 0; i < test->num_samples; ++i) {
    int64_t best = -1;
    double best_d = 0;
    for (int64_t c = 0; c < classes; ++c) {
      double d = 0;
      for (int64_t k = 0; k < per; ++k) {
        const double diff = test->features[i * per + k] - mean[c * per + k];
        d += diff * diff;
      }
      if (best < 0 || d < best_d) best = c, best_d = d;
    }
    correct += best == test->labels[i];
  }
  const double accuracy = static_cast<double>(correct) / test->num_samples;
  std::cout << "nearest-class-mean test accuracy: " << accuracy << "\n";
  EXPECT_GT(accuracy, 0.9);
}

}  // namespace
}  // namespace lockstep
