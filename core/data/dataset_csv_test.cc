// CSV data: rows with a header line and CRLF, scaled; each malformed file
// (wrong width, a field that is not a number, bad labels, no rows, no
// file) an error naming the field, the file and the line.
#include "core/data/dataset.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/data/csv_format.h"
#include "core/data/data_loader.h"
#include "core/data/dataset_test_util.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

using testing::ExpectError;
using testing::TempPath;
using testing::WriteRaw;

DataSpec CsvSpec(const std::string& path, bool header = false,
                 const std::string& test_path = "") {
  CsvConfig csv;
  csv.train_path = path;
  csv.test_path = test_path;
  csv.header = header;
  DataSpec spec = CsvDataSpec(csv);
  return spec;
}

TEST(CsvTest, LoadsRowsWithHeaderAndCrlf) {
  const std::string path = TempPath("ok.csv");
  WriteRaw(path, "label,a,b,c\r\n3, 1.5,2,-4\r\n0,0,0,1e2\r\n\r\n");
  DataSpec spec = CsvSpec(path, /*header=*/true);
  spec.scale = 2.0;
  absl::StatusOr<Dataset> d = LoadDataset(spec, Split::kTrain);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->sample_shape, (Shape{3}));
  EXPECT_EQ(d->num_samples, 2);
  EXPECT_EQ(d->labels, (std::vector<int32_t>{3, 0}));
  EXPECT_EQ(d->features, (std::vector<float>{0.75f, 1, -2, 0, 0, 50}));
  EXPECT_EQ(d->source, path);
}

TEST(CsvTest, WrongWidth) {
  const std::string path = TempPath("width.csv");
  std::string text;
  for (int line = 0; line < 3; ++line) {
    text += "1";
    for (int f = 0; f < 784; ++f) text += ",0";
    text += "\n";
  }
  text += "1,2,3\n";
  WriteRaw(path, text);
  ExpectError(LoadDataset(CsvSpec(path), Split::kTrain),
              absl::StatusCode::kInvalidArgument,
              absl::StrCat("data.train_path: \"", path,
                           "\":4: expected 785 fields, got 3"));
}

TEST(CsvTest, NotANumber) {
  const std::string path = TempPath("nan.csv");
  WriteRaw(path, "1,2,3,4,5\n2,0,0,0,abc\n");
  ExpectError(LoadDataset(CsvSpec(path), Split::kTrain),
              absl::StatusCode::kInvalidArgument,
              absl::StrCat("data.train_path: \"", path,
                           "\":2: field 5: not a number: \"abc\""));
  WriteRaw(path, "1,2\n2,\n");
  ExpectError(LoadDataset(CsvSpec(path), Split::kTrain),
              absl::StatusCode::kInvalidArgument,
              absl::StrCat("data.train_path: \"", path,
                           "\":2: field 2: not a number: \"\""));
  WriteRaw(path, "1,inf\n");
  ExpectError(LoadDataset(CsvSpec(path), Split::kTrain),
              absl::StatusCode::kInvalidArgument,
              absl::StrCat("data.train_path: \"", path,
                           "\":1: field 2: not a finite number: \"inf\""));
  // Finite as a double, infinite as the float it would be stored as.
  WriteRaw(path, "1,2\n1,1e39\n");
  ExpectError(LoadDataset(CsvSpec(path), Split::kTrain),
              absl::StatusCode::kInvalidArgument,
              absl::StrCat("data.train_path: \"", path,
                           "\":2: field 2: not a finite number: \"1e39\""));
}

TEST(CsvTest, BadLabels) {
  const std::string path = TempPath("labels.csv");
  WriteRaw(path, "h1,h2\n1,2\n2.5,3\n");
  ExpectError(LoadDataset(CsvSpec(path, true), Split::kTrain),
              absl::StatusCode::kInvalidArgument,
              absl::StrCat("data.train_path: \"", path,
                           "\":3: field 1: label is not an integer: \"2.5\""));
  WriteRaw(path, "1,2\n10,3\n");
  ExpectError(LoadDataset(CsvSpec(path), Split::kTrain),
              absl::StatusCode::kInvalidArgument,
              absl::StrCat("data.train_path: \"", path,
                           "\":2: label 10 is out of range [0, 10)"));
  WriteRaw(path, "-1,2\n");
  ExpectError(LoadDataset(CsvSpec(path), Split::kTrain),
              absl::StatusCode::kInvalidArgument,
              absl::StrCat("data.train_path: \"", path,
                           "\":1: label -1 is out of range [0, 10)"));
  WriteRaw(path, "7\n");
  ExpectError(LoadDataset(CsvSpec(path), Split::kTrain),
              absl::StatusCode::kInvalidArgument,
              absl::StrCat("data.train_path: \"", path,
                           "\":1: expected a label and at least one feature, "
                           "got 1 field"));
}

TEST(CsvTest, EmptyAndMissing) {
  const std::string path = TempPath("empty.csv");
  WriteRaw(path, "");
  ExpectError(LoadDataset(CsvSpec(path), Split::kTrain),
              absl::StatusCode::kInvalidArgument,
              absl::StrCat("data.train_path: \"", path, "\": no data rows"));
  WriteRaw(path, "label,x\n\n");
  ExpectError(LoadDataset(CsvSpec(path, true), Split::kTrain),
              absl::StatusCode::kInvalidArgument,
              absl::StrCat("data.train_path: \"", path,
                           "\": no data rows (after the header line)"));
  const DataSpec spec = CsvSpec("", false, "/nope.csv");
  ExpectError(LoadDataset(spec, Split::kTest), absl::StatusCode::kNotFound,
              "data.test_path: cannot open \"/nope.csv\": No such file or "
              "directory");
}

}  // namespace
}  // namespace lockstep
