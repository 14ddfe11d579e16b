// The WordPiece tokenizer on known cases (BERT's own examples: accents,
// punctuation, CJK, unknown words, ## pieces), vocab.txt errors, and
// vocabulary learning on a small text.
#include "core/data/wordpiece.h"

#include <string>
#include <unordered_map>
#include <vector>

#include "gtest/gtest.h"

namespace lockstep {
namespace {

using Strings = std::vector<std::string>;

WordPieceVocab Vocab(const Strings& extra) {
  std::string text = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n";
  for (const std::string& t : extra) text += t + "\n";
  absl::StatusOr<WordPieceVocab> v = WordPieceVocab::FromText(text, "test");
  EXPECT_TRUE(v.ok()) << v.status();
  return *v;
}

TEST(BasicTokenizeTest, BertsExamples) {
  // From BERT's tokenization_test.py.
  EXPECT_EQ(BasicTokenize(" \tHeLLo!how  \n Are yoU?  ", true),
            (Strings{"hello", "!", "how", "are", "you", "?"}));
  EXPECT_EQ(BasicTokenize("H\xc3\xa9llo", true), (Strings{"hello"}));
  EXPECT_EQ(BasicTokenize(" \tHeLLo!how  \n Are yoU?  ", false),
            (Strings{"HeLLo", "!", "how", "Are", "yoU", "?"}));
  // Chinese characters are split one by one.
  EXPECT_EQ(BasicTokenize("ah\xe5\x8d\x9a\xe6\x8e\xa8zz", true),
            (Strings{"ah", "\xe5\x8d\x9a", "\xe6\x8e\xa8", "zz"}));
  // Accents stripped by NFD: "Ångström café naïve".
  EXPECT_EQ(
      BasicTokenize("\xc3\x85ngstr\xc3\xb6m caf\xc3\xa9 na\xc3\xafve", true),
      (Strings{"angstrom", "cafe", "naive"}));
  // ASCII symbols count as punctuation; control characters go; invalid
  // UTF-8 bytes are dropped.
  EXPECT_EQ(BasicTokenize("a$b^c`d\x01 e\xff", true),
            (Strings{"a", "$", "b", "^", "c", "`", "d", "e"}));
  EXPECT_EQ(BasicTokenize("co-operate, don't", true),
            (Strings{"co", "-", "operate", ",", "don", "'", "t"}));
  EXPECT_TRUE(BasicTokenize("  \n\t ", true).empty());
}

TEST(WordPieceTest, GreedyLongestMatchFirst) {
  // BERT's tokenization_test.py vocabulary and cases.
  WordPieceVocab v = Vocab({"want", "##want", "##ed", "wa", "un", "runn",
                            "##ing", ",", "low", "lowest"});
  WordPieceTokenizer t(&v, true);
  auto pieces = [&](const std::string& text) {
    Strings out;
    for (int32_t id : t.Encode(text)) out.push_back(v.token(id));
    return out;
  };
  EXPECT_EQ(pieces("unwanted running"),
            (Strings{"un", "##want", "##ed", "runn", "##ing"}));
  EXPECT_EQ(pieces("unwantedX running"), (Strings{"[UNK]", "runn", "##ing"}));
  EXPECT_EQ(pieces("UNwant\xc3\xa9"
                   "d,running"),
            (Strings{"un", "##want", "##ed", ",", "runn", "##ing"}));
  EXPECT_TRUE(pieces("").empty());
  // Special tokens written in the text stay whole.
  EXPECT_EQ(pieces("want [MASK] lowest[SEP]"),
            (Strings{"want", "[MASK]", "lowest", "[SEP]"}));
  // A word over 100 characters is [UNK].
  EXPECT_EQ(pieces(std::string(101, 'a')), (Strings{"[UNK]"}));
  EXPECT_EQ(t.Decode(t.Encode("unwanted running")), "unwanted running");
}

TEST(WordPieceVocabTest, ErrorsNameTheFileAndLine) {
  auto error = [](const std::string& text) {
    absl::StatusOr<WordPieceVocab> v = WordPieceVocab::FromText(text, "v.txt");
    EXPECT_FALSE(v.ok());
    return std::string(v.status().message());
  };
  EXPECT_EQ(error(""), "v.txt: the vocabulary is empty");
  EXPECT_EQ(error("[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\n"),
            "v.txt: the vocabulary has no [MASK] token (a BERT vocabulary "
            "needs [PAD] [UNK] [CLS] [SEP] [MASK])");
  EXPECT_EQ(error("[PAD]\n\n[UNK]\n"), "v.txt: line 2 is empty");
  EXPECT_EQ(error("[PAD]\n[UNK]\na\n[PAD]\n"),
            "v.txt: line 4 repeats the token \"[PAD]\" of line 1");
  EXPECT_EQ(error("[PAD]\r\r\n[UNK]\n"),
            "v.txt: line 1 holds whitespace (byte 6): a token never does");
  EXPECT_EQ(error("[PAD]\nnew york\n"),
            "v.txt: line 2 holds whitespace (byte 4): a token never does");
  absl::StatusOr<WordPieceVocab> crlf = WordPieceVocab::FromText(
      "[UNK]\r\n[PAD]\r\n[CLS]\r\n[SEP]\r\n[MASK]\r\nx", "crlf");
  ASSERT_TRUE(crlf.ok()) << crlf.status();
  EXPECT_EQ(crlf->size(), 6);
  EXPECT_EQ(crlf->pad(), 1);
  EXPECT_EQ(crlf->Id("x"), 5);
  EXPECT_EQ(WordPieceVocab::Load("/nonexistent/vocab.txt").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(LearnVocabTest, MergesTheFrequentPairsDeterministically) {
  std::unordered_map<std::string, int64_t> counts = {
      {"low", 5}, {"lower", 2}, {"newest", 6}, {"widest", 3}};
  absl::StatusOr<WordPieceVocab> v = LearnWordPieceVocab(counts, 40);
  ASSERT_TRUE(v.ok()) << v.status();
  ASSERT_EQ(v->size(), 40);
  EXPECT_EQ(v->token(0), "[PAD]");
  EXPECT_EQ(v->token(4), "[MASK]");
  // The characters (word-initial and ## forms), sorted.
  EXPECT_EQ(v->token(5), "##d");
  EXPECT_GE(v->Id("l"), 5);
  EXPECT_GE(v->Id("##w"), 5);
  // "##e"+"##s" (9 times) and then "##es"+"##t" merge first.
  const int32_t es = v->Id("##es"), est = v->Id("##est");
  ASSERT_GE(es, 0);
  ASSERT_GE(est, 0);
  EXPECT_LT(es, est);
  EXPECT_GE(v->Id("low"), 0);
  EXPECT_GE(v->Id("newest"), 0);
  // The corpus runs out of pairs seen twice: [unused] fills the rest.
  EXPECT_EQ(v->token(39).rfind("[unused", 0), 0u);
  // The same counts in another insertion order: the same vocabulary.
  std::unordered_map<std::string, int64_t> again;
  for (const char* w : {"widest", "newest", "lower", "low"}) {
    again[w] = counts[w];
  }
  EXPECT_EQ(LearnWordPieceVocab(again, 40)->ToText(), v->ToText());
  // Tokenizing with it: whole frequent words, pieces for the rest.
  WordPieceTokenizer t(&*v, true);
  EXPECT_EQ(t.Decode(t.Encode("Newest lowest")), "newest lowest");
  EXPECT_EQ(v->token(t.Encode("newest")[0]), "newest");
  EXPECT_EQ(std::string(LearnWordPieceVocab(counts, 8).status().message()),
            "data.vocab_size: 8 cannot hold the 5 special tokens and the 11 "
            "characters of the training text; use at least 16");
}

}  // namespace
}  // namespace lockstep
