// BERT's basic tokenizer over utf8proc, greedy WordPiece, and the BPE-style
// vocabulary learner.
#include "core/data/wordpiece.h"

#include <utf8proc.h>

#include <algorithm>
#include <map>
#include <queue>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/file_util.h"
#include "base/status_macros.h"

namespace lockstep {
namespace {

const char* const kSpecials[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
constexpr int kMaxWordChars = 100;  // BERT's max_input_chars_per_word

bool IsWhitespace(int32_t cp) {
  if (cp == ' ' || cp == '\t' || cp == '\n' || cp == '\r') return true;
  return utf8proc_category(cp) == UTF8PROC_CATEGORY_ZS;
}

// BERT: any "C*" category (control, format, surrogate, private use,
// unassigned) except the whitespace controls.
bool IsControl(int32_t cp) {
  if (cp == '\t' || cp == '\n' || cp == '\r') return false;
  switch (utf8proc_category(cp)) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN:
      return true;
    default:
      return false;
  }
}

// BERT: the ASCII non-alphanumerics count even where Unicode calls them
// symbols ("$", "^", "`"); otherwise any "P*" category.
bool IsPunctuation(int32_t cp) {
  if ((cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) ||
      (cp >= 91 && cp <= 96) || (cp >= 123 && cp <= 126)) {
    return true;
  }
  const utf8proc_category_t c = utf8proc_category(cp);
  return c >= UTF8PROC_CATEGORY_PC && c <= UTF8PROC_CATEGORY_PO;
}

// The CJK Unified Ideographs blocks BERT splits character by character.
bool IsCjk(int32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
         (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
         (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B820 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

void AppendUtf8(int32_t cp, std::string* out) {
  utf8proc_uint8_t buf[4];
  const utf8proc_ssize_t n = utf8proc_encode_char(cp, buf);
  out->append(reinterpret_cast<const char*>(buf), n);
}

// Byte offsets of each code point of valid UTF-8 `s`, plus s.size().
std::vector<size_t> CodePointStarts(const std::string& s) {
  std::vector<size_t> starts;
  size_t i = 0;
  while (i < s.size()) {
    starts.push_back(i);
    utf8proc_int32_t cp;
    const utf8proc_ssize_t n = utf8proc_iterate(
        reinterpret_cast<const utf8proc_uint8_t*>(s.data()) + i,
        static_cast<utf8proc_ssize_t>(s.size() - i), &cp);
    i += n > 0 ? static_cast<size_t>(n) : 1;
  }
  starts.push_back(s.size());
  return starts;
}

}  // namespace

absl::StatusOr<WordPieceVocab> WordPieceVocab::FromText(
    absl::string_view text, const std::string& source) {
  WordPieceVocab v;
  size_t line_no = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == absl::string_view::npos) end = text.size();
    absl::string_view line = text.substr(pos, end - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    ++line_no;
    pos = end + 1;
    if (line.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": line ", line_no, " is empty"));
    }
    const int32_t id = static_cast<int32_t>(v.tokens_.size());
    auto [it, fresh] = v.ids_.emplace(std::string(line), id);
    if (!fresh) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": line ", line_no, " repeats the token \"",
                       line, "\" of line ", it->second + 1));
    }
    v.tokens_.emplace_back(line);
  }
  if (v.tokens_.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": the vocabulary is empty"));
  }
  int32_t* slots[] = {&v.pad_, &v.unk_, &v.cls_, &v.sep_, &v.mask_};
  for (int i = 0; i < 5; ++i) {
    *slots[i] = v.Id(kSpecials[i]);
    if (*slots[i] < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          source, ": the vocabulary has no ", kSpecials[i],
          " token (a BERT vocabulary needs [PAD] [UNK] [CLS] [SEP] [MASK])"));
    }
  }
  return v;
}

absl::StatusOr<WordPieceVocab> WordPieceVocab::Load(const std::string& path) {
  auto missing = [&path](int err) {
    return absl::NotFoundError(
        absl::StrCat("cannot read vocabulary \"", path, "\": ", strerror(err)));
  };
  auto failed = [&path](int err) {
    return absl::DataLossError(
        absl::StrCat("reading vocabulary \"", path, "\": ", strerror(err)));
  };
  ASSIGN_OR_RETURN(std::string text, ReadFile(path, missing, failed));
  return FromText(text, path);
}

std::string WordPieceVocab::ToText() const {
  std::string out;
  for (const std::string& t : tokens_) absl::StrAppend(&out, t, "\n");
  return out;
}

int32_t WordPieceVocab::Id(absl::string_view token) const {
  auto it = ids_.find(std::string(token));
  return it == ids_.end() ? -1 : it->second;
}

