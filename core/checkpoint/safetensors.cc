// safetensors writer (F32) and validating reader (F32; other dtypes on
// request).
#include "core/checkpoint/safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "absl/strings/str_cat.h"
#include "base/crc32c.h"
#include "base/file_util.h"
#include "core/json_util.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors stores little-endian data; this host is not");

namespace lockstep {
namespace {

// The Python library refuses headers above 100 MB; so do we.
constexpr uint64_t kMaxHeaderBytes = 100000000;

// Bytes per element of each dtype the format names; 0 for an unknown one.
int DtypeBytes(const std::string& dtype) {
  static const std::pair<const char*, int> kTable[] = {
      {"F64", 8}, {"F32", 4}, {"F16", 2},  {"BF16", 2},    {"I64", 8},
      {"I32", 4}, {"I16", 2}, {"I8", 1},   {"U64", 8},     {"U32", 4},
      {"U16", 2}, {"U8", 1},  {"BOOL", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1}};
  for (const auto& [name, bytes] : kTable) {
    if (dtype == name) return bytes;
  }
  return 0;
}

bool IsConvertibleFloat(const std::string& dtype) {
  return dtype == "F32" || dtype == "F64" || dtype == "F16" || dtype == "BF16";
}

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      exp = 127 - 15 + 1;
      while ((mant & 0x400) == 0) {
        mant <<= 1;
        --exp;
      }
      bits = sign | (exp << 23) | ((mant & 0x3ff) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000 | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Element i of a float tensor's data as an fp32 value.
void ConvertToFloat(const std::string& dtype, const char* src, int64_t n,
                    float* dst) {
  if (dtype == "F32") {
    // An empty tensor's buffers may be null: memcpy must not see them.
    if (n > 0) std::memcpy(dst, src, n * sizeof(float));
  } else if (dtype == "F64") {
    for (int64_t i = 0; i < n; ++i) {
      double d;
      std::memcpy(&d, src + 8 * i, 8);
      dst[i] = static_cast<float>(d);
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, src + 2 * i, 2);
      if (dtype == "BF16") {
        const uint32_t bits = static_cast<uint32_t>(h) << 16;
        std::memcpy(dst + i, &bits, 4);
      } else {
        dst[i] = HalfToFloat(h);
      }
    }
  }
}

// Tensor order in the file: by name (all F32, so the Python library's
// "dtype alignment, then name" order is just by name).
std::vector<size_t> FileOrder(
    const std::vector<std::pair<std::string, const Tensor*>>& tensors) {
  std::vector<size_t> order(tensors.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return tensors[a].first < tensors[b].first;
  });
  return order;
}

absl::Status Corrupt(const std::string& name, const std::string& what) {
  return absl::DataLossError(
      absl::StrCat("safetensors file \"", name, "\": ", what));
}

// Elements of `shape`, or -1 when a dim is negative or the count overflows.
int64_t CheckedElements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return -1;
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / 4 / d) return -1;
    n *= d;
  }
  return n;
}

}  // namespace

absl::StatusOr<std::string> SafetensorsHeader(
    const std::vector<std::pair<std::string, const Tensor*>>& tensors,
    const std::map<std::string, std::string>& metadata) {
  std::set<std::string> seen;
  for (const auto& [name, t] : tensors) {
    if (name.empty() || name == "__metadata__") {
      return absl::InvalidArgumentError(
          absl::StrCat("invalid tensor name \"", name, "\""));
    }
    if (!seen.insert(name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("duplicate tensor name \"", name, "\""));
    }
    if (t == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor \"", name, "\" is null"));
    }
  }
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json meta = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata) meta[k] = v;
    header["__metadata__"] = meta;
  }
  uint64_t offset = 0;
  for (size_t i : FileOrder(tensors)) {
    const Tensor& t = *tensors[i].second;
    const uint64_t bytes = sizeof(float) * static_cast<uint64_t>(t.size());
    nlohmann::ordered_json info = nlohmann::ordered_json::object();
    info["dtype"] = "F32";
    info["shape"] = t.shape();
    info["data_offsets"] = {offset, offset + bytes};
    header[tensors[i].first] = info;
    offset += bytes;
  }
  absl::StatusOr<std::string> dumped = DumpJsonStrict(header);
  if (!dumped.ok()) {  // invalid UTF-8 in a name
    return absl::Status(dumped.status().code(),
                        absl::StrCat("cannot encode safetensors header: ",
                                     dumped.status().message()));
  }
  std::string json = *std::move(dumped);
  json.append((8 - json.size() % 8) % 8, ' ');
  const uint64_t n = json.size();
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + json;
}

