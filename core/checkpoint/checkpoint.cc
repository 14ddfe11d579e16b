// Checkpoint commit (temp folder, fsync, rename, `latest` pointer) and
// verified restore with fallback to older checkpoints.
#include "core/checkpoint/checkpoint.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/crc32c.h"
#include "base/file_util.h"
#include "base/status_macros.h"
#include "core/checkpoint/safetensors.h"
#include "core/json_util.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;

constexpr char kModelFile[] = "model.safetensors";
constexpr char kOptimizerFile[] = "optimizer.safetensors";
constexpr char kStateFile[] = "state.json";
constexpr char kVocabFile[] = "vocab.txt";
constexpr char kLatest[] = "latest";
constexpr char kTempPrefix[] = ".tmp-";

std::string RandomHex() {
  std::random_device rd;
  return absl::StrFormat("%08x", rd());
}

// Folder creation, renames and folder fsyncs during a commit report ENOENT
// as kInternal: kNotFound would read as a user error to `lockstep train`.
absl::Status CommitError(absl::Status s) {
  if (!absl::IsNotFound(s)) return s;
  return absl::InternalError(s.message());
}

absl::Status OsError(const std::string& what, const std::string& path,
                     int err) {
  return CommitError(ErrnoToStatus(what, path, err));
}

absl::Status Rename(const std::string& from, const std::string& to) {
  if (std::rename(from.c_str(), to.c_str()) != 0) {
    return OsError(absl::StrCat("cannot rename \"", from, "\" to"), to, errno);
  }
  return absl::OkStatus();
}

void RemoveTree(const std::string& path) {
  std::error_code ec;
  fs::remove_all(path, ec);  // best effort: leftovers are cleaned next time
}

bool Exists(const std::string& path) {
  std::error_code ec;
  return fs::exists(fs::symlink_status(path, ec));
}

// "step-00001200" -> 1200; -1 when `name` is not a step folder name.
int64_t ParseStepName(const std::string& name) {
  if (!absl::StartsWith(name, "step-") || name.size() == 5) return -1;
  int64_t step = 0;
  for (size_t i = 5; i < name.size(); ++i) {
    if (!absl::ascii_isdigit(name[i])) return -1;
  }
  if (!absl::SimpleAtoi(name.substr(5), &step)) return -1;
  return step;
}

// The committed `latest` pointer's folder name, or "" when unreadable.
std::string ReadLatest(const std::string& dir) {
  absl::StatusOr<std::string> s = ReadFile(JoinPath(dir, kLatest));
  if (!s.ok()) return "";
  return std::string(absl::StripAsciiWhitespace(*s));
}

std::string Hex(uint32_t v) { return absl::StrFormat("0x%08x", v); }

void TensorRecords(const NamedTensors& tensors,
                   const SafetensorsWriteInfo& info, const std::string& file,
                   nlohmann::ordered_json* out) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    nlohmann::ordered_json rec;
    rec["file"] = file;
    rec["bytes"] = sizeof(float) * tensors[i].second->size();
    rec["crc32c"] = info.tensor_crc32c[i];
    (*out)[tensors[i].first] = rec;
  }
}

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

}  // namespace

std::string CheckpointFolderName(int64_t step) {
  return absl::StrFormat("step-%08d", step);
}

CheckpointStore::CheckpointStore(std::string dir, int64_t keep)
    : dir_(std::move(dir)), keep_(keep) {}

absl::Status CheckpointStore::Fault(const std::string& stage,
                                    const std::string& path) const {
  if (!fault_hook_) return absl::OkStatus();
  return fault_hook_(stage, path);
}

