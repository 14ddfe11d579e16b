// Fill-mask inference: tokenize as the data does, one forward pass without
// dropout, a softmax over each [MASK]'s logits, the top k.
#include "core/predict/fill_mask.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/file_util.h"
#include "base/status_macros.h"
#include "core/data/dataset.h"
#include "core/data/text_dataset.h"
#include "core/data/wordpiece.h"
#include "core/model/model.h"
#include "core/train/checkpoint_restore.h"

namespace lockstep {

absl::StatusOr<FillMaskResult> FillMask(const JobSpec& spec,
                                        const LoadedCheckpoint& checkpoint,
                                        absl::string_view text, int top_k) {
  const TextConfig* text_data = spec.data.As<TextConfig>();
  if (text_data == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "job ", spec.name,
        " does not train a masked language model "
        "(data.format is not \"text\"): there is no [MASK] to fill"));
  }
  FillMaskResult result;
  std::shared_ptr<const WordPieceVocab> vocab;
  auto kept = checkpoint.state.artifacts.find(kVocabArtifact);
  if (kept != checkpoint.state.artifacts.end()) {
    result.vocab_source = JoinPath(checkpoint.path, kVocabArtifact);
    ASSIGN_OR_RETURN(WordPieceVocab v, WordPieceVocab::FromText(
                                           kept->second, result.vocab_source));
    vocab = std::make_shared<const WordPieceVocab>(std::move(v));
  } else {
    // A checkpoint written before vocabularies were kept: rebuild it as
    // the job did (the same files give the same vocabulary).
    result.vocab_source = text_data->vocab_path.empty()
                              ? "learned again from data.train_path"
                              : text_data->vocab_path;
    ASSIGN_OR_RETURN(vocab, LoadOrLearnVocab(*text_data));
  }
  if (top_k < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("top_k must be at least 1, got ", top_k));
  }
  // More than the vocabulary holds: every token, as ClassifyImages shows
  // every class.
  top_k = static_cast<int>(std::min<int64_t>(top_k, vocab->size()));
  // The checkpoint holds every parameter: the job's initial weights
  // (model.init) are neither read nor needed.
  ModelSpec model_spec = spec.model;
  model_spec.init_safetensors.clear();
  ASSIGN_OR_RETURN(std::unique_ptr<Model> model,
                   Model::Build(model_spec, spec.seed));
  if (model->classes() != vocab->size()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the model predicts ", model->classes(), " tokens but the vocabulary (",
        result.vocab_source, ") has ", vocab->size()));
  }
  RETURN_IF_ERROR(ApplyCheckpointModel(checkpoint, model->params(),
                                       " (is it this job's checkpoint?)"));
  ASSIGN_OR_RETURN(
      MlmQuery query,
      MakeMlmQuery(*text_data, DataOptionsFor(spec).fields, *vocab, text));
  Tensor x(Shape{1, static_cast<int64_t>(query.inputs.size())},
           std::move(query.inputs));
  const float* logits = model->Logits(x);
  const int64_t classes = model->classes();
  for (int32_t id : query.tokens) result.tokens.push_back(vocab->token(id));
  result.positions = query.positions;
  std::vector<int32_t> order(classes);
  for (size_t slot = 0; slot < query.positions.size(); ++slot) {
    const float* row = logits + slot * classes;
    const float max = *std::max_element(row, row + classes);
    double sum = 0;
    for (int64_t c = 0; c < classes; ++c) sum += std::exp(row[c] - max);
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + top_k, order.end(),
                      [row](int32_t a, int32_t b) {
                        return row[a] > row[b] || (row[a] == row[b] && a < b);
                      });
    std::vector<TokenGuess> guesses;
    for (int k = 0; k < top_k; ++k) {
      guesses.push_back(
          {vocab->token(order[k]), std::exp(row[order[k]] - max) / sum});
    }
    result.guesses.push_back(std::move(guesses));
  }
  return result;
}

}  // namespace lockstep
