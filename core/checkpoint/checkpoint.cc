// Checkpoint commit: temp folder, fsync, rename, the `latest` pointer and
// pruning (the verified restore is checkpoint_load.cc).
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
#include "core/checkpoint/checkpoint_layout.h"
#include "core/checkpoint/safetensors.h"
#include "core/json_util.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;
using checkpoint_layout::IsArtifactName;
using checkpoint_layout::kLatest;
using checkpoint_layout::kModelFile;
using checkpoint_layout::kOptimizerFile;
using checkpoint_layout::kStateFile;
using checkpoint_layout::kTempPrefix;
using checkpoint_layout::ParseStepName;
using checkpoint_layout::ReadLatest;
using checkpoint_layout::RemoveTree;
using checkpoint_layout::TempTerm;

std::string RandomHex() {
  std::random_device rd;
  return absl::StrFormat("%08x", rd());
}

// The "term" a step folder's state.json records; 0 without one (written
// without a term) or when unreadable (a damaged folder is not a later
// leader's).
int64_t FolderTerm(const std::string& folder) {
  absl::StatusOr<std::string> text = ReadFile(JoinPath(folder, kStateFile));
  if (!text.ok()) return 0;
  const nlohmann::json j = nlohmann::json::parse(*text, nullptr, false);
  if (!j.is_object() || !j.contains("term") || !j["term"].is_number_integer()) {
    return 0;
  }
  return j["term"].get<int64_t>();
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

bool Exists(const std::string& path) {
  std::error_code ec;
  return fs::exists(fs::symlink_status(path, ec));
}

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

std::string CheckpointStore::TempName(const std::string& what) const {
  return term_ > 0 ? absl::StrFormat("%st%d-%s", kTempPrefix, term_, what)
                   : absl::StrCat(kTempPrefix, what);
}

absl::Status CheckpointStore::CheckNoLaterTerm(
    int64_t step, const std::string& context) const {
  if (term_ <= 0) return absl::OkStatus();
  const std::string latest = ReadLatest(dir_);
  for (const std::string& n : ListSteps()) {
    if (ParseStepName(n) < step && n != latest) continue;
    const int64_t term = FolderTerm(JoinPath(dir_, n));
    if (term > term_) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "%s: %s was committed by a later leader (term %d; this "
          "coordinator's term is %d): this coordinator no longer leads, and "
          "leaves the later leader's checkpoints as they are",
          context, n, term, term_));
    }
  }
  return absl::OkStatus();
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
  const LossScaleState& ls = state.loss_scale;
  if (!(ls.scale == 0 || (ls.scale > 0 && std::isfinite(ls.scale))) ||
      ls.good_steps < 0 || ls.skipped_steps < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "checkpoint: loss_scale must be 0 (none) or finite and > 0 with step "
        "counts >= 0; got scale ",
        ls.scale, ", good_steps ", ls.good_steps, ", skipped_steps ",
        ls.skipped_steps));
  }
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
  for (const auto& [file, bytes] : state.artifacts) {
    if (!IsArtifactName(file)) {
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoint: data artifact name \"", file,
                       "\" is not a plain file name"));
    }
    const std::string path = JoinPath(tmp, file);
    RETURN_IF_ERROR(Fault(file, path));
    RETURN_IF_ERROR(WriteFileAtomic(path, bytes));
    files[file] = {{"bytes", bytes.size()},
                   {"crc32c", Crc32c(bytes.data(), bytes.size())}};
  }
  nlohmann::ordered_json j;
  j["step"] = state.step;
  j["epoch"] = state.epoch;
  j["step_in_epoch"] = state.step_in_epoch;
  j["seed"] = state.seed;
  j["generation"] = state.generation;
  j["optimizer_iterations"] = state.optimizer_iterations;
  if (term_ > 0) j["term"] = term_;  // only an HA coordinator's
  if (state.loss_scale.scale > 0) {  // only a job that scales its loss
    j["loss_scale"] = {{"scale", state.loss_scale.scale},
                       {"good_steps", state.loss_scale.good_steps},
                       {"skipped_steps", state.loss_scale.skipped_steps}};
  }
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

  RETURN_IF_ERROR(CheckNoLaterTerm(state.step, context));
  // Temp folders left by a crash are never committed: remove them (not a
  // later leader's: its commit may be under way).
  std::error_code ec;
  for (fs::directory_iterator it(dir_, ec), end; !ec && it != end;
       it.increment(ec)) {
    const std::string n = it->path().filename().string();
    if (absl::StartsWith(n, kTempPrefix) &&
        (term_ == 0 || TempTerm(n) <= term_)) {
      RemoveTree(it->path().string());
    }
  }

  const std::string tmp = JoinPath(
      dir_, TempName(absl::StrFormat("step-%08d-%s", state.step, RandomHex())));
  if (mkdir(tmp.c_str(), 0755) != 0) {
    return AnnotateStatus(OsError("cannot create", tmp, errno), context);
  }
  absl::Status s = CommitInto(tmp, state, model, optimizer);
  if (!s.ok()) {
    RemoveTree(tmp);
    return AnnotateStatus(s, context);
  }

  // Written: a later leader may have committed meanwhile (the window a
  // deposed leader's commit under way has).
  s = CheckNoLaterTerm(state.step, context);
  if (!s.ok()) {
    RemoveTree(tmp);
    return s;
  }
  // Re-committing a step (after a fallback) replaces the old folder; keep it
  // aside until `latest` is updated so a failure can put it back.
  const std::string final_dir = JoinPath(dir_, name);
  std::string aside;
  if (Exists(final_dir)) {
    aside = JoinPath(
        dir_, TempName(absl::StrCat("replaced-", name, "-", RandomHex())));
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
  // timeline (not a later leader's), and the oldest beyond `keep`. Failures
  // here are harmless.
  if (!aside.empty()) RemoveTree(aside);
  std::vector<std::string> steps;
  for (const std::string& n : ListSteps()) {
    if (ParseStepName(n) > state.step) {
      if (term_ == 0 || FolderTerm(JoinPath(dir_, n)) <= term_) {
        RemoveTree(JoinPath(dir_, n));
      }
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

}  // namespace lockstep