std::vector<std::string> CheckpointStore::ListSteps() const {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  for (fs::directory_iterator it(dir_, ec), end; !ec && it != end;
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const int64_t step = ParseStepName(name);
    std::error_code ec2;
    if (step >= 0 && it->is_directory(ec2)) found.emplace_back(step, name);
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  for (auto& [step, name] : found) out.push_back(std::move(name));
  return out;
}

absl::Status CheckpointStore::CommitInto(const std::string& tmp,
                                         const CheckpointState& state,
                                         const NamedTensors& model,
                                         const NamedTensors& optimizer) {
  const std::map<std::string, std::string> meta = {
      {"format", "lockstep"}, {"step", absl::StrCat(state.step)}};
  nlohmann::ordered_json files = nlohmann::ordered_json::object();
  nlohmann::ordered_json tensors = nlohmann::ordered_json::object();
  for (const auto& [file, list] :
       {std::make_pair(kModelFile, &model),
        std::make_pair(kOptimizerFile, &optimizer)}) {
    const std::string path = JoinPath(tmp, file);
    SafetensorsWriteInfo info;
    RETURN_IF_ERROR(Fault(file, path));
    RETURN_IF_ERROR(WriteSafetensors(path, *list, meta, &info));
    files[file] = {{"bytes", info.file_bytes}, {"crc32c", info.file_crc32c}};
    TensorRecords(*list, info, file, &tensors);
  }
  if (!state.vocab.empty()) {
    const std::string path = JoinPath(tmp, kVocabFile);
    RETURN_IF_ERROR(Fault(kVocabFile, path));
    RETURN_IF_ERROR(WriteFileAtomic(path, state.vocab));
    files[kVocabFile] = {
        {"bytes", state.vocab.size()},
        {"crc32c", Crc32c(state.vocab.data(), state.vocab.size())}};
  }
  nlohmann::ordered_json j;
  j["step"] = state.step;
  j["epoch"] = state.epoch;
  j["step_in_epoch"] = state.step_in_epoch;
  j["seed"] = state.seed;
  j["generation"] = state.generation;
  j["optimizer_iterations"] = state.optimizer_iterations;
  j["train_loss"] = state.train_loss;  // NaN/inf are written as null
  j["job_json"] = state.job_json;
  j["files"] = files;
  j["tensors"] = tensors;
  absl::StatusOr<std::string> dumped = DumpJsonStrict(j, 2);
  if (!dumped.ok()) {  // invalid UTF-8
    return absl::Status(dumped.status().code(),
                        absl::StrCat("cannot encode ", kStateFile, ": ",
                                     dumped.status().message()));
  }
  const std::string text = *dumped + "\n";
  const std::string state_path = JoinPath(tmp, kStateFile);
  RETURN_IF_ERROR(Fault(kStateFile, state_path));
  // Writes state.json.tmp, renames it and fsyncs `tmp` (which also makes the
  // two safetensors entries durable).
  return WriteFileAtomic(state_path, text);
}

absl::Status CheckpointStore::Commit(const CheckpointState& state,
                                     const NamedTensors& model,
                                     const NamedTensors& optimizer) {
  const std::string name = CheckpointFolderName(state.step);
  const std::string context = absl::StrCat("cannot commit checkpoint ", name);
  if (state.step < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(context, ": negative step ", state.step));
  }
  std::set<std::string> names;
  for (const NamedTensors* list : {&model, &optimizer}) {
    for (const auto& [n, t] : *list) {
      if (!names.insert(n).second) {
        return absl::InvalidArgumentError(
            absl::StrCat(context, ": tensor name \"", n,
                         "\" appears twice across model and optimizer"));
      }
    }
  }
  RETURN_IF_ERROR(AnnotateStatus(MakeDirs(dir_), context));

  // Temp folders left by a crash are never committed: remove them.
  std::error_code ec;
  for (fs::directory_iterator it(dir_, ec), end; !ec && it != end;
       it.increment(ec)) {
    if (absl::StartsWith(it->path().filename().string(), kTempPrefix)) {
      RemoveTree(it->path().string());
    }
  }

  const std::string tmp = JoinPath(
      dir_,
      absl::StrFormat("%sstep-%08d-%s", kTempPrefix, state.step, RandomHex()));
  if (mkdir(tmp.c_str(), 0755) != 0) {
    return AnnotateStatus(OsError("cannot create", tmp, errno), context);
  }
  absl::Status s = CommitInto(tmp, state, model, optimizer);
  if (!s.ok()) {
    RemoveTree(tmp);
    return AnnotateStatus(s, context);
  }

  // Re-committing a step (after a fallback) replaces the old folder; keep it
  // aside until `latest` is updated so a failure can put it back.
  const std::string final_dir = JoinPath(dir_, name);
  std::string aside;
  if (Exists(final_dir)) {
    aside = JoinPath(
        dir_, absl::StrCat(kTempPrefix, "replaced-", name, "-", RandomHex()));
    s = Rename(final_dir, aside);
    if (!s.ok()) {
      RemoveTree(tmp);
      return AnnotateStatus(s, context);
    }
  }
  auto undo = [&](const absl::Status& err) {
    if (!aside.empty()) {
      RemoveTree(final_dir);
      std::rename(aside.c_str(), final_dir.c_str());
    }
    FsyncDir(dir_).IgnoreError();
    return AnnotateStatus(err, context);
  };
  s = Fault("rename", final_dir);
  if (s.ok()) s = Rename(tmp, final_dir);
  if (!s.ok()) {
    RemoveTree(tmp);
    return undo(s);
  }
  s = CommitError(FsyncDir(dir_));
  const std::string latest_path = JoinPath(dir_, kLatest);
  const std::string previous_latest = ReadLatest(dir_);
  if (s.ok()) s = Fault("latest", latest_path);
  if (s.ok()) s = WriteFileAtomic(latest_path, name + "\n");
  if (!s.ok()) {
    // WriteFileAtomic may fail after its rename (fsync of the folder): put
    // the previous pointer back so `latest` never names a removed folder.
    if (ReadLatest(dir_) == name && previous_latest != name) {
      if (previous_latest.empty()) {
        unlink(latest_path.c_str());
      } else {
        WriteFileAtomic(latest_path, previous_latest + "\n").IgnoreError();
      }
    }
    if (aside.empty()) RemoveTree(final_dir);
    return undo(s);
  }

  // Committed. Clean up: the replaced folder, folders of an abandoned newer
  // timeline, and the oldest beyond `keep`. Failures here are harmless.
  if (!aside.empty()) RemoveTree(aside);
  std::vector<std::string> steps;
  for (const std::string& n : ListSteps()) {
    if (ParseStepName(n) > state.step) {
      RemoveTree(JoinPath(dir_, n));
    } else {
      steps.push_back(n);
    }
  }
  if (keep_ > 0) {
    for (size_t i = 0; i + keep_ < steps.size(); ++i) {
      if (steps[i] != name) RemoveTree(JoinPath(dir_, steps[i]));
    }
  }
  FsyncDir(dir_).IgnoreError();
  return absl::OkStatus();
}