std::vector<std::string> BasicTokenize(absl::string_view text, bool lowercase) {
  std::vector<std::string> out;
  std::string word;
  auto flush = [&] {
    if (!word.empty()) out.push_back(std::move(word));
    word.clear();
  };
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(text.data());
  utf8proc_ssize_t left = static_cast<utf8proc_ssize_t>(text.size());
  utf8proc_int32_t decomposed[8];
  while (left > 0) {
    utf8proc_int32_t cp;
    const utf8proc_ssize_t n = utf8proc_iterate(p, left, &cp);
    if (n <= 0) {  // an invalid byte: dropped, as BERT drops U+FFFD
      ++p;
      --left;
      continue;
    }
    p += n;
    left -= n;
    if (cp == 0 || cp == 0xFFFD || IsControl(cp)) continue;
    if (IsWhitespace(cp)) {
      flush();
      continue;
    }
    if (IsCjk(cp) || IsPunctuation(cp)) {
      flush();
      AppendUtf8(cp, &word);
      flush();
      continue;
    }
    if (!lowercase) {
      AppendUtf8(cp, &word);
      continue;
    }
    // Lower case, then NFD with the nonspacing marks (accents) dropped.
    const utf8proc_ssize_t k = utf8proc_decompose_char(
        utf8proc_tolower(cp), decomposed, 8, UTF8PROC_DECOMPOSE, nullptr);
    if (k <= 0 || k > 8) {
      AppendUtf8(utf8proc_tolower(cp), &word);
      continue;
    }
    for (utf8proc_ssize_t i = 0; i < k; ++i) {
      if (utf8proc_category(decomposed[i]) == UTF8PROC_CATEGORY_MN) continue;
      // A mark that NFD split off may itself be punctuation-free text.
      AppendUtf8(decomposed[i], &word);
    }
  }
  flush();
  return out;
}

void WordPieceTokenizer::EncodeWord(const std::string& word,
                                    std::vector<int32_t>* out) const {
  const std::vector<size_t> starts = CodePointStarts(word);
  const int chars = static_cast<int>(starts.size()) - 1;
  if (chars > kMaxWordChars) {
    out->push_back(vocab_->unk());
    return;
  }
  std::vector<int32_t> pieces;
  int start = 0;
  std::string piece;
  while (start < chars) {
    int end = chars;
    int32_t found = -1;
    while (start < end) {
      piece.assign(start > 0 ? "##" : "");
      piece.append(word, starts[start], starts[end] - starts[start]);
      found = vocab_->Id(piece);
      if (found >= 0) break;
      --end;
    }
    if (found < 0) {
      out->push_back(vocab_->unk());
      return;
    }
    pieces.push_back(found);
    start = end;
  }
  out->insert(out->end(), pieces.begin(), pieces.end());
}

std::vector<int32_t> WordPieceTokenizer::Encode(absl::string_view text) {
  std::vector<int32_t> out;
  auto encode_plain = [&](absl::string_view part) {
    for (const std::string& w : BasicTokenize(part, lowercase_)) {
      auto it = cache_.find(w);
      if (it == cache_.end()) {
        std::vector<int32_t> ids;
        EncodeWord(w, &ids);
        it = cache_.emplace(w, std::move(ids)).first;
      }
      out.insert(out.end(), it->second.begin(), it->second.end());
    }
  };
  size_t pos = 0, plain = 0;
  while ((pos = text.find('[', pos)) != absl::string_view::npos) {
    bool matched = false;
    for (const char* special : kSpecials) {
      const absl::string_view s(special);
      if (text.substr(pos, s.size()) == s) {
        encode_plain(text.substr(plain, pos - plain));
        out.push_back(vocab_->Id(s));
        pos += s.size();
        plain = pos;
        matched = true;
        break;
      }
    }
    if (!matched) ++pos;
  }
  encode_plain(text.substr(plain));
  return out;
}

std::string WordPieceTokenizer::Decode(const std::vector<int32_t>& ids) const {
  std::string out;
  for (int32_t id : ids) {
    if (id < 0 || id >= vocab_->size()) continue;
    const std::string& t = vocab_->token(id);
    if (t.size() > 2 && t[0] == '#' && t[1] == '#') {
      out.append(t, 2, std::string::npos);
    } else {
      if (!out.empty()) out.push_back(' ');
      out.append(t);
    }
  }
  return out;
}

namespace {

// BPE over the words' symbol sequences, with lazy priority-queue entries
// (an entry whose count is out of date is skipped when popped).
class VocabLearner {
 public:
  int Symbol(const std::string& text) {
    auto [it, fresh] = ids_.emplace(text, static_cast<int>(texts_.size()));
    if (fresh) texts_.push_back(text);
    return it->second;
  }

  void AddWord(const std::string& word, int64_t count) {
    const std::vector<size_t> starts = CodePointStarts(word);
    std::vector<int> symbols;
    for (size_t i = 0; i + 1 < starts.size(); ++i) {
      std::string s = i == 0 ? "" : "##";
      s.append(word, starts[i], starts[i + 1] - starts[i]);
      symbols.push_back(Symbol(s));
    }
    if (symbols.empty()) return;
    words_.push_back(std::move(symbols));
    counts_.push_back(count);
  }

  // The initial alphabet, sorted (deterministic ids for the vocabulary).
  std::vector<std::string> Alphabet() const {
    std::set<std::string> a(texts_.begin(), texts_.end());
    return std::vector<std::string>(a.begin(), a.end());
  }

