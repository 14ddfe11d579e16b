// A checkpoint's state.json, the file a restore trusts to say what the step
// folder holds (step, data position, seed, the size and CRC32C of each file
// and tensor). Once per process a real CheckpointStore commits steps 3 and 7
// into the scratch folder; each input then replaces step 7's state.json.
// Checked: LoadCheckpointAt on the step folder loads or is refused with a
// message; a load returns step 7 with exactly the tensors committed (every
// recorded CRC is verified, so no state.json can make it return others) and
// the committed vocabulary or none. LoadCheckpointAt on the checkpoints folder
// (LoadLatest) never fails: it returns step 7 when that loads and otherwise
// falls back to the intact step 3, with a warning naming step 7.
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "base/file_util.h"
#include "core/checkpoint/checkpoint.h"
#include "core/tensor.h"
#include "tests/fuzz/fuzz_util.h"

namespace lockstep {
namespace {

constexpr int64_t kOlderStep = 3;
constexpr int64_t kFuzzedStep = 7;
constexpr char kVocab[] = "[PAD]\n[UNK]\nthe\n##s\n";

// A tensor's shape and values by name, as a load returns them (match by
// name).
using ByName = std::map<std::string, std::pair<Shape, std::vector<float>>>;

ByName Index(const std::vector<std::pair<std::string, Tensor>>& tensors) {
  ByName out;
  for (const auto& [name, t] : tensors) {
    FUZZ_CHECK(out.emplace(name, std::make_pair(t.shape(), t.values())).second);
  }
  return out;
}

// The model of each step differs (its first value is the step), so a
// fallback is told apart from a load of the fuzzed step.
std::vector<std::pair<std::string, Tensor>> Model(int64_t step) {
  std::vector<std::pair<std::string, Tensor>> out;
  out.emplace_back("dense/kernel",
                   Tensor({2, 3}, {static_cast<float>(step), 2, 3, 4, 5, 6}));
  out.emplace_back("dense/bias", Tensor({3}, {0.1f, 0.2f, 0.3f}));
  out.emplace_back("empty", Tensor({0, 4}));
  return out;
}

std::vector<std::pair<std::string, Tensor>> Optimizer() {
  std::vector<std::pair<std::string, Tensor>> out;
  out.emplace_back("adam/m/dense/kernel", Tensor({2, 3}, {6, 5, 4, 3, 2, 1}));
  out.emplace_back("adam/iterations", Tensor({}, {12}));
  return out;
}

NamedTensors Borrow(const std::vector<std::pair<std::string, Tensor>>& v) {
  NamedTensors out;
  for (const auto& [name, t] : v) out.emplace_back(name, &t);
  return out;
}

CheckpointState State(int64_t step) {
  CheckpointState s;
  s.step = step;
  s.epoch = step / 5;
  s.step_in_epoch = step % 5;
  s.seed = 0xfedcba9876543210ull;
  s.generation = 2;
  s.optimizer_iterations = step;
  s.job_json = "{\"name\":\"fuzz\"}";
  s.train_loss = 0.25;
  s.artifacts["vocab.txt"] = kVocab;
  return s;
}

// The committed checkpoints folder, made once per process (a fixed amount of
// state; every input rewrites the same state.json).
struct Fixture {
  std::string dir;       // .../checkpoints
  std::string step_dir;  // .../checkpoints/step-00000007
  std::string state_path;
};

const Fixture& GetFixture() {
  static const Fixture* const fixture = [] {
    auto* f = new Fixture;
    const std::string root = fuzz::ScratchDir() + "/fuzz_" +
                             std::to_string(static_cast<long>(getpid())) +
                             "_checkpoint";
    std::error_code ec;
    std::filesystem::remove_all(root, ec);
    f->dir = JoinPath(root, "checkpoints");
    CheckpointStore store(f->dir, /*keep=*/0);
    const auto optimizer = Optimizer();
    for (int64_t step : {kOlderStep, kFuzzedStep}) {
      const auto model = Model(step);
      FUZZ_CHECK(
          store.Commit(State(step), Borrow(model), Borrow(optimizer)).ok());
    }
    f->step_dir = JoinPath(f->dir, CheckpointFolderName(kFuzzedStep));
    f->state_path = JoinPath(f->step_dir, "state.json");
    return f;
  }();
  return *fixture;
}

// The load returned `step` exactly as committed.
void CheckCommitted(const LoadedCheckpoint& loaded, int64_t step) {
  FUZZ_CHECK(loaded.state.step == step);
  FUZZ_CHECK(Index(loaded.model) == Index(Model(step)));
  FUZZ_CHECK(Index(loaded.optimizer) == Index(Optimizer()));
  FUZZ_CHECK(loaded.state.artifacts.empty() ||
             (loaded.state.artifacts.size() == 1 &&
              loaded.state.artifacts.at("vocab.txt") == kVocab));
}

}  // namespace
}  // namespace lockstep

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace lockstep;
  const Fixture& f = GetFixture();
  fuzz::OverwriteFile(f.state_path,
            std::string(reinterpret_cast<const char*>(data), size));

  absl::StatusOr<LoadedCheckpoint> at_step =
      LoadCheckpointAt(f.step_dir, nullptr);
  fuzz::CheckRefusal(at_step.status());
  if (at_step.ok()) CheckCommitted(*at_step, kFuzzedStep);

  std::vector<std::string> warnings;
  absl::StatusOr<LoadedCheckpoint> latest = LoadCheckpointAt(f.dir, &warnings);
  FUZZ_CHECK(latest.ok());
  if (at_step.ok()) {
    CheckCommitted(*latest, kFuzzedStep);
    FUZZ_CHECK(warnings.empty());
  } else {
    CheckCommitted(*latest, kOlderStep);
    FUZZ_CHECK(warnings.size() == 1);
    FUZZ_CHECK(
        absl::StrContains(warnings[0], CheckpointFolderName(kFuzzedStep)));
  }
  return 0;
}
