#include "core/job/job_fields.h"

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "core/job/job_spec.h"
#include "core/job/job_spec_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

using Json = nlohmann::ordered_json;
using ::testing::Contains;

// The parser's verdict on kMinimal with `field` (a JobFieldNames entry)
// set, and the JSON path it was set at.
struct Probe {
  std::string path;
  std::string error;  // "" when the job parsed
};

Probe Try(const std::string& field) {
  Json job = Json::parse(testing::kMinimal);
  Probe p;
  if (absl::StartsWith(field, "layer ")) {
    // "layer TYPE: KEY": the key in a layer of that type.
    std::vector<std::string> parts = absl::StrSplit(field.substr(6), ": ");
    job["model"]["layers"] = Json::array({{{"type", parts[0]}, {parts[1], 1}}});
    p.path = "model.layers[0]." + parts[1];
  } else if (absl::StartsWith(field, "data ")) {
    std::vector<std::string> parts = absl::StrSplit(field.substr(5), ": ");
    job["data"] = {{"format", parts[0]}, {parts[1], 1}};
    p.path = "data." + parts[1];
  } else {
    std::vector<std::string> parts = absl::StrSplit(field, '.');
    Json* at = &job;
    p.path.clear();
    for (size_t i = 0; i < parts.size(); ++i) {
      std::string key = parts[i];
      const bool element = absl::EndsWith(key, "[]");
      if (element) key.resize(key.size() - 2);
      p.path += (i ? "." : "") + key;
      if (i + 1 == parts.size()) {
        (*at)[key] = 1;
        break;
      }
      if (!(*at).contains(key) || !(*at)[key].is_structured()) {
        (*at)[key] = element ? Json::array({Json::object()}) : Json::object();
      }
      if (element) {
        if (!(*at)[key].is_array()) (*at)[key] = Json::array({Json::object()});
        at = &(*at)[key][0];
        p.path += "[0]";
      } else {
        at = &(*at)[key];
      }
    }
    if (absl::StartsWith(field, "model.inputs[]"))
      job["model"].erase("input_shape");
    if (field == "cluster.workers.min" || field == "cluster.workers.max") {
      job["cluster"]["workers"] = {{"min", 1}, {"max", 1}};
    }
  }
  absl::StatusOr<JobSpec> spec = ParseJobSpec(job.dump());
  if (!spec.ok()) p.error = std::string(spec.status().message());
  return p;
}

TEST(JobFieldsTest, EveryListedFieldIsOneTheParserKnows) {
  const std::vector<std::string> fields = JobFieldNames();
  ASSERT_GT(fields.size(), 100u);
  for (const std::string& field : fields) {
    const Probe p = Try(field);
    // Another variant's field ("unknown field for optimizer type ...") is
    // known; only a plain refusal means the list names a field the parser
    // does not take. A layer's or a format's field is tried in its own
    // variant, where it must not be refused at all.
    EXPECT_NE(p.error, p.path + ": unknown field") << field;
    if (!absl::StartsWith(field, "layer ") &&
        !absl::StartsWith(field, "data ")) {
      continue;
    }
    EXPECT_FALSE(absl::StartsWith(p.error, p.path + ": unknown field"))
        << field << ": " << p.error;
  }
}

TEST(JobFieldsTest, TheProbeSeesAFieldTheParserRefuses) {
  EXPECT_EQ(Try("optimizer.learnig_rate").error,
            "optimizer.learnig_rate: unknown field");
  EXPECT_EQ(Try("layer dense: filters").error,
            "model.layers[0].filters: unknown field for a dense layer");
}

TEST(JobFieldsTest, ListsEveryKindOfField) {
  const std::vector<std::string> fields = JobFieldNames();
  for (const char* f :
       {"name", "epochs", "optimizer.learning_rate", "cluster.workers.min",
        "model.inputs[].shape", "model.init.allow_missing",
        "model.layers[].trainable", "layer dense: units",
        "layer bert_mlm: vocab_size", "data csv: train_path", "data.scale",
        "lr_schedule.boundaries", "restart.max_restarts"}) {
    EXPECT_THAT(fields, Contains(f));
  }
}

}  // namespace
}  // namespace lockstep
