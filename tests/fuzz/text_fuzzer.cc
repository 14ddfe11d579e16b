// The plain-text dataset (data.format "text", LoadTextDataset) over a fixed
// small vocabulary (DataOptions::vocab, so no vocabulary is learned per
// input) and sequences of 16: any file loads or is refused with a message,
// lines packed or one per sequence. Each sample of a loaded set is well
// formed: token ids inside the vocabulary, starting with [CLS] and ending
// with [SEP] where the padding mask ends, [PAD] after; zero segment ids;
// mask positions ascending inside the tokens, never [CLS] or [SEP], as
// many as the labels it has (LabelCount, at most max_predictions); labels
// inside the vocabulary and never [CLS] [SEP] [PAD] [MASK]; and made twice
// the same (a pure function of seed, epoch and index).
//
// The whole input is the one training file.
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/data/dataset.h"
#include "core/data/text_dataset.h"
#include "core/data/wordpiece.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

using lockstep::WordPieceVocab;

constexpr int64_t kLength = 16;              // data.sequence_length
constexpr int64_t kPredictions = 3;          // data.max_predictions
constexpr int64_t kMaxSamplesChecked = 256;  // bounds a 64 KiB input's cost

const std::shared_ptr<const WordPieceVocab>& Vocab() {
  static const auto* vocab = new std::shared_ptr<const WordPieceVocab>(
      std::make_shared<const WordPieceVocab>(
          *WordPieceVocab::FromText("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n"
                                    "the\nquick\nbrown\nfox\njump\n##s\n##ed\n"
                                    "over\nlazy\ndog\na\nb\nc\n##a\n##b\n"
                                    "##c\n.\n,\n!\n?\n\xe4\xb8\xad\ncafe\n",
                                    "fuzz vocab")));
  return *vocab;
}

// Checks sample `i` of `d`, made for `epoch`.
void CheckSample(const lockstep::Dataset& d, int64_t epoch, int64_t i) {
  const WordPieceVocab& v = *Vocab();
  const int64_t per = 3 * kLength + kPredictions;
  std::vector<float> x(per), x2(per);
  std::vector<int32_t> labels(kPredictions), labels2(kPredictions);
  d.Fill(epoch, i, x.data(), labels.data());
  d.Fill(epoch, i, x2.data(), labels2.data());
  FUZZ_CHECK(x == x2 && labels == labels2);

  const float* ids = x.data();
  const float* segments = ids + kLength;
  const float* padding = segments + kLength;
  const float* positions = padding + kLength;
  int64_t n = 0;  // tokens before the padding
  while (n < kLength && padding[n] == 1.0f) ++n;
  FUZZ_CHECK(n >= 2);
  for (int64_t t = 0; t < kLength; ++t) {
    FUZZ_CHECK(segments[t] == 0.0f);
    FUZZ_CHECK(padding[t] == (t < n ? 1.0f : 0.0f));
    FUZZ_CHECK(ids[t] == std::floor(ids[t]) && ids[t] >= 0 &&
               ids[t] < v.size());
    if (t >= n) FUZZ_CHECK(ids[t] == v.pad());
  }
  FUZZ_CHECK(ids[0] == v.cls());
  FUZZ_CHECK(ids[n - 1] == v.sep());

  const int64_t count = d.LabelCount(i);
  FUZZ_CHECK(count >= 0 && count <= kPredictions);
  for (int64_t k = 0; k < kPredictions; ++k) {
    if (k >= count) {
      FUZZ_CHECK(positions[k] == -1.0f);
      FUZZ_CHECK(labels[k] == -1);
      continue;
    }
    const float p = positions[k];
    FUZZ_CHECK(p == std::floor(p) && p >= 1 && p <= n - 2);
    if (k > 0) FUZZ_CHECK(p > positions[k - 1]);
    const int32_t label = labels[k];
    FUZZ_CHECK(label >= 0 && label < v.size());
    FUZZ_CHECK(label != v.cls() && label != v.sep() && label != v.pad() &&
               label != v.mask());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace lockstep;
  const std::string path = fuzz::WriteScratch("train.txt", data, size);
  TextConfig spec;
  spec.train_files = {path};
  spec.sequence_length = kLength;
  spec.max_predictions = kPredictions;
  DataOptions options;
  options.fields = {"token_ids", "segment_ids", "padding_mask",
                    "mask_positions"};
  options.seed = 1234;
  options.vocab = Vocab();
  for (bool pack : {true, false}) {
    spec.pack_lines = pack;
    absl::StatusOr<Dataset> d = LoadTextDataset(spec, Split::kTrain, options);
    fuzz::CheckRefusal(d.status());
    if (!d.ok()) continue;
    FUZZ_CHECK(d->num_samples > 0);
    FUZZ_CHECK(d->maker != nullptr);
    FUZZ_CHECK(d->vocab == Vocab());
    FUZZ_CHECK(d->num_classes == Vocab()->size());
    FUZZ_CHECK(d->labels_per_sample == kPredictions);
    FUZZ_CHECK(d->sample_shape ==
               std::vector<int64_t>{3 * kLength + kPredictions});
    for (int64_t i = 0; i < d->num_samples && i < kMaxSamplesChecked; ++i) {
      CheckSample(*d, /*epoch=*/0, i);
      CheckSample(*d, kEvalEpoch, i);
    }
  }
  return 0;
}
