// Masked-LM data: how many tokens a sequence predicts, BERT's 80/10/10
// masking as a pure function of its seed, line packing, a text dataset's
// samples from real files (layout, determinism per (epoch, sample)), and the
// errors bad files give.
#include "core/data/text_dataset.h"

#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/data/dataset.h"
#include "core/data/wordpiece.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

using ::testing::HasSubstr;

WordPieceVocab SmallVocab() {
  std::string text = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n";
  for (const char* w : {"the", "cat", "sat", "on", "mat", "a", "dog", "ran",
                        "and", "##s", ".", "big", "red", "hat", "in", "sun"}) {
    text += std::string(w) + "\n";
  }
  absl::StatusOr<WordPieceVocab> v = WordPieceVocab::FromText(text, "test");
  EXPECT_TRUE(v.ok()) << v.status();
  return *v;
}

TEST(TextDatasetTest, PredictionCount) {
  MlmMasking m;  // 0.15, at most 20
  EXPECT_EQ(PredictionCount(0, m), 0);
  EXPECT_EQ(PredictionCount(1, m), 1);  // at least one
  EXPECT_EQ(PredictionCount(20, m), 3);
  EXPECT_EQ(PredictionCount(126, m), 19);
  EXPECT_EQ(PredictionCount(1000, m), 20);  // capped
}

TEST(TextDatasetTest, MaskingIsAPureFunctionOfTheSeed) {
  const WordPieceVocab v = SmallVocab();
  std::vector<int32_t> tokens = {v.cls()};
  for (int i = 0; i < 40; ++i) tokens.push_back(5 + i % 16);
  tokens.push_back(v.sep());
  tokens.push_back(v.pad());
  MlmMasking m;
  const MaskedSequence a = MaskSequence(tokens, v, m, 1234);
  const MaskedSequence b = MaskSequence(tokens, v, m, 1234);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.positions, b.positions);
  EXPECT_EQ(a.labels, b.labels);
  EXPECT_EQ(a.positions.size(), 6u);  // round(40 * 0.15)
  EXPECT_TRUE(std::is_sorted(a.positions.begin(), a.positions.end()));
  for (size_t k = 0; k < a.positions.size(); ++k) {
    const int32_t p = a.positions[k];
    EXPECT_GT(p, 0);
    EXPECT_LT(p, 41);  // never [CLS], [SEP] or [PAD]
    EXPECT_EQ(a.labels[k], tokens[p]);
  }
  // Only predicted positions change.
  std::set<int32_t> predicted(a.positions.begin(), a.positions.end());
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (!predicted.count(static_cast<int32_t>(i))) {
      EXPECT_EQ(a.tokens[i], tokens[i]) << i;
    }
  }
  EXPECT_NE(MaskSequence(tokens, v, m, 1235).positions, a.positions);
}

TEST(TextDatasetTest, MaskingIsEightyTenTen) {
  const WordPieceVocab v = SmallVocab();
  std::vector<int32_t> tokens = {v.cls()};
  for (int i = 0; i < 100; ++i) tokens.push_back(5 + i % 16);
  tokens.push_back(v.sep());
  MlmMasking m;
  int masked = 0, random = 0, kept = 0;
  for (uint64_t seed = 0; seed < 2000; ++seed) {
    const MaskedSequence s = MaskSequence(tokens, v, m, seed);
    for (size_t k = 0; k < s.positions.size(); ++k) {
      const int32_t now = s.tokens[s.positions[k]];
      if (now == v.mask()) {
        ++masked;
      } else if (now == s.labels[k]) {
        ++kept;  // includes a random draw of the same token (1 in 16)
      } else {
        ++random;
        EXPECT_FALSE(v.IsSpecial(now));
      }
    }
  }
  const double n = masked + random + kept;
  EXPECT_EQ(n, 2000 * 15);
  EXPECT_NEAR(masked / n, 0.8, 0.01);
  EXPECT_NEAR(random / n, 0.1 * 15 / 16, 0.01);
  EXPECT_NEAR(kept / n, 0.1 + 0.1 / 16, 0.01);
}

