// Verified checkpoint restore (see checkpoint.h): every CRC state.json
// records is checked, and a damaged step falls back to the one before.
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/crc32c.h"
#include "base/file_util.h"
#include "base/status_macros.h"
#include "core/checkpoint/checkpoint.h"
#include "core/checkpoint/checkpoint_layout.h"
#include "core/checkpoint/safetensors.h"
#include "core/json_util.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;
using checkpoint_layout::Hex;
using checkpoint_layout::IsArtifactName;
using checkpoint_layout::kLatest;
using checkpoint_layout::kModelFile;
using checkpoint_layout::kOptimizerFile;
using checkpoint_layout::kStateFile;
using checkpoint_layout::ParseStepName;
using checkpoint_layout::ReadLatest;

// A checksum recorded in state.json for a file or a tensor.
struct Record {
  uint64_t bytes;
  uint32_t crc;
};

absl::StatusOr<Record> ReadRecord(const nlohmann::json& rec,
                                  const std::string& context) {
  Record r;
  ASSIGN_OR_RETURN(r.bytes, GetUint64(rec, "bytes", context));
  ASSIGN_OR_RETURN(r.crc, GetUint32(rec, "crc32c", context));
  return r;
}

// The fields of a parsed state.json; errors name the field, not the file.
absl::Status ReadState(
    const nlohmann::json& j, CheckpointState* st,
    std::map<std::string, Record>* files,
    std::map<std::string, std::map<std::string, Record>>* tensors) {
  ASSIGN_OR_RETURN(st->step, GetInt64(j, "step", ""));
  ASSIGN_OR_RETURN(st->epoch, GetInt64(j, "epoch", ""));
  ASSIGN_OR_RETURN(st->step_in_epoch, GetInt64(j, "step_in_epoch", ""));
  ASSIGN_OR_RETURN(st->seed, GetUint64(j, "seed", ""));
  ASSIGN_OR_RETURN(st->generation, GetInt64(j, "generation", ""));
  ASSIGN_OR_RETURN(st->optimizer_iterations,
                   GetInt64(j, "optimizer_iterations", ""));
  if (j.contains("loss_scale")) {  // only a job that scales its loss
    ASSIGN_OR_RETURN(const nlohmann::json* ls, GetObject(j, "loss_scale", ""));
    ASSIGN_OR_RETURN(st->loss_scale.scale,
                     GetDouble(*ls, "scale", "loss_scale"));
    ASSIGN_OR_RETURN(st->loss_scale.good_steps,
                     GetInt64(*ls, "good_steps", "loss_scale"));
    ASSIGN_OR_RETURN(st->loss_scale.skipped_steps,
                     GetInt64(*ls, "skipped_steps", "loss_scale"));
    const LossScaleState& got = st->loss_scale;
    if (!(std::isfinite(got.scale) && got.scale > 0) || got.good_steps < 0 ||
        got.skipped_steps < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "loss_scale: the scale must be finite and > 0 and the step counts "
          ">= 0; got scale ",
          got.scale, ", good_steps ", got.good_steps, ", skipped_steps ",
          got.skipped_steps));
    }
  }
  ASSIGN_OR_RETURN(st->job_json, GetString(j, "job_json", ""));
  ASSIGN_OR_RETURN(const nlohmann::json* loss, GetField(j, "train_loss", ""));
  if (loss->is_null()) {  // NaN and inf are written as null
    st->train_loss = std::numeric_limits<double>::quiet_NaN();
  } else {
    ASSIGN_OR_RETURN(st->train_loss, GetDouble(j, "train_loss", ""));
  }
  ASSIGN_OR_RETURN(const nlohmann::json* file_records,
                   GetObject(j, "files", ""));
  for (const auto& [file, rec] : file_records->items()) {
    ASSIGN_OR_RETURN((*files)[file],
                     ReadRecord(rec, absl::StrCat("files[\"", file, "\"]")));
  }
  ASSIGN_OR_RETURN(const nlohmann::json* tensor_records,
                   GetObject(j, "tensors", ""));
  for (const auto& [tname, rec] : tensor_records->items()) {
    const std::string context = absl::StrCat("tensors[\"", tname, "\"]");
    ASSIGN_OR_RETURN(const std::string file, GetString(rec, "file", context));
    ASSIGN_OR_RETURN((*tensors)[file][tname], ReadRecord(rec, context));
  }
  return absl::OkStatus();
}

// A step folder's state.json, checked: its fields, the step its folder
// names, a record of the model and the optimizer, every other record a
// plain file name (an artifact). kDataLoss naming what is wrong.
struct StepRecords {
  CheckpointState state;
  std::map<std::string, Record> files;
  std::map<std::string, std::map<std::string, Record>> tensors;  // by file
};

