// Tests for the non-throwing JSON adapter: strict dumping and typed field
// reads, their codes and their messages.
#include "core/json_util.h"

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::json;

// The object every getter test reads from.
Json Doc() {
  return Json::parse(R"({
    "small": 7, "negative": -3, "big": 18446744073709551615,
    "u32max": 4294967295, "u32over": 4294967296, "int64max": 9223372036854775807,
    "float": 1.5, "whole_float": 3.0, "text": "hi", "flag": true,
    "nothing": null, "list": [1, 2], "obj": {"a": 1}
  })");
}

template <typename T>
void ExpectError(const absl::StatusOr<T>& got, const std::string& message) {
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(got.status().message(), message);
}

TEST(JsonUtilTest, IntegersInRange) {
  const Json j = Doc();
  EXPECT_EQ(*GetInt64(j, "small", "doc"), 7);
  EXPECT_EQ(*GetInt64(j, "negative", "doc"), -3);
  EXPECT_EQ(*GetInt64(j, "int64max", "doc"),
            std::numeric_limits<int64_t>::max());
  EXPECT_EQ(*GetUint64(j, "big", "doc"), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(*GetUint64(j, "small", "doc"), 7u);
  EXPECT_EQ(*GetUint32(j, "u32max", "doc"), 4294967295u);
  // A non-negative value built from a signed integer counts too.
  const Json built = {{"n", int64_t{5}}};
  EXPECT_EQ(*GetUint64(built, "n", "doc"), 5u);
}

TEST(JsonUtilTest, WrongTypeNamesTheFieldTheTypeAndTheValue) {
  const Json j = Doc();
  const std::string i64 = "a signed 64-bit integer";
  const std::string u64 = "an unsigned 64-bit integer";
  const std::string u32 = "an unsigned 32-bit integer";
  // {status, key, expected type, what was there}.
  const std::vector<
      std::tuple<absl::Status, std::string, std::string, std::string>>
      cases = {
          {GetInt64(j, "big", "doc").status(), "big", i64,
           "18446744073709551615"},
          {GetInt64(j, "whole_float", "doc").status(), "whole_float", i64,
           "3.0"},
          {GetInt64(j, "text", "doc").status(), "text", i64, "string"},
          {GetInt64(j, "flag", "doc").status(), "flag", i64, "true"},
          {GetUint64(j, "negative", "doc").status(), "negative", u64, "-3"},
          {GetUint32(j, "u32over", "doc").status(), "u32over", u32,
           "4294967296"},
          {GetUint32(j, "float", "doc").status(), "float", u32, "1.5"},
          {GetDouble(j, "nothing", "doc").status(), "nothing", "a number",
           "null"},
          {GetString(j, "small", "doc").status(), "small", "a string", "7"},
          {GetObject(j, "list", "doc").status(), "list", "an object", "array"},
      };
  for (const auto& [status, key, type, got] : cases) {
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << key;
    EXPECT_EQ(status.message(),
              "doc: field \"" + key + "\" must be " + type + ", got " + got);
  }
}

TEST(JsonUtilTest, GetDoubleTakesAnyNumber) {
  const Json j = Doc();
  EXPECT_EQ(*GetDouble(j, "float", "doc"), 1.5);
  EXPECT_EQ(*GetDouble(j, "negative", "doc"), -3.0);
}

TEST(JsonUtilTest, GetStringAndObject) {
  const Json j = Doc();
  EXPECT_EQ(*GetString(j, "text", "doc"), "hi");
  absl::StatusOr<const Json*> obj = GetObject(j, "obj", "doc");
  ASSERT_TRUE(obj.ok()) << obj.status();
  EXPECT_EQ(*obj, &j.at("obj"));  // points into the document, no copy
}

TEST(JsonUtilTest, GetFieldTakesAnyType) {
  const Json j = Doc();
  absl::StatusOr<const Json*> v = GetField(j, "nothing", "doc");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_TRUE((*v)->is_null());
}

TEST(JsonUtilTest, MissingFieldAndNonObject) {
  const Json j = Doc();
  ExpectError(GetInt64(j, "absent", "doc"), "doc: missing field \"absent\"");
  ExpectError(GetString(Json::array(), "x", "doc"),
              "doc: expected an object, got array");
  ExpectError(GetUint64(Json(nullptr), "x", "doc"),
              "doc: expected an object, got null");
  // An empty context leaves the message unprefixed.
  ExpectError(GetDouble(j, "absent", ""), "missing field \"absent\"");
  ExpectError(GetField(Json(2), "x", ""), "expected an object, got 2");
}

// A key given twice in one object is refused, naming it and where (the
// parser would keep the last value silently: a repeated learning_rate
// would train with whichever came second).
TEST(JsonUtilTest, ARepeatedKeyIsRefusedNamingItAndWhere) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"name": "x", "name": "y"})",
       "job: the key \"name\" appears twice in the top-level object (each "
       "key once: which value would count?)"},
      {R"({"optimizer": {"learning_rate": 0.1, "type": "sgd",
           "learning_rate": 1e-3}})",
       "job: the key \"learning_rate\" appears twice in \"optimizer\" (each "
       "key once: which value would count?)"},
      {R"({"model": {"layers": [{"type": "flatten"}, [1, {"a": 2}],
           {"type": "dense", "units": 3, "units": 4}]}})",
       "job: the key \"units\" appears twice in \"model.layers[2]\" (each "
       "key once: which value would count?)"},
      // Escapes are compared as the strings they stand for.
      {R"({"a": 1, "\u0061": 2})",
       "job: the key \"a\" appears twice in the top-level object (each key "
       "once: which value would count?)"},
  };
  for (const auto& [text, message] : cases) {
    ExpectError(ParseJson(text, "job"), message);
    ExpectError(ParseOrderedJson(text, "job"), message);
  }
  // The same key in two objects, or as a value, is fine.
  absl::StatusOr<Json> ok = ParseJson(
      R"({"a": {"k": 1}, "b": {"k": 2}, "c": ["k", "k"], "k": {"k": 3}})",
      "job");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ((*ok)["k"]["k"], 3);
  // A wide object of objects (a safetensors header's shape) parses in one
  // linear pass each: nlohmann's callback parse rescanned the parent after
  // every child (100,000 children took minutes).
  std::string wide = "{";
  for (int i = 0; i < 100000; ++i) {
    absl::StrAppend(&wide, i ? "," : "", "\"t", i, "\":{\"a\":1}");
  }
  wide += "}";
  absl::StatusOr<Json> parsed = ParseJson(wide, "header");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->size(), 100000u);
}

TEST(JsonUtilTest, DumpJsonStrictRefusesInvalidUtf8) {
  const Json good = {{"name", "caf\xc3\xa9"}};
  absl::StatusOr<std::string> dumped = DumpJsonStrict(good);
  ASSERT_TRUE(dumped.ok()) << dumped.status();
  EXPECT_EQ(*dumped, "{\"name\":\"caf\xc3\xa9\"}");
  EXPECT_EQ(*DumpJsonStrict(good, 2), "{\n  \"name\": \"caf\xc3\xa9\"\n}");

  const nlohmann::ordered_json bad = {{"x\xff", 1}};
  absl::StatusOr<std::string> refused = DumpJsonStrict(bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(),
              HasSubstr("invalid UTF-8 byte at index 1: 0xFF"));
  // The lenient dump replaces the byte instead.
  EXPECT_EQ(DumpJson(bad), "{\"x\xef\xbf\xbd\":1}");
}

}  // namespace
}  // namespace lockstep