TEST(TextDatasetTest, PackingAndCutting) {
  const WordPieceVocab v = SmallVocab();
  const int32_t c = v.cls(), s = v.sep();
  // Packed: lines share sequences of 8, each line ending in [SEP].
  std::vector<std::vector<int32_t>> seqs =
      MakeSequences({{5, 6}, {7, 8, 9}, {10}}, 8, true, v);
  ASSERT_EQ(seqs.size(), 2u);
  EXPECT_EQ(seqs[0], (std::vector<int32_t>{c, 5, 6, s, 7, 8, 9, s}));
  EXPECT_EQ(seqs[1], (std::vector<int32_t>{c, 10, s}));
  // One line each; a long line cut into several.
  seqs = MakeSequences({{5, 6, 7, 8, 9, 10, 11, 12}, {13}}, 5, false, v);
  ASSERT_EQ(seqs.size(), 4u);
  EXPECT_EQ(seqs[0], (std::vector<int32_t>{c, 5, 6, 7, s}));
  EXPECT_EQ(seqs[2], (std::vector<int32_t>{c, 11, 12, s}));
  EXPECT_EQ(seqs[3], (std::vector<int32_t>{c, 13, s}));
}

class TextFilesTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = ::testing::TempDir() + "/" + name;
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }
  TextConfig Spec(const std::string& train, const std::string& test) {
    TextConfig d;
    d.train_files = {train};
    d.test_files = {test};
    d.vocab_size = 64;
    d.sequence_length = 16;
    d.max_predictions = 4;
    d.min_line_chars = 10;
    return d;
  }
  DataOptions Options() {
    DataOptions o;
    o.fields = {"token_ids", "segment_ids", "padding_mask", "mask_positions"};
    o.seed = 7;
    return o;
  }
};

TEST_F(TextFilesTest, SamplesHoldTheModelInputsAndMaskDeterministically) {
  std::string text;
  for (int i = 0; i < 40; ++i) {
    text += "The big red cat sat on the mat in the sun, and a dog ran.\n";
    text += "short\n";  // under min_line_chars: dropped
  }
  const std::string train = Write("train.txt", text);
  const std::string test = Write("valid.txt", "A cat sat on a red hat.\n");
  absl::StatusOr<Dataset> ds =
      LoadTextDataset(Spec(train, test), Split::kTrain, Options());
  ASSERT_TRUE(ds.ok()) << ds.status();
  ASSERT_NE(ds->vocab, nullptr);
  EXPECT_EQ(ds->vocab->size(), 64);  // padded with [unusedN] to vocab_size
  EXPECT_EQ(ds->labels_per_sample, 4);
  EXPECT_EQ(ds->sample_shape, Shape{3 * 16 + 4});
  EXPECT_GT(ds->num_samples, 20);
  std::vector<float> x(52), x2(52);
  std::vector<int32_t> y(4), y2(4);
  ds->Fill(0, 3, x.data(), y.data());
  ds->Fill(0, 3, x2.data(), y2.data());
  EXPECT_EQ(x, x2);
  EXPECT_EQ(y, y2);
  EXPECT_EQ(x[0], ds->vocab->cls());
  int tokens = 0;
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(x[16 + i], 0.0f);  // segment ids
    tokens += x[32 + i] == 1.0f;
    if (x[32 + i] == 0.0f) {
      EXPECT_EQ(x[i], ds->vocab->pad());
    }
  }
  EXPECT_GE(tokens, 3);  // [CLS], at least a piece, [SEP]
  for (int k = 0; k < 4; ++k) {
    if (y[k] < 0) {
      EXPECT_EQ(x[48 + k], -1.0f);  // an unused slot
      continue;
    }
    const int pos = static_cast<int>(x[48 + k]);
    EXPECT_GT(pos, 0);
    EXPECT_LT(pos, tokens);
    EXPECT_FALSE(ds->vocab->IsSpecial(y[k]));
  }
  // Another epoch masks anew.
  bool differs = false;
  for (int64_t i = 0; i < ds->num_samples && !differs; ++i) {
    ds->Fill(0, i, x.data(), y.data());
    ds->Fill(1, i, x2.data(), y2.data());
    differs = x != x2;
  }
  EXPECT_TRUE(differs);

  // The test split uses the train split's vocabulary and fixed masks.
  DataOptions o = Options();
  o.vocab = ds->vocab;
  absl::StatusOr<Dataset> t =
      LoadTextDataset(Spec(train, test), Split::kTest, o);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->vocab, ds->vocab);
  EXPECT_EQ(t->num_samples, 1);
}