absl::StatusOr<StepRecords> ReadStepRecords(const std::string& step_dir,
                                            const std::string& name) {
  absl::StatusOr<std::string> text = ReadFile(JoinPath(step_dir, kStateFile));
  if (!text.ok()) {
    return absl::DataLossError(absl::StrCat(
        kStateFile, ": ",
        absl::IsNotFound(text.status()) ? "missing" : text.status().message()));
  }
  absl::StatusOr<nlohmann::json> j = ParseJson(*text, kStateFile);
  if (!j.ok()) return absl::DataLossError(j.status().message());
  StepRecords r;
  absl::Status read = ReadState(*j, &r.state, &r.files, &r.tensors);
  if (!read.ok()) {
    return absl::DataLossError(
        absl::StrCat(kStateFile, ": malformed (", read.message(), ")"));
  }
  if (r.state.step != ParseStepName(name)) {
    return absl::DataLossError(absl::StrCat(kStateFile, ": records step ",
                                            r.state.step, " in folder ", name));
  }
  for (const std::string file : {kModelFile, kOptimizerFile}) {
    if (r.files.count(file) == 0) {
      return absl::DataLossError(
          absl::StrCat(kStateFile, ": no record of ", file));
    }
  }
  for (const auto& [file, rec] : r.files) {
    if (file != kModelFile && file != kOptimizerFile && !IsArtifactName(file)) {
      return absl::DataLossError(absl::StrCat(kStateFile, ": records \"", file,
                                              "\", not a plain file name"));
    }
  }
  return r;
}

// A whole file's size and CRC32C against its record.
absl::Status CheckFileRecord(const std::string& file, uint64_t bytes,
                             uint32_t crc, const Record& rec) {
  if (bytes == rec.bytes && crc == rec.crc) return absl::OkStatus();
  return absl::DataLossError(
      absl::StrCat(file, ": ", bytes, " bytes with CRC32C ", Hex(crc),
                   ", recorded ", rec.bytes, " bytes with ", Hex(rec.crc)));
}

}  // namespace

absl::Status VerifyCheckpointFiles(const std::string& step_dir) {
  std::string name = step_dir;
  while (name.size() > 1 && name.back() == '/') name.pop_back();
  name = name.substr(name.find_last_of('/') + 1);
  ASSIGN_OR_RETURN(const StepRecords r, ReadStepRecords(step_dir, name));
  std::string buf(size_t{1} << 20, '\0');
  for (const auto& [file, rec] : r.files) {
    const std::string path = JoinPath(step_dir, file);
    FILE* f = fopen(path.c_str(), "rb");
    if (f == nullptr) {
      if (errno == ENOENT) return absl::DataLossError(file + ": missing");
      return ErrnoToStatus("open", path, errno);
    }
    uint64_t bytes = 0;
    uint32_t crc = 0;
    size_t n;
    while ((n = fread(buf.data(), 1, buf.size(), f)) > 0) {
      crc = Crc32cExtend(crc, buf.data(), n);
      bytes += n;
    }
    const bool failed = ferror(f) != 0;
    const int err = errno;
    fclose(f);
    if (failed) return ErrnoToStatus("read", path, err);
    RETURN_IF_ERROR(CheckFileRecord(file, bytes, crc, rec));
  }
  return absl::OkStatus();
}

