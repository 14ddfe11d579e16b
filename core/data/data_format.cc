// The data format registry and the "data" section (see data_format.h).
#include "core/data/data_format.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace lockstep {
namespace {

using spec_reader::Bad;
using spec_reader::Json;
using spec_reader::Keys;
using spec_reader::kPositive;
using spec_reader::Reader;

std::map<std::string, DataFormatInfo>& Registry() {
  static auto* formats = new std::map<std::string, DataFormatInfo>();
  return *formats;
}

}  // namespace

const spec_reader::Keys& DataCommonKeys() {
  static const Keys* k = new Keys{"format", "shuffle"};
  return *k;
}

const spec_reader::Keys& DataClassificationKeys() {
  static const Keys* k = new Keys{"scale", "num_classes"};
  return *k;
}

absl::StatusOr<Shape> DataConfig::FieldShape(const std::string& field) const {
  if (field == "input") {
    return absl::FailedPreconditionError(
        "the data's sample shape is only known from its files; give it");
  }
  return absl::NotFoundError("its one field is named \"input\"");
}

bool RegisterDataFormat(DataFormatInfo info) {
  std::string name = info.name;
  return Registry().emplace(std::move(name), std::move(info)).second;
}

const DataFormatInfo* FindDataFormat(absl::string_view name) {
  auto it = Registry().find(std::string(name));
  return it == Registry().end() ? nullptr : &it->second;
}

std::vector<std::string> DataFormatNames() {
  std::vector<std::string> names;
  for (const auto& [name, info] : Registry()) names.push_back(name);
  return names;
}

absl::Status ParseDataSpec(const Json& v, absl::string_view base_dir,
                           DataSpec* d) {
  RETURN_IF_ERROR(Reader::CheckObject(v, "data"));
  Reader r(v, "data");
  const Keys& classify = DataClassificationKeys();
  Keys all = DataCommonKeys();
  spec_reader::Table<const DataFormatInfo*> formats;
  for (const auto& [name, info] : Registry()) {
    formats.emplace_back(name.c_str(), &info);
    all.insert(all.end(), info.keys.begin(), info.keys.end());
  }
  all.insert(all.end(), classify.begin(), classify.end());
  RETURN_IF_ERROR(r.CheckKeys(all));
  RETURN_IF_ERROR(r.Require("format"));
  const DataFormatInfo* format = nullptr;
  RETURN_IF_ERROR(r.Enum("format", "data format", formats, &format));
  const std::string variant = absl::StrCat("format \"", format->name, "\"");
  Keys allowed = DataCommonKeys();
  allowed.insert(allowed.end(), format->keys.begin(), format->keys.end());
  if (format->classification) {
    allowed.insert(allowed.end(), classify.begin(), classify.end());
  }
  RETURN_IF_ERROR(r.CheckKeys(allowed, all, variant));
  d->format = format->name;
  ASSIGN_OR_RETURN(d->config, format->parse(r, base_dir, variant));
  RETURN_IF_ERROR(r.Number("scale", kPositive, &d->scale));
  RETURN_IF_ERROR(r.Bool("shuffle", &d->shuffle));
  RETURN_IF_ERROR(r.Int("num_classes", 1, &d->num_classes));
  return absl::OkStatus();
}

Json DataSpecToJson(const DataSpec& d) {
  Json data;
  data["format"] = d.format;
  if (d.config != nullptr) d.config->ToJson(&data);
  const DataFormatInfo* format = FindDataFormat(d.format);
  // Image folders know their classes (the subfolders) and scale by their
  // preprocessing; text has tokens.
  const bool classify = format != nullptr && format->classification;
  if (classify) data["scale"] = d.scale;
  data["shuffle"] = d.shuffle;
  if (classify) data["num_classes"] = d.num_classes;
  return data;
}

DataSpec MakeDataSpec(std::string name,
                      std::shared_ptr<const DataConfig> config) {
  DataSpec d;
  d.format = std::move(name);
  d.config = std::move(config);
  return d;
}

bool operator==(const DataSpec& a, const DataSpec& b) {
  return a.format == b.format && a.shuffle == b.shuffle && a.scale == b.scale &&
         a.num_classes == b.num_classes &&
         DataSpecToJson(a) == DataSpecToJson(b);
}

absl::Status CheckOneInputField(const DataOptions& options) {
  if (options.fields.size() != 1 || options.fields[0] != "input") {
    return absl::InvalidArgumentError(
        "model.inputs: this data format has one field, \"input\"");
  }
  return absl::OkStatus();
}

absl::Status CheckClassification(const DataSpec& data) {
  if (data.num_classes <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("data.num_classes: must be > 0, got ", data.num_classes));
  }
  if (!(data.scale > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("data.scale: must be > 0, got ", data.scale));
  }
  return absl::OkStatus();
}

}  // namespace lockstep
