// Masked-language-model data from plain text (data.format "text"): the
// lines of the files (short ones dropped, as the KerasNLP tutorial filters
// them), WordPiece-tokenized into [CLS] ... [SEP] sequences of
// data.sequence_length (consecutive lines packed, or one line each),
// padded with [PAD]. A sequence's masks are drawn when its batch is made,
// as BERT draws them (a share of the maskable tokens, capped; of those 80%
// [MASK], 10% a random token, 10% kept), as a pure function of (seed,
// epoch, sample): a restarted or rejoined job masks exactly as an unfailed
// one, and evaluation always sees the same masks.
//
// A sample holds the model inputs it names, in order: token_ids, segment_ids
// (zeros) and padding_mask (1 for tokens, 0 for [PAD]), each
// [sequence_length], and mask_positions [max_predictions] (-1 for an unused
// slot); its labels are the original ids at those positions (-1 where fewer
// were masked).
//
// With data.task "causal_lm" nothing is masked: a sample's labels are its
// next tokens (label i is token i + 1; -1 at the last token and on
// padding), sequence_length of them, and its fields token_ids,
// segment_ids and padding_mask (a GPT-style model's).
#ifndef LOCKSTEP_CORE_DATA_TEXT_DATASET_H_
#define LOCKSTEP_CORE_DATA_TEXT_DATASET_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/data/dataset.h"
#include "core/data/wordpiece.h"

namespace lockstep {

// The text format's fields (core/data/text_format.h parses them).
struct TextConfig {
  // Plain text files, one passage per line.
  std::vector<std::string> train_files, test_files;
  int64_t min_line_chars = 0;  // shorter lines are dropped
  bool lowercase = true;       // BERT's uncased normalization
  std::string vocab_path;      // a vocab.txt, or "": learned from train_files
  int64_t vocab_size = 0;      // the size to learn (required then)
  int64_t sequence_length = 128;
  // Each position's label is the next token (a causal language model),
  // instead of masked tokens' labels.
  bool causal = false;
  // Consecutive lines fill a sequence (each ends with [SEP]) instead of one
  // line per sequence.
  bool pack_lines = true;
  double mask_rate = 0.15;         // of a sequence's maskable tokens
  int64_t max_predictions = 20;    // masked tokens per sequence at most
  double mask_token_rate = 0.8;    // of those: replaced by [MASK]
  double random_token_rate = 0.1;  // replaced by a random token (else kept)
};

// data.vocab when given, else a vocabulary of data.vocab_size learned from
// the training files. Errors name the field and the file.
absl::StatusOr<std::shared_ptr<const WordPieceVocab>> LoadOrLearnVocab(
    const TextConfig& spec);

// The file name of the vocabulary a text job's checkpoint keeps
// (DataConfig::Artifacts): one token per line.
inline constexpr char kVocabArtifact[] = "vocab.txt";

// The split's sequences with their masking (options.vocab, else a restored
// kVocabArtifact, else LoadOrLearnVocab). Errors name the field and the file: a
// missing file (kNotFound), a binary file, a file or split with no line long
// enough, a model input that is not a text field (kInvalidArgument).
absl::StatusOr<Dataset> LoadTextDataset(const TextConfig& spec, Split split,
                                        const DataOptions& options);

// A fill-mask query (`lockstep predict`): `text` tokenized as the data is,
// wrapped in [CLS] ... [SEP], with a prediction slot at every literal
// [MASK] in it.
struct MlmQuery {
  std::vector<int32_t> tokens;     // [CLS] ... [SEP], unpadded
  std::vector<int32_t> positions;  // where the [MASK]s are, ascending
  std::vector<float> inputs;       // one sample of the model's inputs
};
// `fields` are the model's inputs (DataOptions::fields). kInvalidArgument
// when the text has no [MASK], more than data.max_predictions of them, or
// more tokens than data.sequence_length holds (each error says the count).
absl::StatusOr<MlmQuery> MakeMlmQuery(const TextConfig& spec,
                                      const std::vector<std::string>& fields,
                                      const WordPieceVocab& vocab,
                                      absl::string_view text);

// --- The pieces, for tests ----------------------------------------------

struct MlmMasking {
  double rate = 0.15;
  int64_t max_predictions = 20;
  double mask_token_rate = 0.8;
  double random_token_rate = 0.1;
};

// How many tokens of a sequence with `maskable` maskable tokens are
// predicted: min(max_predictions, max(1, round(maskable * rate))), 0 when
// there is none.
int64_t PredictionCount(int64_t maskable, const MlmMasking& m);

struct MaskedSequence {
  std::vector<int32_t> tokens;     // the input, masked
  std::vector<int32_t> positions;  // the predicted positions, ascending
  std::vector<int32_t> labels;     // the original tokens there
};
// Masks `tokens` ([CLS], [SEP], [PAD] and [MASK] are never picked), the
// draws from `seed` alone.
MaskedSequence MaskSequence(const std::vector<int32_t>& tokens,
                            const WordPieceVocab& vocab, const MlmMasking& m,
                            uint64_t seed);

// Lines' token ids into sequences of `length` ([CLS] ... [SEP], unpadded):
// with `pack`, consecutive lines share a sequence, each ending in [SEP]; a
// line longer than the sequence is cut into several.
std::vector<std::vector<int32_t>> MakeSequences(
    const std::vector<std::vector<int32_t>>& lines, int64_t length, bool pack,
    const WordPieceVocab& vocab);

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_DATA_TEXT_DATASET_H_
