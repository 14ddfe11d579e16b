// Reading text files into token sequences, and the masking sample maker.
#include "core/data/text_dataset.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <unordered_map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "base/file_util.h"
#include "base/status_macros.h"
#include "core/random.h"

namespace lockstep {
namespace {

// Masks derive from MixSeed(seed, kMaskTag): independent of the other
// streams the job seed feeds (weights, data order, dropout).
constexpr uint64_t kMaskTag = 0x6d61736b6c6d6cull;  // "masklml"

enum class Field { kTokenIds, kSegmentIds, kPaddingMask, kMaskPositions };

// The kept lines of one file, or why it cannot be read.
absl::StatusOr<std::vector<std::string>> ReadLines(const std::string& field,
                                                   const std::string& path,
                                                   int64_t min_chars) {
  auto missing = [&](int err) {
    return absl::NotFoundError(
        absl::StrCat(field, ": cannot read \"", path, "\": ", strerror(err)));
  };
  auto failed = [&](int err) {
    return absl::DataLossError(
        absl::StrCat(field, ": reading \"", path, "\": ", strerror(err)));
  };
  ASSIGN_OR_RETURN(std::string text, ReadFile(path, missing, failed));
  if (text.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": \"", path, "\" is empty"));
  }
  const size_t nul = text.find('\0');
  if (nul != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": \"", path,
                     "\" is not text (a NUL byte at offset ", nul, ")"));
  }
  std::vector<std::string> lines;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || static_cast<int64_t>(line.size()) < min_chars) continue;
    lines.emplace_back(line);
  }
  if (lines.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": \"", path, "\" has no line of at least ",
        std::max<int64_t>(min_chars, 1), " characters (data.min_line_chars)"));
  }
  return lines;
}

absl::StatusOr<std::vector<std::string>> ReadAll(
    const std::string& field, const std::vector<std::string>& paths,
    int64_t min_chars) {
  std::vector<std::string> all;
  for (const std::string& p : paths) {
    ASSIGN_OR_RETURN(std::vector<std::string> lines,
                     ReadLines(field, p, min_chars));
    for (std::string& l : lines) all.push_back(std::move(l));
  }
  return all;
}

// Writes a masked sequence's model inputs, `fields` in order: token ids
// padded to `length`, zero segment ids, the padding mask and `p` prediction
// positions (-1 for an unused slot: gather_positions reads zeros).
void WriteInputs(const std::vector<Field>& fields, const MaskedSequence& m,
                 int64_t length, int64_t p, int32_t pad, float* x) {
  const int64_t n = static_cast<int64_t>(m.tokens.size());
  for (Field f : fields) {
    switch (f) {
      case Field::kTokenIds:
        for (int64_t i = 0; i < length; ++i) {
          x[i] = static_cast<float>(i < n ? m.tokens[i] : pad);
        }
        x += length;
        break;
      case Field::kSegmentIds:
        std::fill(x, x + length, 0.0f);
        x += length;
        break;
      case Field::kPaddingMask:
        for (int64_t i = 0; i < length; ++i) x[i] = i < n ? 1.0f : 0.0f;
        x += length;
        break;
      case Field::kMaskPositions:
        for (int64_t i = 0; i < p; ++i) {
          x[i] = i < static_cast<int64_t>(m.positions.size())
                     ? static_cast<float>(m.positions[i])
                     : -1.0f;
        }
        x += p;
        break;
    }
  }
}

// The text fields a model's inputs name, in order.
absl::StatusOr<std::vector<Field>> ParseFields(
    const std::vector<std::string>& names, bool causal) {
  std::vector<Field> fields;
  for (const std::string& name : names) {
    if (name == "token_ids") {
      fields.push_back(Field::kTokenIds);
    } else if (name == "segment_ids") {
      fields.push_back(Field::kSegmentIds);
    } else if (name == "padding_mask") {
      fields.push_back(Field::kPaddingMask);
    } else if (name == "mask_positions" && !causal) {
      fields.push_back(Field::kMaskPositions);
    } else if (causal) {
      return absl::InvalidArgumentError(absl::StrCat(
          "model.inputs: causal_lm text data has no field \"", name,
          "\" (its fields: token_ids, segment_ids, "
          "padding_mask)"));
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("model.inputs: text data has no field \"", name,
                       "\" (its fields: token_ids, segment_ids, padding_mask, "
                       "mask_positions)"));
    }
  }
  return fields;
}

