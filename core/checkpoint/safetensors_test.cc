#include "core/checkpoint/safetensors.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/file_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

using ::testing::HasSubstr;

std::string TempPath(const std::string& name) {
  return JoinPath(::testing::TempDir(), name);
}

void WriteRaw(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), bytes.size());
}

// A file image with `json` as its header (padded like the Python library).
std::string Image(std::string json, const std::string& data) {
  json.append((8 - json.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i)
    out[i] = static_cast<char>(json.size() >> (8 * i));
  return out + json + data;
}

std::string Floats(std::initializer_list<float> v) {
  std::string s(sizeof(float) * v.size(), '\0');
  std::memcpy(&s[0], v.begin(), s.size());
  return s;
}

TEST(SafetensorsTest, RoundTripWithEmptyAndScalarTensorsAndMetadata) {
  Tensor w({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor empty({0, 4});
  Tensor scalar({}, {7.5f});
  Tensor b({3}, {-1, 0.5f, 1e30f});
  const std::string path = TempPath("round_trip.safetensors");
  SafetensorsWriteInfo info;
  ASSERT_TRUE(
      WriteSafetensors(
          path,
          {{"z/w", &w}, {"empty", &empty}, {"scalar", &scalar}, {"a/b", &b}},
          {{"format", "pt"}, {"step", "12"}}, &info)
          .ok());
  ASSERT_EQ(info.tensor_crc32c.size(), 4u);
  std::map<std::string, std::string> meta;
  auto read = ReadSafetensors(path, &meta);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(meta, (std::map<std::string, std::string>{{"format", "pt"},
                                                      {"step", "12"}}));
  ASSERT_EQ(read->size(), 4u);
  // File order is by name.
  EXPECT_EQ((*read)[0].first, "a/b");
  EXPECT_EQ((*read)[0].second.values(), b.values());
  EXPECT_EQ((*read)[1].first, "empty");
  EXPECT_EQ((*read)[1].second.shape(), (Shape{0, 4}));
  EXPECT_EQ((*read)[1].second.size(), 0);
  EXPECT_EQ((*read)[2].first, "scalar");
  EXPECT_EQ((*read)[2].second.shape(), Shape{});
  EXPECT_EQ((*read)[2].second.values(), std::vector<float>{7.5f});
  EXPECT_EQ((*read)[3].first, "z/w");
  EXPECT_EQ((*read)[3].second.shape(), (Shape{2, 3}));
  EXPECT_EQ((*read)[3].second.values(), w.values());
  auto bytes = ReadFile(path);
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(info.file_bytes, bytes->size());
  EXPECT_EQ((bytes->size() - 8) % 4, 0u);
}

TEST(SafetensorsTest, NoTensorsNoMetadata) {
  const std::string path = TempPath("nothing.safetensors");
  ASSERT_TRUE(WriteSafetensors(path, {}, {}).ok());
  auto bytes = ReadFile(path);
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(*bytes, std::string("\x08\0\0\0\0\0\0\0{}      ", 16));
  auto read = ReadSafetensors(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_TRUE(read->empty());
}

TEST(SafetensorsTest, ByteExactHeader) {
  Tensor b({2}, {1.0f, 2.0f});
  Tensor a({0});
  const std::string path = TempPath("exact.safetensors");
  ASSERT_TRUE(
      WriteSafetensors(path, {{"b", &b}, {"a", &a}}, {{"k", "v"}}).ok());
  const std::string json =
      "{\"__metadata__\":{\"k\":\"v\"},"
      "\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]},"
      "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}"
      "    ";  // 132 bytes of JSON padded to 136
  ASSERT_EQ(json.size(), 136u);
  const std::string want = std::string("\x88\0\0\0\0\0\0\0", 8) + json +
                           std::string("\x00\x00\x80\x3f\x00\x00\x00\x40", 8);
  auto bytes = ReadFile(path);
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(*bytes, want);
}

TEST(SafetensorsTest, ReadsPythonStyleVariants) {
  // Other key order, whitespace, metadata last: all valid per the spec.
  const std::string path = TempPath("variant.safetensors");
  WriteRaw(path,
           Image("{ \"x\": {\"data_offsets\": [0, 4], \"shape\": [1], "
                 "\"dtype\": \"F32\"}, \"__metadata__\": {\"a\": \"b\"} }",
                 Floats({42})));
  std::map<std::string, std::string> meta;
  auto read = ReadSafetensors(path, &meta);
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->size(), 1u);
  EXPECT_EQ((*read)[0].second.values(), std::vector<float>{42});
  EXPECT_EQ(meta["a"], "b");
}

TEST(SafetensorsTest, RejectsBadNames) {
  Tensor t({1});
  const std::string path = TempPath("bad_names.safetensors");
  EXPECT_EQ(WriteSafetensors(path, {{"a", &t}, {"a", &t}}, {}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(WriteSafetensors(path, {{"__metadata__", &t}}, {}).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(SafetensorsTest, WriteErrorsNameThePath) {
  Tensor t({4});
  absl::Status s =
      WriteSafetensors("/nonexistent-dir/x.safetensors", {{"t", &t}}, {});
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("\"/nonexistent-dir/x.safetensors\""));
  if (access("/dev/full", W_OK) == 0) {
    s = WriteSafetensors("/dev/full", {{"t", &t}}, {});
    EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
    EXPECT_THAT(s.message(),
                HasSubstr("writing \"/dev/full\": No space left on device"));
  }
}

TEST(SafetensorsTest, OtherDtypesConvertOrAreSkippedOnRequest) {
  // F16 [1, -2, 0.5, 65504], BF16 [1, -3], F64 [0.25], I64 [7] (skipped),
  // in file order.
  std::string data;
  for (uint16_t h : {0x3c00, 0xc000, 0x3800, 0x7bff}) {
    data.append(reinterpret_cast<const char*>(&h), 2);
  }
  for (uint16_t b : {0x3f80, 0xc040}) {
    data.append(reinterpret_cast<const char*>(&b), 2);
  }
  const double d = 0.25;
  data.append(reinterpret_cast<const char*>(&d), 8);
  const int64_t i = 7;
  data.append(reinterpret_cast<const char*>(&i), 8);
  const std::string path = TempPath("dtypes.safetensors");
  WriteRaw(
      path,
      Image("{\"h\":{\"dtype\":\"F16\",\"shape\":[4],\"data_offsets\":[0,8]},"
            "\"b\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[8,12]},"
            "\"d\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[12,20]},"
            "\"ids\":{\"dtype\":\"I64\",\"shape\":[1,1],"
            "\"data_offsets\":[20,28]}}",
            data));
  EXPECT_EQ(ReadSafetensors(path).status().code(),
            absl::StatusCode::kDataLoss);  // strict by default
  std::vector<SkippedTensor> skipped;
  SafetensorsReadOptions options;
  options.any_dtype = true;
  options.skipped = &skipped;
  auto read = ReadSafetensors(path, nullptr, options);
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->size(), 3u);
  EXPECT_EQ((*read)[0].first, "h");
  EXPECT_EQ((*read)[0].second.values(),
            (std::vector<float>{1, -2, 0.5f, 65504}));
  EXPECT_EQ((*read)[1].second.values(), (std::vector<float>{1, -3}));
  EXPECT_EQ((*read)[2].second.values(), (std::vector<float>{0.25f}));
  EXPECT_EQ(skipped, (std::vector<SkippedTensor>{{"ids", "I64"}}));
}

struct Corruption {
  const char* name;
  std::string bytes;
  const char* expect;
};

class SafetensorsCorruptionTest : public ::testing::TestWithParam<int> {};

std::vector<Corruption> Corruptions() {
  const std::string good_json =
      "{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
  const std::string good = Image(good_json, Floats({1, 2}));
  std::string huge_len = good;
  huge_len[5] = 1;  // header length far beyond the file
  return {
      {"empty", "", "truncated"},
      {"short", std::string("\x10\0\0", 3), "truncated"},
      {"header_past_end", huge_len, "runs past the end"},
      {"truncated_data", good.substr(0, good.size() - 3), "run past the data"},
      {"trailing_data", good + "xxxx", "file holds"},
      {"malformed_json", Image("{\"t\":{\"dtype\":", ""), "malformed header"},
      {"not_object", Image("[1,2]", ""), "not a JSON object"},
      {"out_of_range",
       Image(
           "{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}",
           Floats({1, 2})),
       "gap"},
      {"overlap",
       Image("{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
             "\"u\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
             Floats({1, 2, 3})),
       "overlap"},
      {"backwards",
       Image("{\"t\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,0]}}",
             Floats({1, 2})),
       "end before they begin"},
      {"shape_mismatch",
       Image("{\"t\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}",
             Floats({1, 2})),
       "has shape [3] but 8 data bytes"},
      {"negative_dim",
       Image(
           "{\"t\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}",
           Floats({1, 2})),
       "non-negative"},
      {"f16",
       Image("{\"t\":{\"dtype\":\"F16\",\"shape\":[4],\"data_offsets\":[0,8]}}",
             Floats({1, 2})),
       "dtype F16; only F32"},
      {"unknown_dtype",
       Image("{\"t\":{\"dtype\":\"Q4\",\"shape\":[2],\"data_offsets\":[0,8]}}",
             Floats({1, 2})),
       "unknown dtype Q4"},
      {"missing_field", Image("{\"t\":{\"dtype\":\"F32\",\"shape\":[2]}}", ""),
       "needs dtype"},
      {"bad_metadata", Image("{\"__metadata__\":{\"a\":1}}", ""),
       "is not a string"},
  };
}

TEST_P(SafetensorsCorruptionTest, IsDataLossNamingTheFile) {
  const Corruption c = Corruptions()[GetParam()];
  const std::string path = TempPath(absl::StrCat(c.name, ".safetensors"));
  WriteRaw(path, c.bytes);
  auto read = ReadSafetensors(path);
  ASSERT_FALSE(read.ok()) << c.name;
  EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss) << c.name;
  EXPECT_THAT(read.status().message(), HasSubstr(path)) << c.name;
  EXPECT_THAT(read.status().message(), HasSubstr(c.expect))
      << c.name << ": " << read.status();
}

INSTANTIATE_TEST_SUITE_P(All, SafetensorsCorruptionTest,
                         ::testing::Range(0, 15));

TEST(SafetensorsTest, MissingFileIsNotFound) {
  EXPECT_EQ(ReadSafetensors(TempPath("no-such.safetensors")).status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace lockstep
