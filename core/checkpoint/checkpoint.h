// Chief-written checkpoints on shared storage: DIR/step-00001200/ holds
// model.safetensors, optimizer.safetensors and state.json (step, data
// position, seed, per-tensor CRC32C); DIR/latest names the committed one.
// A commit is atomic (temp folder, fsync, rename, then the `latest` pointer);
// a restore verifies every CRC and falls back to an older checkpoint.
#ifndef LOCKSTEP_CORE_CHECKPOINT_CHECKPOINT_H_
#define LOCKSTEP_CORE_CHECKPOINT_CHECKPOINT_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/tensor.h"

namespace lockstep {

// Dynamic loss scaling's state (core/train/loss_scale.h); scale 0: the job
// does not scale its loss (every precision but fp16).
struct LossScaleState {
  double scale = 0;
  int64_t good_steps = 0;     // applied steps since the scale last changed
  int64_t skipped_steps = 0;  // steps skipped on an overflow, in all
  bool operator==(const LossScaleState& o) const {
    return scale == o.scale && good_steps == o.good_steps &&
           skipped_steps == o.skipped_steps;
  }
};

struct CheckpointState {
  int64_t step = 0;           // global steps completed
  int64_t epoch = 0;          // epoch of the next step
  int64_t step_in_epoch = 0;  // data position of the next step
  // Job seed: data order and dropout are pure functions of (seed, step), so
  // this plus `step` is the whole RNG state.
  uint64_t seed = 0;
  int64_t generation = 0;
  int64_t optimizer_iterations = 0;
  LossScaleState loss_scale;
  std::string job_json;   // canonical job spec (to notice a different job)
  double train_loss = 0;  // last reported loss, informative
  // What the job's data format keeps beside the model (DataConfig::
  // Artifacts: a text job's vocab.txt), file name -> bytes, so a resumed
  // or rejoined job, and `lockstep predict`, read the data as the run that
  // wrote them did. Names are plain file names (checkpoint_layout.h's
  // IsArtifactName).
  std::map<std::string, std::string> artifacts;
};

// Borrowed tensors to write; the caller keeps them alive during Commit.
using NamedTensors = std::vector<std::pair<std::string, const Tensor*>>;

// Elements [offset, offset + data.size()) of the tensor `name` whose whole
// shape is `shape`, of rank `owner`'s part: what a worker keeps in memory
// of sharded optimizer state with copies (its own part and the previous
// rank's, parameters and optimizer state).
struct TensorPart {
  std::string name;
  Shape shape;
  int64_t offset = 0;
  Tensor data;
  int owner = -1;
};

struct LoadedCheckpoint {
  CheckpointState state;
  // In file order (sorted by name); match by name.
  std::vector<std::pair<std::string, Tensor>> model, optimizer;
  std::string path;  // the step folder, DIR/step-00001200
  // Held in a worker's memory (a failed generation's), not on storage.
  bool in_memory = false;
  // Kept parts (then `model` holds only the tensors outside every part,
  // and `optimizer` nothing): never on storage.
  std::vector<TensorPart> model_parts, optimizer_parts;
};

// Not thread-safe: one writer (the chief) per folder.
class CheckpointStore {
 public:
  // dir = STORAGE/jobs/NAME/checkpoints (created by Commit if missing).
  // keep <= 0 keeps every checkpoint.
  CheckpointStore(std::string dir, int64_t keep);

  // Blocks while it writes DIR/.tmp-step-XXXXXXXX-<random>/{model.safetensors,
  // optimizer.safetensors, state.json, each of state.artifacts},
  // fsyncs them and the folder, renames
  // it to DIR/step-XXXXXXXX, fsyncs DIR, then replaces DIR/latest atomically.
  // Afterwards it deletes the oldest checkpoints beyond `keep` and any newer
  // than `state.step` (left from a timeline abandoned by a fallback). On
  // failure `latest` is unchanged, nothing of this commit remains, and the
  // error names the path. Stale temp folders from a crash are removed first.
  // Tensor names must be unique across model and optimizer.
  absl::Status Commit(const CheckpointState& state, const NamedTensors& model,
                      const NamedTensors& optimizer);

  // Loads the checkpoint `latest` names (or, when `latest` is missing or
  // names a missing folder, the newest step folder), verifying state.json,
  // file sizes and CRCs and every tensor's CRC32C. A damaged one adds a line
  // to *warnings (may be null) and the next older one is tried. NotFound
  // when there is no checkpoint; DataLoss (listing each) when all are
  // damaged.
  absl::StatusOr<LoadedCheckpoint> LoadLatest(
      std::vector<std::string>* warnings) const;

  // Verifies and loads one step folder ("step-00001200"); DataLoss saying
  // what is damaged.
  absl::StatusOr<LoadedCheckpoint> LoadStep(const std::string& name) const;
  // Committed step folder names ("step-00001200"), oldest first.
  std::vector<std::string> ListSteps() const;

  const std::string& dir() const { return dir_; }

  // The writer's leadership term: an HA coordinator's etcd term (its
  // leader key's create revision, larger for every later leader); 0 (the
  // default) without one. With a term, state.json records it ("term") and
  // a commit leaves alone what a later leader wrote: its temporary folders
  // and its step folders are neither removed nor pruned, and a commit is
  // refused (FailedPrecondition, naming both terms) once a step folder of
  // a later term is at or after its step or is `latest`. So a deposed
  // leader's commit that was under way when it lost its lease can no
  // longer undo the new leader's checkpoints.
  void set_term(int64_t term) { term_ = term; }

  // Test-only fault injection: called before each stage of Commit with the
  // stage ("model.safetensors", "optimizer.safetensors", "state.json",
  // "rename", "latest") and the path it is about to write; a non-OK result
  // fails that stage as an OS error would.
  using FaultHook = std::function<absl::Status(const std::string& stage,
                                               const std::string& path)>;
  void SetFaultHookForTesting(FaultHook hook) { fault_hook_ = std::move(hook); }

 private:
  absl::Status CommitInto(const std::string& tmp, const CheckpointState& state,
                          const NamedTensors& model,
                          const NamedTensors& optimizer);
  absl::Status Fault(const std::string& stage, const std::string& path) const;
  // OK, or FailedPrecondition when a later term committed `latest` or a
  // step folder at or after `step`.
  absl::Status CheckNoLaterTerm(int64_t step, const std::string& context) const;
  // `.tmp-` (+ `t<term>-` with a term) + `what`.
  std::string TempName(const std::string& what) const;

  std::string dir_;
  int64_t keep_;
  int64_t term_ = 0;
  FaultHook fault_hook_;
};

// "step-00001200".
std::string CheckpointFolderName(int64_t step);

// Checks the files of the step folder `step_dir` against its state.json
// (each file's size and CRC32C, the model, optimizer and artifacts), a
// MiB at a time: what LoadStep verifies of the files, without loading the
// tensors (a client that only copies a checkpoint). kDataLoss naming the
// file and what is wrong; other codes for a folder that cannot be read.
absl::Status VerifyCheckpointFiles(const std::string& step_dir);

// A checkpoint a user names: a checkpoints folder (its latest, as
// LoadLatest, warnings included) or one step folder in it (that one,
// verified). NotFound naming `path` when it is neither.
absl::StatusOr<LoadedCheckpoint> LoadCheckpointAt(
    const std::string& path, std::vector<std::string>* warnings);

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_CHECKPOINT_CHECKPOINT_H_