class MlmSampleMaker : public SampleMaker {
 public:
  MlmSampleMaker(std::shared_ptr<const WordPieceVocab> vocab,
                 std::vector<std::vector<int32_t>> sequences, int64_t length,
                 const MlmMasking& masking, uint64_t seed,
                 std::vector<Field> fields)
      : vocab_(std::move(vocab)),
        sequences_(std::move(sequences)),
        length_(length),
        masking_(masking),
        seed_(MixSeed(seed, kMaskTag)),
        fields_(std::move(fields)) {
    counts_.reserve(sequences_.size());
    for (const std::vector<int32_t>& s : sequences_) {
      int64_t maskable = 0;
      for (int32_t t : s) maskable += Maskable(t) ? 1 : 0;
      counts_.push_back(PredictionCount(maskable, masking_));
    }
  }

  void Make(int64_t epoch, int64_t index, float* x,
            int32_t* labels) const override {
    const std::vector<int32_t>& seq = sequences_[index];
    const MaskedSequence m =
        MaskSequence(seq, *vocab_, masking_,
                     MixSeed(MixSeed(seed_, static_cast<uint64_t>(epoch)),
                             static_cast<uint64_t>(index)));
    WriteInputs(fields_, m, length_, masking_.max_predictions, vocab_->pad(),
                x);
    for (int64_t i = 0; i < masking_.max_predictions; ++i) {
      labels[i] = i < static_cast<int64_t>(m.labels.size()) ? m.labels[i] : -1;
    }
  }

  int64_t LabelCount(int64_t index) const override { return counts_[index]; }

 private:
  bool Maskable(int32_t t) const {
    return t != vocab_->cls() && t != vocab_->sep() && t != vocab_->pad() &&
           t != vocab_->mask();
  }

  std::shared_ptr<const WordPieceVocab> vocab_;
  std::vector<std::vector<int32_t>> sequences_;
  const int64_t length_;
  const MlmMasking masking_;
  const uint64_t seed_;
  const std::vector<Field> fields_;
  std::vector<int64_t> counts_;
};

// A causal language model's samples: the sequence as it is, each
// position's label the next token.
class CausalSampleMaker : public SampleMaker {
 public:
  CausalSampleMaker(std::vector<std::vector<int32_t>> sequences, int64_t length,
                    int32_t pad, std::vector<Field> fields)
      : sequences_(std::move(sequences)),
        length_(length),
        pad_(pad),
        fields_(std::move(fields)) {}

  void Make(int64_t, int64_t index, float* x, int32_t* labels) const override {
    MaskedSequence m;
    m.tokens = sequences_[index];
    WriteInputs(fields_, m, length_, 0, pad_, x);
    const int64_t n = static_cast<int64_t>(m.tokens.size());
    for (int64_t i = 0; i < length_; ++i) {
      labels[i] = i + 1 < n ? m.tokens[i + 1] : -1;
    }
  }

  int64_t LabelCount(int64_t index) const override {
    return static_cast<int64_t>(sequences_[index].size()) - 1;
  }

 private:
  std::vector<std::vector<int32_t>> sequences_;
  const int64_t length_;
  const int32_t pad_;
  const std::vector<Field> fields_;
};

}  // namespace

int64_t PredictionCount(int64_t maskable, const MlmMasking& m) {
  if (maskable <= 0) return 0;
  const int64_t k = std::max<int64_t>(
      1, std::llround(static_cast<double>(maskable) * m.rate));
  return std::min(k, m.max_predictions);
}

