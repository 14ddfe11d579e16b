// The synthetic format (see synthetic_format.h).
#include "core/data/synthetic_format.h"

#include <memory>
#include <utility>

#include "base/status_macros.h"
#include "core/data/synthetic_data.h"

namespace lockstep {
namespace {

class SyntheticData final : public DataConfig, public SyntheticConfig {
 public:
  explicit SyntheticData(SyntheticConfig c) : SyntheticConfig(c) {}

  void ToJson(spec_reader::Json* d) const override {
    (*d)["train_samples"] = train_samples;
    (*d)["test_samples"] = test_samples;
    (*d)["seed"] = seed;
  }
  absl::StatusOr<Shape> FieldShape(const std::string& field) const override {
    if (field == "input") return SyntheticSampleShape();
    return DataConfig::FieldShape(field);
  }
  absl::StatusOr<Dataset> Load(const DataSpec& data, Split split,
                               const DataOptions& options) const override {
    RETURN_IF_ERROR(CheckOneInputField(options));
    RETURN_IF_ERROR(CheckClassification(data));
    return MakeSyntheticDataset(
        seed, split, split == Split::kTrain ? train_samples : test_samples,
        data.num_classes, data.scale);
  }
};

absl::StatusOr<std::shared_ptr<const DataConfig>> Parse(
    const spec_reader::Reader& r, absl::string_view base_dir,
    const std::string& variant) {
  SyntheticConfig c;
  RETURN_IF_ERROR(r.Int("train_samples", 1, &c.train_samples));
  RETURN_IF_ERROR(r.Int("test_samples", 1, &c.test_samples));
  RETURN_IF_ERROR(r.Uint("seed", &c.seed));
  return std::make_shared<const SyntheticData>(c);
}

DataFormatInfo Info() {
  return {"synthetic", {"train_samples", "test_samples", "seed"}, true, &Parse};
}

}  // namespace

LOCKSTEP_REGISTER_DATA_FORMAT(Info());

DataSpec SyntheticDataSpec(SyntheticConfig config) {
  return MakeDataSpec("synthetic",
                      std::make_shared<const SyntheticData>(config));
}

}  // namespace lockstep
