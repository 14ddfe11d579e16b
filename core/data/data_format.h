// The data formats' vocabulary, as core/layers' registry is the layers':
// each format (IDX, CSV, synthetic, text, image folder) lives in its own
// file pair, declares its JSON fields, parses them into its DataConfig and
// loads its splits, and registers itself at start-up
// (LOCKSTEP_REGISTER_DATA_FORMAT). The job's "data" section is a DataSpec:
// the format's name, the fields every format shares, and that config. No
// switch over formats exists.
#ifndef LOCKSTEP_CORE_DATA_DATA_FORMAT_H_
#define LOCKSTEP_CORE_DATA_DATA_FORMAT_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/data/dataset.h"
#include "core/spec_reader.h"
#include "core/tensor.h"

namespace lockstep {

struct DataSpec;

// A file or folder a format reads, by the field that names it.
struct DataPath {
  std::string field;  // "data.train_path", "data.train_path[1]"
  std::string path;   // resolved against the job file's folder
  bool folder = false;
};

// A format's own fields, parsed and validated. Immutable once made, so
// specs share it.
class DataConfig {
 public:
  virtual ~DataConfig() = default;
  // Every file and folder it reads (`lockstep check` and `submit` look for
  // them before a job starts). None by default: the synthetic data.
  virtual std::vector<DataPath> Paths() const { return {}; }
  // Its fields into the "data" object, in canonical order and form.
  virtual void ToJson(spec_reader::Json* data) const = 0;
  // The per-sample shape of the data field a model input names. NotFound
  // (saying which fields there are) for a field the format lacks;
  // FailedPrecondition when only the files tell (the default for "input").
  virtual absl::StatusOr<Shape> FieldShape(const std::string& field) const;
  // The labels a sample has (a masked language model: its predictions).
  virtual int64_t LabelsPerSample() const { return 1; }
  // Loads `split`; errors name the data field and the file (kNotFound: a
  // file cannot be opened; kInvalidArgument: bad content, a corrupt gzip
  // stream or a folder; kDataLoss: a read error).
  virtual absl::StatusOr<Dataset> Load(const DataSpec& data, Split split,
                                       const DataOptions& options) const = 0;
  // What a checkpoint keeps beside the model for data loaded from `train`
  // (a text job's vocabulary), read back through DataOptions::restored.
  // None by default.
  virtual DataArtifacts Artifacts(const Dataset& train) const {
    (void)train;
    return {};
  }
};

// The job file's "data" section.
struct DataSpec {
  std::string format;  // a registered format's name
  bool shuffle = true;
  // Classification formats (DataFormatInfo::classification): features are
  // divided by `scale`, labels lie in [0, num_classes).
  double scale = 1.0;
  int64_t num_classes = 10;
  std::shared_ptr<const DataConfig> config;  // the format's own fields

  // The config as the format's type (its header's), or null for another
  // format's.
  template <typename T>
  const T* As() const {
    return dynamic_cast<const T*>(config.get());
  }
};
// A spec of format `name` with `config`, the common fields at their
// defaults (each format's XDataSpec(XConfig) calls it).
DataSpec MakeDataSpec(std::string name,
                      std::shared_ptr<const DataConfig> config);
// Same format, common fields and canonical JSON of the config.
bool operator==(const DataSpec& a, const DataSpec& b);

struct DataFormatInfo {
  std::string name;               // the job file's "format"
  std::vector<std::string> keys;  // its own fields
  bool classification = false;    // takes "scale" and "num_classes"
  // Reads the fields (the caller refused keys outside `keys`); `variant`
  // ("format \"csv\"") ends "required" errors; relative paths are
  // resolved against base_dir when it is not empty.
  std::function<absl::StatusOr<std::shared_ptr<const DataConfig>>(
      const spec_reader::Reader& r, absl::string_view base_dir,
      const std::string& variant)>
      parse;
};

// Fields of every "data" section, and those of a classification format's.
const spec_reader::Keys& DataCommonKeys();
const spec_reader::Keys& DataClassificationKeys();

// Adds a format at static-initialization time.
bool RegisterDataFormat(DataFormatInfo info);
// Null for an unknown format.
const DataFormatInfo* FindDataFormat(absl::string_view name);
// Every registered format, sorted.
std::vector<std::string> DataFormatNames();

#define LOCKSTEP_DATA_FORMAT_CONCAT_INNER_(a, b) a##b
#define LOCKSTEP_DATA_FORMAT_CONCAT_(a, b) \
  LOCKSTEP_DATA_FORMAT_CONCAT_INNER_(a, b)
// LOCKSTEP_REGISTER_DATA_FORMAT(MakeCsvFormat()) in the format's .cc file
// (its library alwayslink).
#define LOCKSTEP_REGISTER_DATA_FORMAT(info)       \
  static const bool LOCKSTEP_DATA_FORMAT_CONCAT_( \
      kDataFormatRegistered_, __LINE__) = ::lockstep::RegisterDataFormat(info)

// The "data" section: validated (errors name the field, "data.scale: must
// be > 0, got 0") and its canonical JSON.
absl::Status ParseDataSpec(const spec_reader::Json& v,
                           absl::string_view base_dir, DataSpec* out);
spec_reader::Json DataSpecToJson(const DataSpec& data);

// For the formats' loaders: InvalidArgument unless the model has one input
// named "input"; unless a classification format's num_classes and scale
// are positive.
absl::Status CheckOneInputField(const DataOptions& options);
absl::Status CheckClassification(const DataSpec& data);

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_DATA_DATA_FORMAT_H_