MaskedSequence MaskSequence(const std::vector<int32_t>& tokens,
                            const WordPieceVocab& vocab, const MlmMasking& m,
                            uint64_t seed) {
  MaskedSequence out;
  out.tokens = tokens;
  std::vector<int32_t> candidates;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const int32_t t = tokens[i];
    if (t != vocab.cls() && t != vocab.sep() && t != vocab.pad() &&
        t != vocab.mask()) {
      candidates.push_back(static_cast<int32_t>(i));
    }
  }
  const int64_t k = PredictionCount(static_cast<int64_t>(candidates.size()), m);
  Rng rng(seed);
  // The first k of a Fisher-Yates shuffle: k distinct positions.
  for (int64_t i = 0; i < k; ++i) {
    const int64_t j =
        i + static_cast<int64_t>(rng.UniformInt(candidates.size() - i));
    std::swap(candidates[i], candidates[j]);
  }
  out.positions.assign(candidates.begin(), candidates.begin() + k);
  std::sort(out.positions.begin(), out.positions.end());
  for (int32_t pos : out.positions) {
    out.labels.push_back(tokens[pos]);
    const double u = rng.UniformDouble();
    if (u < m.mask_token_rate) {
      out.tokens[pos] = vocab.mask();
    } else if (u < m.mask_token_rate + m.random_token_rate) {
      int32_t r;
      do {
        r = static_cast<int32_t>(rng.UniformInt(vocab.size()));
      } while (vocab.IsSpecial(r));
      out.tokens[pos] = r;
    }
  }
  return out;
}

std::vector<std::vector<int32_t>> MakeSequences(
    const std::vector<std::vector<int32_t>>& lines, int64_t length, bool pack,
    const WordPieceVocab& vocab) {
  const int64_t room = length - 2;  // [CLS] and the last [SEP]
  std::vector<std::vector<int32_t>> out;
  std::vector<int32_t> current;
  auto flush = [&] {
    if (current.size() > 1) out.push_back(std::move(current));
    current.clear();
  };
  for (const std::vector<int32_t>& line : lines) {
    if (line.empty()) continue;
    for (size_t begin = 0; begin < line.size(); begin += room) {
      const size_t end = std::min(line.size(), begin + room);
      const int64_t piece = static_cast<int64_t>(end - begin);
      if (!pack || current.empty() ||
          static_cast<int64_t>(current.size()) + piece + 1 > length) {
        flush();
        current.push_back(vocab.cls());
      }
      current.insert(current.end(), line.begin() + begin, line.begin() + end);
      current.push_back(vocab.sep());
    }
    if (!pack) flush();
  }
  flush();
  return out;
}

absl::StatusOr<std::shared_ptr<const WordPieceVocab>> LoadOrLearnVocab(
    const TextConfig& spec) {
  if (!spec.vocab_path.empty()) {
    absl::StatusOr<WordPieceVocab> v = WordPieceVocab::Load(spec.vocab_path);
    if (!v.ok()) return AnnotateStatus(v.status(), "data.vocab");
    return std::make_shared<const WordPieceVocab>(*std::move(v));
  }
  ASSIGN_OR_RETURN(
      std::vector<std::string> lines,
      ReadAll("data.train_path", spec.train_files, spec.min_line_chars));
  std::unordered_map<std::string, int64_t> counts;
  for (const std::string& line : lines) {
    for (std::string& w : BasicTokenize(line, spec.lowercase)) ++counts[w];
  }
  absl::StatusOr<WordPieceVocab> v =
      LearnWordPieceVocab(counts, spec.vocab_size);
  if (!v.ok()) return v.status();
  return std::make_shared<const WordPieceVocab>(*std::move(v));
}