TEST_F(TextFilesTest, BadFilesAreErrorsNamingTheFile) {
  const std::string good =
      Write("good.txt", "The big red cat sat on the mat today.\n");
  auto error = [&](const TextConfig& spec) {
    absl::StatusOr<Dataset> ds =
        LoadTextDataset(spec, Split::kTrain, Options());
    EXPECT_FALSE(ds.ok());
    return std::string(ds.status().message());
  };
  const std::string empty = Write("empty.txt", "");
  EXPECT_THAT(error(Spec(empty, good)), HasSubstr(empty));
  const std::string binary =
      Write("binary.bin", std::string("\x00\x01\x02\xff\xfe text\x00", 12));
  EXPECT_THAT(error(Spec(binary, good)), HasSubstr(binary));
  const std::string missing = ::testing::TempDir() + "/nope.txt";
  absl::StatusOr<Dataset> ds =
      LoadTextDataset(Spec(missing, good), Split::kTrain, Options());
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(ds.status().message(), HasSubstr(missing));
  // A vocabulary without [MASK].
  TextConfig spec = Spec(good, good);
  spec.vocab_path = Write("vocab.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\n");
  EXPECT_THAT(error(spec), HasSubstr("[MASK]"));
  EXPECT_THAT(error(spec), HasSubstr(spec.vocab_path));
}

// task causal_lm: the sequence as it is (nothing masked), each position's
// label the next token, -1 at the last token and on padding; the same in
// every epoch; mask_positions is no field of it.
TEST_F(TextFilesTest, CausalSamplesAreLabelledWithTheNextToken) {
  std::string text;
  for (int i = 0; i < 20; ++i) {
    text += "The big red cat sat on the mat in the sun, and a dog ran.\n";
  }
  const std::string train = Write("causal.txt", text);
  const std::string test = Write("causal_valid.txt", "A cat sat on a hat.\n");
  TextConfig spec = Spec(train, test);
  spec.causal = true;
  DataOptions o = Options();
  o.fields = {"token_ids", "padding_mask"};
  absl::StatusOr<Dataset> ds = LoadTextDataset(spec, Split::kTrain, o);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(ds->labels_per_sample, 16);
  EXPECT_EQ(ds->sample_shape, Shape{2 * 16});
  std::vector<float> x(32), x2(32);
  std::vector<int32_t> y(16), y2(16);
  for (int64_t i = 0; i < ds->num_samples; ++i) {
    ds->Fill(0, i, x.data(), y.data());
    ds->Fill(3, i, x2.data(), y2.data());
    EXPECT_EQ(x, x2);
    EXPECT_EQ(y, y2);
    int tokens = 0;
    while (tokens < 16 && x[16 + tokens] == 1.0f) ++tokens;
    ASSERT_GE(tokens, 3) << i;
    EXPECT_EQ(x[0], ds->vocab->cls());
    EXPECT_EQ(ds->LabelCount(i), tokens - 1);
    for (int k = 0; k < 16; ++k) {
      EXPECT_EQ(y[k], k + 1 < tokens ? static_cast<int32_t>(x[k + 1]) : -1)
          << i << " " << k;
    }
  }
  o.fields = {"token_ids", "mask_positions"};
  absl::StatusOr<Dataset> bad = LoadTextDataset(spec, Split::kTrain, o);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr("causal_lm text data has no field \"mask_positions\""));
}

}  // namespace
}  // namespace lockstep