absl::StatusOr<LoadedCheckpoint> CheckpointStore::LoadStep(
    const std::string& name) const {
  LoadedCheckpoint out;
  out.path = JoinPath(dir_, name);
  ASSIGN_OR_RETURN(StepRecords r, ReadStepRecords(out.path, name));
  out.state = std::move(r.state);
  std::map<std::string, Record>& files = r.files;
  std::map<std::string, std::map<std::string, Record>>& tensors = r.tensors;
  for (const std::string file : {kModelFile, kOptimizerFile}) {
    auto rec = files.find(file);
    absl::StatusOr<std::string> bytes = ReadFile(JoinPath(out.path, file));
    if (!bytes.ok()) {
      return absl::DataLossError(
          absl::StrCat(file, ": ",
                       absl::IsNotFound(bytes.status())
                           ? "missing"
                           : std::string(bytes.status().message())));
    }
    if (bytes->size() != rec->second.bytes) {
      return absl::DataLossError(absl::StrCat(file, ": ", bytes->size(),
                                              " bytes, ", rec->second.bytes,
                                              " recorded"));
    }
    absl::StatusOr<std::vector<std::pair<std::string, Tensor>>> loaded =
        ParseSafetensors(*bytes, file);
    if (!loaded.ok()) return loaded.status();
    const std::map<std::string, Record>& expected = tensors[file];
    if (loaded->size() != expected.size()) {
      return absl::DataLossError(absl::StrCat(file, ": holds ", loaded->size(),
                                              " tensors, ", expected.size(),
                                              " recorded"));
    }
    for (const auto& [tname, t] : *loaded) {
      auto e = expected.find(tname);
      if (e == expected.end()) {
        return absl::DataLossError(
            absl::StrCat(file, ": tensor ", tname, " is not recorded"));
      }
      const uint64_t n = sizeof(float) * t.size();
      const uint32_t crc = Crc32c(t.data(), n);
      if (n != e->second.bytes) {
        return absl::DataLossError(absl::StrCat(file, ": tensor ", tname, " ",
                                                n, " bytes, ", e->second.bytes,
                                                " recorded"));
      }
      if (crc != e->second.crc) {
        return absl::DataLossError(
            absl::StrCat(file, ": tensor ", tname, " CRC32C ", Hex(crc),
                         " != ", Hex(e->second.crc), " recorded"));
      }
    }
    const uint32_t file_crc = Crc32c(bytes->data(), bytes->size());
    if (file_crc != rec->second.crc) {
      return absl::DataLossError(
          absl::StrCat(file, ": file CRC32C ", Hex(file_crc),
                       " != ", Hex(rec->second.crc), " recorded"));
    }
    (file == kModelFile ? out.model : out.optimizer) = std::move(*loaded);
  }
  // Every other file recorded is a data artifact (a text job's vocab.txt).
  for (const auto& [file, rec] : files) {
    if (file == kModelFile || file == kOptimizerFile) continue;
    absl::StatusOr<std::string> bytes = ReadFile(JoinPath(out.path, file));
    if (!bytes.ok()) {
      return absl::DataLossError(
          absl::StrCat(file, ": ",
                       absl::IsNotFound(bytes.status())
                           ? "missing"
                           : std::string(bytes.status().message())));
    }
    RETURN_IF_ERROR(CheckFileRecord(file, bytes->size(),
                                    Crc32c(bytes->data(), bytes->size()), rec));
    out.state.artifacts[file] = std::move(*bytes);
  }
  return out;
}

absl::StatusOr<LoadedCheckpoint> CheckpointStore::LoadLatest(
    std::vector<std::string>* warnings) const {
  auto warn = [&](std::string w) {
    if (warnings != nullptr) warnings->push_back(std::move(w));
  };
  const std::vector<std::string> steps = ListSteps();
  if (steps.empty()) {
    return absl::NotFoundError(absl::StrCat("no checkpoint in \"", dir_, "\""));
  }
  // Start at the folder `latest` names; folders newer than it were never
  // committed (a crash between rename and pointer update).
  size_t start = steps.size() - 1;
  const std::string latest = ReadLatest(dir_);
  auto it = std::find(steps.begin(), steps.end(), latest);
  if (it != steps.end()) {
    start = it - steps.begin();
  } else {
    warn(absl::StrCat(
        "\"", JoinPath(dir_, kLatest), "\" ",
        latest.empty() ? std::string("is missing or empty")
                       : absl::StrCat("names ", latest, ", which is missing"),
        "; using the newest checkpoint, ", steps.back()));
  }
  std::vector<std::string> damaged;
  for (size_t i = start + 1; i-- > 0;) {
    absl::StatusOr<LoadedCheckpoint> loaded = LoadStep(steps[i]);
    if (loaded.ok()) return loaded;
    const std::string reason(loaded.status().message());
    damaged.push_back(absl::StrCat(steps[i], " (", reason, ")"));
    warn(absl::StrCat("checkpoint ", steps[i], " is damaged (", reason, "); ",
                      i > 0 ? absl::StrCat("falling back to ", steps[i - 1])
                            : std::string("no older checkpoint")));
  }
  return absl::DataLossError(
      absl::StrCat("every checkpoint in \"", dir_,
                   "\" is damaged: ", absl::StrJoin(damaged, "; ")));
}

absl::StatusOr<LoadedCheckpoint> LoadCheckpointAt(
    const std::string& path, std::vector<std::string>* warnings) {
  std::string dir = path;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return absl::NotFoundError(
        absl::StrCat("no checkpoint in \"", path,
                     "\": not a folder (name a "
                     "job's checkpoints folder or one step-XXXXXXXX folder "
                     "in it)"));
  }
  const std::string base = fs::path(dir).filename().string();
  if (ParseStepName(base) >= 0) {
    CheckpointStore store(Dirname(dir), 0);
    absl::StatusOr<LoadedCheckpoint> loaded = store.LoadStep(base);
    if (!loaded.ok()) {
      return absl::Status(loaded.status().code(),
                          absl::StrCat("checkpoint \"", dir, "\" is damaged (",
                                       loaded.status().message(), ")"));
    }
    return loaded;
  }
  return CheckpointStore(dir, 0).LoadLatest(warnings);
}

}  // namespace lockstep