absl::Status WriteSafetensors(
    const std::string& path,
    const std::vector<std::pair<std::string, const Tensor*>>& tensors,
    const std::map<std::string, std::string>& metadata,
    SafetensorsWriteInfo* info) {
  absl::StatusOr<std::string> header = SafetensorsHeader(tensors, metadata);
  if (!header.ok()) {
    return absl::Status(
        header.status().code(),
        absl::StrCat("writing \"", path, "\": ", header.status().message()));
  }
  auto error = [&path](int err) { return ErrnoToStatus("writing", path, err); };
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return error(errno);
  uint64_t total = header->size();
  uint32_t file_crc = Crc32c(header->data(), header->size());
  absl::Status s = WriteAll(fd, header->data(), header->size(), error);
  if (info != nullptr) info->tensor_crc32c.assign(tensors.size(), 0);
  for (size_t i : FileOrder(tensors)) {
    if (!s.ok()) break;
    const Tensor& t = *tensors[i].second;
    const size_t bytes = sizeof(float) * static_cast<size_t>(t.size());
    s = WriteAll(fd, t.data(), bytes, error);
    if (info != nullptr) {
      info->tensor_crc32c[i] = Crc32c(t.data(), bytes);
      file_crc = Crc32cExtend(file_crc, t.data(), bytes);
    }
    total += bytes;
  }
  if (s.ok() && fsync(fd) != 0) s = error(errno);
  if (close(fd) != 0 && s.ok()) s = error(errno);
  if (!s.ok()) return s;
  if (info != nullptr) {
    info->file_bytes = total;
    info->file_crc32c = file_crc;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::pair<std::string, Tensor>>> ReadSafetensors(
    const std::string& path, std::map<std::string, std::string>* metadata,
    const SafetensorsReadOptions& options) {
  absl::StatusOr<std::string> bytes = ReadFile(path);
  if (!bytes.ok()) return bytes.status();
  return ParseSafetensors(*bytes, path, metadata, options);
}

absl::StatusOr<std::vector<std::pair<std::string, Tensor>>> ParseSafetensors(
    const std::string& bytes, const std::string& name,
    std::map<std::string, std::string>* metadata,
    const SafetensorsReadOptions& options) {
  if (bytes.size() < 8) {
    return Corrupt(name, absl::StrCat("truncated (", bytes.size(),
                                      " bytes; the header length alone is 8)"));
  }
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) {
    n |= static_cast<uint64_t>(static_cast<uint8_t>(bytes[i])) << (8 * i);
  }
  if (n > bytes.size() - 8) {
    return Corrupt(name, absl::StrCat("header length ", n,
                                      " runs past the end "
                                      "of the file (",
                                      bytes.size(), " bytes); truncated?"));
  }
  if (n > kMaxHeaderBytes) {
    return Corrupt(name, absl::StrCat("header length ", n, " is too large"));
  }
  if (n < 2 || bytes[8] != '{') {
    return Corrupt(name, "header is not a JSON object");
  }
  absl::StatusOr<nlohmann::json> parsed =
      ParseJson(absl::string_view(bytes).substr(8, n), "header");
  if (!parsed.ok()) {
    return Corrupt(name, absl::StrCat("malformed header JSON: ",
                                      parsed.status().message()));
  }
  const nlohmann::json& header = *parsed;
  if (!header.is_object()) return Corrupt(name, "header is not a JSON object");

  struct Entry {
    std::string name;
    std::string dtype;
    Shape shape;
    uint64_t begin, end;
  };
  std::vector<Entry> entries;
  std::map<std::string, std::string> meta;
  for (const auto& [key, value] : header.items()) {
    if (key == "__metadata__") {
      if (!value.is_object())
        return Corrupt(name, "__metadata__ is not an object");
      for (const auto& [mk, mv] : value.items()) {
        if (!mv.is_string()) {
          return Corrupt(name,
                         absl::StrCat("metadata \"", mk, "\" is not a string"));
        }
        meta[mk] = mv.get<std::string>();
      }
      continue;
    }
    const std::string where = absl::StrCat("tensor \"", key, "\"");
    if (!value.is_object()) return Corrupt(name, where + " is not an object");
    auto dtype = value.find("dtype");
    auto shape = value.find("shape");
    auto offsets = value.find("data_offsets");
    if (dtype == value.end() || !dtype->is_string() || shape == value.end() ||
        !shape->is_array() || offsets == value.end() || !offsets->is_array() ||
        offsets->size() != 2) {
      return Corrupt(name, where + " needs dtype, shape and data_offsets");
    }
    Entry e;
    e.name = key;
    e.dtype = dtype->get<std::string>();
    const int element_bytes = DtypeBytes(e.dtype);
    if (element_bytes == 0) {
      return Corrupt(name,
                     absl::StrCat(where, " has an unknown dtype ", e.dtype));
    }
    if (e.dtype != "F32" && !options.any_dtype) {
      return Corrupt(name, absl::StrCat(where, " has dtype ", e.dtype,
                                        "; only F32 is supported"));
    }
    for (const auto& d : *shape) {
      if (!d.is_number_unsigned()) {
        return Corrupt(name, where +
                                 " has a shape that is not a list of "
                                 "non-negative integers");
      }
      if (d.get<uint64_t>() >
          static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return Corrupt(name, where + " has a dimension out of range");
      }
      e.shape.push_back(d.get<int64_t>());
    }
    if (!(*offsets)[0].is_number_unsigned() ||
        !(*offsets)[1].is_number_unsigned()) {
      return Corrupt(name, where +
                               " has data_offsets that are not "
                               "non-negative integers");
    }
    e.begin = (*offsets)[0].get<uint64_t>();
    e.end = (*offsets)[1].get<uint64_t>();
    if (e.end < e.begin) {
      return Corrupt(
          name, absl::StrCat(where, " has data_offsets [", e.begin, ", ", e.end,
                             "] that end before they "
                             "begin"));
    }
    const int64_t elements = CheckedElements(e.shape);
    if (elements < 0 ||
        static_cast<uint64_t>(elements) * element_bytes != e.end - e.begin) {
      return Corrupt(name,
                     absl::StrCat(where, " has shape ", ShapeToString(e.shape),
                                  " but ", e.end - e.begin, " data bytes"));
    }
    entries.push_back(std::move(e));
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  const uint64_t data_size = bytes.size() - 8 - n;
  uint64_t expected = 0;
  for (const Entry& e : entries) {
    if (e.begin < expected) {
      return Corrupt(
          name, absl::StrCat("tensor \"", e.name, "\" data_offsets [", e.begin,
                             ", ", e.end, "] overlap the previous tensor"));
    }
    if (e.begin > expected) {
      return Corrupt(
          name,
          absl::StrCat("tensor \"", e.name, "\" data_offsets [", e.begin, ", ",
                       e.end, "] leave a gap after byte ", expected));
    }
    if (e.end > data_size) {
      return Corrupt(
          name, absl::StrCat("tensor \"", e.name, "\" data_offsets [", e.begin,
                             ", ", e.end, "] run past the data (", data_size,
                             " bytes); truncated?"));
    }
    expected = e.end;
  }
  if (expected != data_size) {
    return Corrupt(name,
                   absl::StrCat("the header describes ", expected,
                                " data bytes but the file holds ", data_size));
  }
  std::vector<std::pair<std::string, Tensor>> out;
  out.reserve(entries.size());
  const char* data = bytes.data() + 8 + n;
  for (Entry& e : entries) {
    if (!IsConvertibleFloat(e.dtype)) {
      if (options.skipped != nullptr) {
        options.skipped->push_back({e.name, e.dtype});
      }
      continue;
    }
    Tensor t(e.shape);
    ConvertToFloat(e.dtype, data + e.begin, t.size(), t.data());
    out.emplace_back(std::move(e.name), std::move(t));
  }
  if (metadata != nullptr) *metadata = std::move(meta);
  return out;
}

}  // namespace lockstep
