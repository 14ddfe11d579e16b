// `lockstep predict`: a text job's model, restored from a checkpoint, fills
// the [MASK]s of a sentence with its most likely tokens (Hugging Face's
// fill-mask pipeline), so a user can see what the model learned.
#ifndef LOCKSTEP_CORE_PREDICT_FILL_MASK_H_
#define LOCKSTEP_CORE_PREDICT_FILL_MASK_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/checkpoint/checkpoint.h"
#include "core/job/job_spec.h"

namespace lockstep {

struct TokenGuess {
  std::string token;
  double probability = 0;
};

struct FillMaskResult {
  // Where the vocabulary came from: the checkpoint's vocab.txt, or (an
  // older checkpoint without one) data.vocab or the training files again.
  std::string vocab_source;
  std::vector<std::string> tokens;  // the input's word pieces, [CLS]...[SEP]
  std::vector<int32_t> positions;   // of each [MASK] in `tokens`
  std::vector<std::vector<TokenGuess>> guesses;  // per [MASK], best first
};

// Builds the job's model with the checkpoint's parameters and runs `text`
// through it in inference mode. kInvalidArgument for a job that is not a
// text job, a text without [MASK] or too long for the model, a top_k
// under 1 (one past the vocabulary shows every token); kFailedPrecondition when
// the checkpoint is of another model or its vocabulary does not fit the model.
absl::StatusOr<FillMaskResult> FillMask(const JobSpec& spec,
                                        const LoadedCheckpoint& checkpoint,
                                        absl::string_view text, int top_k);

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_PREDICT_FILL_MASK_H_
