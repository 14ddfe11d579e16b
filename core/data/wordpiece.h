// BERT's uncased WordPiece tokenizer: the basic tokenizer (control
// characters removed, whitespace split, lower-casing and accent stripping by
// NFD, punctuation and CJK characters split off), then greedy
// longest-match-first word pieces with "##" continuations and [UNK] for a
// word that cannot be covered. Reads a standard vocab.txt (one token per
// line, the line number is the id) or learns a vocabulary from text (BPE
// merges with "##" continuations, as Hugging Face's WordPiece trainer and
// keras_nlp's compute_word_piece_vocabulary build theirs). Unicode data
// (categories, case, decomposition) comes from utf8proc.
#ifndef LOCKSTEP_CORE_DATA_WORDPIECE_H_
#define LOCKSTEP_CORE_DATA_WORDPIECE_H_

#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace lockstep {

// The special tokens every vocabulary learned here starts with, in order.
inline constexpr std::array<const char*, 5> kWordPieceSpecials = {
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};

// Byte offsets of each code point of valid UTF-8 `s`, plus s.size().
std::vector<size_t> Utf8CodePointStarts(const std::string& s);

// An immutable vocabulary. Thread-safe to read.
class WordPieceVocab {
 public:
  // One token per line ("\n" or "\r\n"; the last line's newline optional);
  // `source` names the text in errors. kInvalidArgument when it is empty,
  // holds an empty line or a token twice (naming the line), or lacks one of
  // [PAD] [UNK] [CLS] [SEP] [MASK] (naming it).
  static absl::StatusOr<WordPieceVocab> FromText(absl::string_view text,
                                                 const std::string& source);
  // Reads and parses a file; kNotFound when it cannot be opened.
  static absl::StatusOr<WordPieceVocab> Load(const std::string& path);
  // The vocab.txt text: tokens in id order, one per line.
  std::string ToText() const;

  int32_t size() const { return static_cast<int32_t>(tokens_.size()); }
  const std::string& token(int32_t id) const { return tokens_[id]; }
  // -1 when absent.
  int32_t Id(absl::string_view token) const;
  int32_t pad() const { return pad_; }
  int32_t unk() const { return unk_; }
  int32_t cls() const { return cls_; }
  int32_t sep() const { return sep_; }
  int32_t mask() const { return mask_; }
  // One of the five above (never masked, never drawn as a random token).
  bool IsSpecial(int32_t id) const {
    return id == pad_ || id == unk_ || id == cls_ || id == sep_ || id == mask_;
  }

 private:
  std::vector<std::string> tokens_;
  std::unordered_map<std::string, int32_t> ids_;
  int32_t pad_ = -1, unk_ = -1, cls_ = -1, sep_ = -1, mask_ = -1;
};

// BERT's BasicTokenizer: the words and punctuation marks of `text`
// (invalid UTF-8 bytes dropped). With `lowercase`, lower-cased and with
// accents stripped (NFD, then nonspacing marks removed).
std::vector<std::string> BasicTokenize(absl::string_view text, bool lowercase);

class WordPieceTokenizer {
 public:
  WordPieceTokenizer(const WordPieceVocab* vocab, bool lowercase)
      : vocab_(vocab), lowercase_(lowercase) {}

  // The ids of `text`'s word pieces (no [CLS]/[SEP]). The special tokens
  // written literally ("[MASK]") become their ids. Not thread-safe (a
  // cache of words already split).
  std::vector<int32_t> Encode(absl::string_view text);
  // One basic token's pieces: greedy longest match, "##" after the first;
  // [UNK] for the whole word when a piece is missing or the word is over
  // 100 characters.
  void EncodeWord(const std::string& word, std::vector<int32_t>* out) const;
  // Ids back to text: pieces joined, "##" continuations glued on.
  std::string Decode(const std::vector<int32_t>& ids) const;

 private:
  const WordPieceVocab* vocab_;
  const bool lowercase_;
  std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

// Learns a vocabulary of exactly `size` tokens from word counts (basic
// tokens, as BasicTokenize gives them): [PAD] [UNK] [CLS] [SEP] [MASK], every
// character seen (word-initial and "##" forms), then the merged pieces in
// the order BPE merges them (the most frequent adjacent pair first; ties by
// the pair's text, so the result is the same on every machine). Pairs seen
// fewer than twice are not merged; a corpus too small to fill `size` gets
// [unused0], [unused1], ... at the end. kInvalidArgument when `size` cannot
// even hold the special tokens and the characters.
absl::StatusOr<WordPieceVocab> LearnWordPieceVocab(
    const std::unordered_map<std::string, int64_t>& word_counts, int64_t size);

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_DATA_WORDPIECE_H_
