// The text format (see text_format.h).
#include "core/data/text_format.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace lockstep {
namespace {

using spec_reader::Bad;
using spec_reader::Got;
using spec_reader::kPositive;
using spec_reader::kUnitClosed;
using spec_reader::Reader;

class TextData final : public DataConfig, public TextConfig {
 public:
  explicit TextData(TextConfig c) : TextConfig(std::move(c)) {}

  void ToJson(spec_reader::Json* d) const override {
    (*d)["train_path"] = train_files;
    (*d)["test_path"] = test_files;
    (*d)["min_line_chars"] = min_line_chars;
    (*d)["lowercase"] = lowercase;
    if (!vocab_path.empty()) (*d)["vocab"] = vocab_path;
    (*d)["vocab_size"] = vocab_size;
    (*d)["sequence_length"] = sequence_length;
    (*d)["pack_lines"] = pack_lines;
    (*d)["task"] = causal ? "causal_lm" : "masked_lm";
    if (causal) return;
    (*d)["mask_rate"] = mask_rate;
    (*d)["max_predictions"] = max_predictions;
    (*d)["mask_token_rate"] = mask_token_rate;
    (*d)["random_token_rate"] = random_token_rate;
  }
  std::vector<DataPath> Paths() const override {
    std::vector<DataPath> out;
    for (const auto& [field, files] :
         {std::pair{"data.train_path", &train_files},
          std::pair{"data.test_path", &test_files}}) {
      for (size_t i = 0; i < files->size(); ++i) {
        out.push_back({files->size() == 1 ? std::string(field)
                                          : spec_reader::Index(field, i),
                       (*files)[i]});
      }
    }
    if (!vocab_path.empty()) out.push_back({"data.vocab", vocab_path});
    return out;
  }
  absl::StatusOr<Shape> FieldShape(const std::string& field) const override {
    if (field == "token_ids" || field == "segment_ids" ||
        field == "padding_mask") {
      return Shape{sequence_length};
    }
    if (field == "mask_positions" && !causal) return Shape{max_predictions};
    if (causal) {
      return absl::NotFoundError(
          "its fields are token_ids, segment_ids and padding_mask (task "
          "causal_lm)");
    }
    return absl::NotFoundError(
        "its fields are token_ids, segment_ids, padding_mask and "
        "mask_positions");
  }
  int64_t LabelsPerSample() const override {
    return causal ? sequence_length : max_predictions;
  }
  absl::StatusOr<Dataset> Load(const DataSpec& data, Split split,
                               const DataOptions& options) const override {
    return LoadTextDataset(*this, split, options);
  }
  DataArtifacts Artifacts(const Dataset& train) const override {
    if (train.vocab == nullptr) return {};
    return {{kVocabArtifact, train.vocab->ToText()}};
  }
};

// One path or a list of them; relative ones resolved against base_dir.
absl::Status Paths(const Reader& r, const char* key, absl::string_view base_dir,
                   std::vector<std::string>* out) {
  if (!r.Has(key)) return absl::OkStatus();
  std::vector<std::string> list;
  RETURN_IF_ERROR(r.Strings(key, &list));
  for (std::string& p : list) {
    if (p[0] != '/' && !base_dir.empty()) {
      p = absl::StrCat(base_dir, base_dir.back() == '/' ? "" : "/", p);
    }
  }
  *out = std::move(list);
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const DataConfig>> Parse(
    const Reader& r, absl::string_view base_dir, const std::string& variant) {
  TextConfig c;
  RETURN_IF_ERROR(r.Require("train_path", variant));
  RETURN_IF_ERROR(Paths(r, "train_path", base_dir, &c.train_files));
  RETURN_IF_ERROR(r.Require("test_path", variant));
  RETURN_IF_ERROR(Paths(r, "test_path", base_dir, &c.test_files));
  RETURN_IF_ERROR(r.Int("min_line_chars", 0, &c.min_line_chars));
  RETURN_IF_ERROR(r.Bool("lowercase", &c.lowercase));
  RETURN_IF_ERROR(r.Path("vocab", base_dir, &c.vocab_path));
  if (c.vocab_path.empty()) {
    RETURN_IF_ERROR(r.Require(
        "vocab_size", "building a vocabulary (when data.vocab is not given)"));
  }
  RETURN_IF_ERROR(r.Int("vocab_size", 8, &c.vocab_size, 1 << 24));
  RETURN_IF_ERROR(r.Int("sequence_length", 4, &c.sequence_length, 1 << 16));
  RETURN_IF_ERROR(r.Bool("pack_lines", &c.pack_lines));
  std::string task = "masked_lm";
  RETURN_IF_ERROR(r.String("task", &task));
  if (task != "masked_lm" && task != "causal_lm") {
    return Bad(r.At("task"), absl::StrCat("must be \"masked_lm\" or "
                                          "\"causal_lm\", got ",
                                          Got(r.Get("task"))));
  }
  c.causal = task == "causal_lm";
  if (c.causal) {
    // Nothing is masked: each position's label is the next token.
    for (const char* key : {"mask_rate", "max_predictions", "mask_token_rate",
                            "random_token_rate"}) {
      if (r.Has(key)) {
        return Bad(r.At(key),
                   "only with task \"masked_lm\" (a causal "
                   "language model's labels are the next tokens)");
      }
    }
    return std::make_shared<const TextData>(std::move(c));
  }
  RETURN_IF_ERROR(r.Number("mask_rate", kPositive, &c.mask_rate));
  if (c.mask_rate > 1) {
    return Bad(r.At("mask_rate"), absl::StrCat("must be in (0, 1], got ",
                                               Got(r.Get("mask_rate"))));
  }
  c.max_predictions = std::min<int64_t>(20, c.sequence_length - 2);
  RETURN_IF_ERROR(
      r.Int("max_predictions", 1, &c.max_predictions, c.sequence_length - 2));
  RETURN_IF_ERROR(r.Number("mask_token_rate", kUnitClosed, &c.mask_token_rate));
  RETURN_IF_ERROR(
      r.Number("random_token_rate", kUnitClosed, &c.random_token_rate));
  if (c.mask_token_rate + c.random_token_rate > 1) {
    return Bad(r.At("random_token_rate"),
               absl::StrCat("mask_token_rate + random_token_rate must be <= "
                            "1, got ",
                            c.mask_token_rate, " + ", c.random_token_rate));
  }
  return std::make_shared<const TextData>(std::move(c));
}

DataFormatInfo Info() {
  return {"text",
          {"train_path", "test_path", "min_line_chars", "lowercase", "vocab",
           "vocab_size", "sequence_length", "pack_lines", "task", "mask_rate",
           "max_predictions", "mask_token_rate", "random_token_rate"},
          false,
          &Parse};
}

}  // namespace

LOCKSTEP_REGISTER_DATA_FORMAT(Info());

DataSpec TextDataSpec(TextConfig config) {
  return MakeDataSpec("text",
                      std::make_shared<const TextData>(std::move(config)));
}

}  // namespace lockstep