absl::StatusOr<LoadedCheckpoint> CheckpointStore::LoadStep(
    const std::string& name) const {
  LoadedCheckpoint out;
  out.path = JoinPath(dir_, name);
  absl::StatusOr<std::string> text = ReadFile(JoinPath(out.path, kStateFile));
  if (!text.ok()) {
    return absl::DataLossError(absl::StrCat(
        kStateFile, ": ",
        absl::IsNotFound(text.status()) ? "missing" : text.status().message()));
  }
  std::map<std::string, Record> files;
  std::map<std::string, std::map<std::string, Record>> tensors;  // by file
  absl::StatusOr<nlohmann::json> j = ParseJson(*text, kStateFile);
  if (!j.ok()) return absl::DataLossError(j.status().message());
  absl::Status read = ReadState(*j, &out.state, &files, &tensors);
  if (!read.ok()) {
    return absl::DataLossError(
        absl::StrCat(kStateFile, ": malformed (", read.message(), ")"));
  }
  if (out.state.step != ParseStepName(name)) {
    return absl::DataLossError(absl::StrCat(
        kStateFile, ": records step ", out.state.step, " in folder ", name));
  }
  for (const std::string file : {kModelFile, kOptimizerFile}) {
    auto rec = files.find(file);
    if (rec == files.end()) {
      return absl::DataLossError(
          absl::StrCat(kStateFile, ": no record of ", file));
    }
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
  if (auto rec = files.find(kVocabFile); rec != files.end()) {
    absl::StatusOr<std::string> vocab =
        ReadFile(JoinPath(out.path, kVocabFile));
    if (!vocab.ok()) {
      return absl::DataLossError(
          absl::StrCat(kVocabFile, ": ",
                       absl::IsNotFound(vocab.status())
                           ? "missing"
                           : std::string(vocab.status().message())));
    }
    const uint32_t crc = Crc32c(vocab->data(), vocab->size());
    if (vocab->size() != rec->second.bytes || crc != rec->second.crc) {
      return absl::DataLossError(
          absl::StrCat(kVocabFile, ": ", vocab->size(), " bytes with CRC32C ",
                       Hex(crc), ", recorded ", rec->second.bytes,
                       " bytes with ", Hex(rec->second.crc)));
    }
    out.state.vocab = std::move(*vocab);
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
