// The csv format (see csv_format.h).
#include "core/data/csv_format.h"

#include <memory>
#include <utility>

#include "base/status_macros.h"
#include "core/data/csv_reader.h"

namespace lockstep {
namespace {

class CsvData final : public DataConfig, public CsvConfig {
 public:
  explicit CsvData(CsvConfig c) : CsvConfig(std::move(c)) {}

  void ToJson(spec_reader::Json* d) const override {
    (*d)["train_path"] = train_path;
    (*d)["test_path"] = test_path;
    (*d)["header"] = header;
  }
  std::vector<DataPath> Paths() const override {
    return {{"data.train_path", train_path}, {"data.test_path", test_path}};
  }
  absl::StatusOr<Dataset> Load(const DataSpec& data, Split split,
                               const DataOptions& options) const override {
    RETURN_IF_ERROR(CheckOneInputField(options));
    RETURN_IF_ERROR(CheckClassification(data));
    return split == Split::kTrain
               ? ReadCsvDataset("data.train_path", train_path, header,
                                data.num_classes, data.scale)
               : ReadCsvDataset("data.test_path", test_path, header,
                                data.num_classes, data.scale);
  }
};

absl::StatusOr<std::shared_ptr<const DataConfig>> Parse(
    const spec_reader::Reader& r, absl::string_view base_dir,
    const std::string& variant) {
  CsvConfig c;
  RETURN_IF_ERROR(r.Require("train_path", variant));
  RETURN_IF_ERROR(r.Path("train_path", base_dir, &c.train_path));
  RETURN_IF_ERROR(r.Require("test_path", variant));
  RETURN_IF_ERROR(r.Path("test_path", base_dir, &c.test_path));
  RETURN_IF_ERROR(r.Bool("header", &c.header));
  return std::make_shared<const CsvData>(std::move(c));
}

DataFormatInfo Info() {
  return {"csv", {"train_path", "test_path", "header"}, true, &Parse};
}

}  // namespace

LOCKSTEP_REGISTER_DATA_FORMAT(Info());

DataSpec CsvDataSpec(CsvConfig config) {
  return MakeDataSpec("csv",
                      std::make_shared<const CsvData>(std::move(config)));
}

}  // namespace lockstep
