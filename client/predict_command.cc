// The `predict` verb: load the job and a checkpoint, fill the text's
// [MASK]s, print the top k tokens of each with their probabilities.
#include "client/predict_command.h"

#include <algorithm>
#include <iostream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/file_util.h"
#include "client/cli_flags.h"
#include "core/checkpoint/checkpoint.h"
#include "core/job/job_spec.h"
#include "core/predict/classify_images.h"
#include "core/predict/fill_mask.h"

namespace lockstep {
namespace {

int Fail(const absl::Status& status) {
  std::cerr << "lockstep predict: error: " << status.message() << std::endl;
  return status.code() == absl::StatusCode::kInvalidArgument ||
                 status.code() == absl::StatusCode::kNotFound
             ? 2
             : 1;
}

}  // namespace

const char kPredictUsage[] =
    "usage: lockstep predict JOB.json (--text TEXT | --image PATH) "
    "[--checkpoint DIR] [--storage DIR] [--top-k K] [--data-dir DIR]\n"
    "  --text TEXT        a text job: a sentence with [MASK] where tokens are "
    "to be predicted\n"
    "  --image PATH       an image_folder job: an image file, or a folder of "
    "them, to classify\n"
    "  --checkpoint DIR   a checkpoints folder (its latest) or one "
    "step-XXXXXXXX folder\n"
    "                     (default: STORAGE/jobs/NAME/checkpoints)\n"
    "  --storage DIR      the storage `lockstep train` used (default "
    "./lockstep_storage)\n"
    "  --top-k K          tokens per [MASK], or classes per image, shown "
    "(default 5)\n"
    "  --data-dir DIR     resolve the job's relative data paths against DIR\n"
    "                     (default: the job file's folder)\n";

int RunPredictCommand(const std::vector<std::string>& args) {
  absl::StatusOr<ParsedFlags> flags = ParseFlags(
      args, {"text", "image", "checkpoint", "storage", "top-k", "data-dir"},
      {"help"});
  if (!flags.ok()) {
    std::cerr << "lockstep predict: " << flags.status().message() << "\n"
              << kPredictUsage;
    return 2;
  }
  if (flags->Has("help")) {
    std::cout << kPredictUsage;
    return 0;
  }
  if (flags->positional.size() != 1 ||
      flags->Has("text") == flags->Has("image")) {
    std::cerr << "lockstep predict: expected one job file and --text or "
                 "--image\n"
              << kPredictUsage;
    return 2;
  }
  absl::StatusOr<int64_t> top_k = flags->GetInt("top-k", 5);
  if (!top_k.ok()) return Fail(top_k.status());
  if (*top_k < 1) {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("--top-k: must be at least 1, got ", *top_k)));
  }
  absl::StatusOr<JobSpec> spec =
      LoadJobSpec(flags->positional[0], flags->Get("data-dir", ""));
  if (!spec.ok()) return Fail(spec.status());
  const std::string dir = flags->Get(
      "checkpoint",
      JoinPath(
          JoinPath(JoinPath(flags->Get("storage", "lockstep_storage"), "jobs"),
                   spec->name),
          "checkpoints"));
  std::vector<std::string> warnings;
  absl::StatusOr<LoadedCheckpoint> checkpoint =
      LoadCheckpointAt(dir, &warnings);
  for (const std::string& w : warnings) {
    std::cerr << "lockstep predict: warning: " << w << std::endl;
  }
  if (!checkpoint.ok()) return Fail(checkpoint.status());
  const int k = static_cast<int>(std::min<int64_t>(*top_k, 1 << 30));
  if (flags->Has("image")) {
    absl::StatusOr<ImageClassification> c =
        ClassifyImages(*spec, *checkpoint, {flags->Get("image", "")}, k);
    if (!c.ok()) return Fail(c.status());
    std::cout << absl::StrFormat("checkpoint %s (step %d), classes from %s\n",
                                 checkpoint->path, checkpoint->state.step,
                                 c->classes_source);
    int unread = 0;
    for (const ImagePrediction& p : c->images) {
      if (!p.error.empty()) {
        std::cout << p.path << ": cannot read: " << p.error << "\n";
        ++unread;
        continue;
      }
      std::vector<std::string> guesses;
      for (const ClassGuess& g : p.guesses) {
        guesses.push_back(absl::StrFormat("%s %.4f", g.label, g.probability));
      }
      std::cout << p.path << ": " << absl::StrJoin(guesses, ", ") << "\n";
    }
    std::cout.flush();
    const int n = static_cast<int>(c->images.size());
    if (unread > 0 && unread == n) {
      std::cerr << "lockstep predict: error: "
                << (n == 1 ? std::string("the image could not be read")
                           : absl::StrCat("none of the ", n,
                                          " images could be read"))
                << " (above)" << std::endl;
      return 1;
    }
    if (unread > 0) {
      std::cerr << "lockstep predict: warning: " << unread << " of " << n
                << " images could not be read (above)" << std::endl;
    }
    return 0;
  }
  absl::StatusOr<FillMaskResult> r =
      FillMask(*spec, *checkpoint, flags->Get("text", ""), k);
  if (!r.ok()) return Fail(r.status());
  std::cout << absl::StrFormat("checkpoint %s (step %d), vocabulary %s\n",
                               checkpoint->path, checkpoint->state.step,
                               r->vocab_source);
  std::cout << "tokens: " << absl::StrJoin(r->tokens, " ") << "\n";
  for (size_t m = 0; m < r->guesses.size(); ++m) {
    std::cout << absl::StrFormat("[MASK] %d of %d (token %d):\n", m + 1,
                                 r->guesses.size(), r->positions[m]);
    for (size_t i = 0; i < r->guesses[m].size(); ++i) {
      std::cout << absl::StrFormat("  %2d. %-20s %.4f\n", i + 1,
                                   r->guesses[m][i].token,
                                   r->guesses[m][i].probability);
    }
  }
  return 0;
}

}  // namespace lockstep
