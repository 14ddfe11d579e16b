// BERT's basic tokenizer over utf8proc and greedy WordPiece (the vocabulary
// learner is wordpiece_learner.cc).
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

}  // namespace

std::vector<size_t> Utf8CodePointStarts(const std::string& s) {
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
    // Text is split at whitespace before WordPiece: such a token could
    // never be produced, and it would not survive being written back.
    const size_t blank = line.find_first_of(" \t\r\v\f");
    if (blank != absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          source, ": line ", line_no, " holds whitespace (byte ", blank + 1,
          "): a token never does"));
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
    *slots[i] = v.Id(kWordPieceSpecials[i]);
    if (*slots[i] < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          source, ": the vocabulary has no ", kWordPieceSpecials[i],
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
  const std::vector<size_t> starts = Utf8CodePointStarts(word);
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
    for (const char* special : kWordPieceSpecials) {
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

}  // namespace lockstep
