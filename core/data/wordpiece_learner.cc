// The BPE-style WordPiece vocabulary learner (see wordpiece.h).
#include <algorithm>
#include <map>
#include <queue>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "core/data/wordpiece.h"

namespace lockstep {

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
    const std::vector<size_t> starts = Utf8CodePointStarts(word);
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
  std::vector<std::string> tokens(kWordPieceSpecials.begin(), kWordPieceSpecials.end());
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