absl::StatusOr<Dataset> LoadTextDataset(const TextConfig& spec, Split split,
                                        const DataOptions& options) {
  ASSIGN_OR_RETURN(std::vector<Field> fields,
                   ParseFields(options.fields, spec.causal));
  Shape shape;
  int64_t per = 0;
  for (Field f : fields) {
    const int64_t size = f == Field::kMaskPositions ? spec.max_predictions
                                                    : spec.sequence_length;
    per += size;
    shape = {size};
  }
  if (fields.size() != 1) shape = {per};
  std::shared_ptr<const WordPieceVocab> vocab = options.vocab;
  auto restored = options.restored.find(kVocabArtifact);
  if (vocab == nullptr && restored != options.restored.end()) {
    // A checkpoint's vocabulary tokenizes as the run that wrote it did.
    ASSIGN_OR_RETURN(
        WordPieceVocab v,
        WordPieceVocab::FromText(
            restored->second, JoinPath(options.restored_from, kVocabArtifact)));
    vocab = std::make_shared<const WordPieceVocab>(std::move(v));
  }
  if (vocab == nullptr) {
    ASSIGN_OR_RETURN(vocab, LoadOrLearnVocab(spec));
  }
  const bool train = split == Split::kTrain;
  const char* field = train ? "data.train_path" : "data.test_path";
  const std::vector<std::string>& files =
      train ? spec.train_files : spec.test_files;
  ASSIGN_OR_RETURN(std::vector<std::string> lines,
                   ReadAll(field, files, spec.min_line_chars));
  WordPieceTokenizer tokenizer(vocab.get(), spec.lowercase);
  std::vector<std::vector<int32_t>> ids;
  ids.reserve(lines.size());
  for (const std::string& line : lines) ids.push_back(tokenizer.Encode(line));
  std::vector<std::vector<int32_t>> sequences =
      MakeSequences(ids, spec.sequence_length, spec.pack_lines, *vocab);
  if (sequences.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": no line of ", absl::StrJoin(files, ", "),
                     " has a token the tokenizer keeps"));
  }
  MlmMasking masking;
  masking.rate = spec.mask_rate;
  masking.max_predictions = spec.max_predictions;
  masking.mask_token_rate = spec.mask_token_rate;
  masking.random_token_rate = spec.random_token_rate;
  Dataset d;
  d.sample_shape = shape;
  d.num_samples = static_cast<int64_t>(sequences.size());
  d.num_classes = vocab->size();
  d.labels_per_sample =
      spec.causal ? spec.sequence_length : spec.max_predictions;
  d.vocab = vocab;
  d.source = absl::StrCat(absl::StrJoin(files, ", "), " (", sequences.size(),
                          " sequences of up to ", spec.sequence_length,
                          " tokens, vocabulary ", vocab->size(), ")");
  if (spec.causal) {
    d.maker = std::make_shared<CausalSampleMaker>(
        std::move(sequences), spec.sequence_length, vocab->pad(),
        std::move(fields));
    return d;
  }
  d.maker = std::make_shared<MlmSampleMaker>(vocab, std::move(sequences),
                                             spec.sequence_length, masking,
                                             options.seed, std::move(fields));
  return d;
}

absl::StatusOr<MlmQuery> MakeMlmQuery(const TextConfig& spec,
                                      const std::vector<std::string>& fields,
                                      const WordPieceVocab& vocab,
                                      absl::string_view text) {
  ASSIGN_OR_RETURN(std::vector<Field> parsed, ParseFields(fields, false));
  WordPieceTokenizer tokenizer(&vocab, spec.lowercase);
  MlmQuery q;
  q.tokens.push_back(vocab.cls());
  for (int32_t id : tokenizer.Encode(text)) q.tokens.push_back(id);
  q.tokens.push_back(vocab.sep());
  for (size_t i = 0; i < q.tokens.size(); ++i) {
    if (q.tokens[i] == vocab.mask())
      q.positions.push_back(static_cast<int32_t>(i));
  }
  const int64_t n = static_cast<int64_t>(q.tokens.size());
  const int64_t masks = static_cast<int64_t>(q.positions.size());
  if (masks == 0) {
    return absl::InvalidArgumentError(
        "the text has no [MASK] to fill (write [MASK] where a word is to be "
        "predicted)");
  }
  if (masks > spec.max_predictions) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the text has ", masks, " [MASK]s; the model predicts at most ",
        spec.max_predictions, " per sequence (data.max_predictions)"));
  }
  if (n > spec.sequence_length) {
    return absl::InvalidArgumentError(
        absl::StrCat("the text is ", n,
                     " tokens with [CLS] and [SEP]; the model reads at "
                     "most ",
                     spec.sequence_length, " (data.sequence_length)"));
  }
  int64_t per = 0;
  for (Field f : parsed) {
    per += f == Field::kMaskPositions ? spec.max_predictions
                                      : spec.sequence_length;
  }
  q.inputs.resize(per);
  MaskedSequence m;
  m.tokens = q.tokens;
  m.positions = q.positions;
  WriteInputs(parsed, m, spec.sequence_length, spec.max_predictions,
              vocab.pad(), q.inputs.data());
  return q;
}

}  // namespace lockstep