  // Merges until `wanted` new pieces exist or no pair occurs twice; returns
  // the merged pieces in merge order.
  std::vector<std::string> Merge(int64_t wanted,
                                 const std::set<std::string>& known) {
    for (size_t w = 0; w < words_.size(); ++w) AddPairs(w, +1);
    for (const auto& [key, c] : pair_counts_) Push(key);
    std::vector<std::string> merged;
    std::set<std::string> seen = known;
    while (static_cast<int64_t>(merged.size()) < wanted && !heap_.empty()) {
      const Entry top = heap_.top();
      heap_.pop();
      auto it = pair_counts_.find(top.key);
      if (it == pair_counts_.end() || it->second != top.count) continue;
      if (top.count < 2) break;
      const int a = static_cast<int>(top.key >> 32);
      const int b = static_cast<int>(top.key & 0xffffffffu);
      const std::string& tb = texts_[b];
      std::string text =
          texts_[a] + (tb.rfind("##", 0) == 0 ? tb.substr(2) : tb);
      const int joined = Symbol(text);
      if (seen.insert(text).second) merged.push_back(text);
      std::vector<int> words = where_[top.key];
      std::sort(words.begin(), words.end());
      words.erase(std::unique(words.begin(), words.end()), words.end());
      for (int w : words) {
        std::vector<int>& s = words_[w];
        bool has = false;
        for (size_t i = 0; i + 1 < s.size(); ++i) {
          has = has || (s[i] == a && s[i + 1] == b);
        }
        if (!has) continue;
        AddPairs(w, -1);
        std::vector<int> next;
        for (size_t i = 0; i < s.size(); ++i) {
          if (i + 1 < s.size() && s[i] == a && s[i + 1] == b) {
            next.push_back(joined);
            ++i;
          } else {
            next.push_back(s[i]);
          }
        }
        s = std::move(next);
        AddPairs(w, +1);
      }
      for (uint64_t key : touched_) Push(key);
      touched_.clear();
    }
    return merged;
  }

 private:
  struct Entry {
    int64_t count;
    uint64_t key;
  };

  void AddPairs(size_t w, int sign) {
    const std::vector<int>& s = words_[w];
    for (size_t i = 0; i + 1 < s.size(); ++i) {
      const uint64_t key =
          (static_cast<uint64_t>(s[i]) << 32) | static_cast<uint32_t>(s[i + 1]);
      int64_t& c = pair_counts_[key];
      c += sign * counts_[w];
      if (sign > 0) where_[key].push_back(static_cast<int>(w));
      touched_.push_back(key);
    }
  }

  void Push(uint64_t key) {
    auto it = pair_counts_.find(key);
    if (it != pair_counts_.end() && it->second > 0) {
      heap_.push(Entry{it->second, key});
    }
  }

  // Higher counts first; ties by the pair's text, smaller first.
  struct Less {
    const VocabLearner* l;
    bool operator()(const Entry& x, const Entry& y) const {
      if (x.count != y.count) return x.count < y.count;
      return l->PairText(x.key) > l->PairText(y.key);
    }
  };
  std::pair<const std::string&, const std::string&> PairText(
      uint64_t key) const {
    return {texts_[key >> 32], texts_[key & 0xffffffffu]};
  }

  std::map<std::string, int> ids_;
  std::vector<std::string> texts_;
  std::vector<std::vector<int>> words_;
  std::vector<int64_t> counts_;
  std::unordered_map<uint64_t, int64_t> pair_counts_;
  std::unordered_map<uint64_t, std::vector<int>> where_;
  std::vector<uint64_t> touched_;
  std::priority_queue<Entry, std::vector<Entry>, Less> heap_{Less{this}};
};

}  // namespace

absl::StatusOr<WordPieceVocab> LearnWordPieceVocab(
    const std::unordered_map<std::string, int64_t>& word_counts, int64_t size) {
  // Sorted words: the same symbol ids, hence the same result, everywhere.
  std::vector<std::pair<std::string, int64_t>> words(word_counts.begin(),
                                                     word_counts.end());
  std::sort(words.begin(), words.end());
  VocabLearner learner;
  for (const auto& [w, c] : words) learner.AddWord(w, c);
  std::vector<std::string> tokens(std::begin(kSpecials), std::end(kSpecials));
  std::set<std::string> known(tokens.begin(), tokens.end());
  for (const std::string& a : learner.Alphabet()) {
    if (known.insert(a).second) tokens.push_back(a);
  }
  if (static_cast<int64_t>(tokens.size()) > size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "data.vocab_size: ", size, " cannot hold the 5 special tokens and the ",
        tokens.size() - 5, " characters of the training text; use at least ",
        tokens.size()));
  }
  for (std::string& piece :
       learner.Merge(size - static_cast<int64_t>(tokens.size()), known)) {
    tokens.push_back(std::move(piece));
  }
  for (int64_t i = 0; static_cast<int64_t>(tokens.size()) < size; ++i) {
    tokens.push_back(absl::StrCat("[unused", i, "]"));
  }
  std::string text;
  for (const std::string& t : tokens) absl::StrAppend(&text, t, "\n");
  return WordPieceVocab::FromText(text, "the learned vocabulary");
}

}  // namespace lockstep
