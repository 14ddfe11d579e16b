// The mnist_idx format (see idx_format.h).
#include "core/data/idx_format.h"

#include <memory>
#include <utility>

#include "base/status_macros.h"
#include "core/data/idx_reader.h"

namespace lockstep {
namespace {

constexpr const char* kKeys[] = {"train_images", "train_labels", "test_images",
                                 "test_labels"};

class IdxData final : public DataConfig, public IdxConfig {
 public:
  explicit IdxData(IdxConfig c) : IdxConfig(std::move(c)) {}

  void ToJson(spec_reader::Json* d) const override {
    (*d)["train_images"] = train_images;
    (*d)["train_labels"] = train_labels;
    (*d)["test_images"] = test_images;
    (*d)["test_labels"] = test_labels;
  }
  std::vector<DataPath> Paths() const override {
    return {{"data.train_images", train_images},
            {"data.train_labels", train_labels},
            {"data.test_images", test_images},
            {"data.test_labels", test_labels}};
  }
  absl::StatusOr<Dataset> Load(const DataSpec& data, Split split,
                               const DataOptions& options) const override {
    RETURN_IF_ERROR(CheckOneInputField(options));
    RETURN_IF_ERROR(CheckClassification(data));
    return split == Split::kTrain
               ? ReadIdxDataset("data.train_images", train_images,
                                "data.train_labels", train_labels,
                                data.num_classes, data.scale)
               : ReadIdxDataset("data.test_images", test_images,
                                "data.test_labels", test_labels,
                                data.num_classes, data.scale);
  }
};

absl::StatusOr<std::shared_ptr<const DataConfig>> Parse(
    const spec_reader::Reader& r, absl::string_view base_dir,
    const std::string& variant) {
  IdxConfig c;
  std::string* out[] = {&c.train_images, &c.train_labels, &c.test_images,
                        &c.test_labels};
  for (int i = 0; i < 4; ++i) {
    RETURN_IF_ERROR(r.Require(kKeys[i], variant));
    RETURN_IF_ERROR(r.Path(kKeys[i], base_dir, out[i]));
  }
  return std::make_shared<const IdxData>(std::move(c));
}

DataFormatInfo Info() {
  return {"mnist_idx", {std::begin(kKeys), std::end(kKeys)}, true, &Parse};
}

}  // namespace

LOCKSTEP_REGISTER_DATA_FORMAT(Info());

DataSpec IdxDataSpec(IdxConfig config) {
  return MakeDataSpec("mnist_idx",
                      std::make_shared<const IdxData>(std::move(config)));
}

}  // namespace lockstep
