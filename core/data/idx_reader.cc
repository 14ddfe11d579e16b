// IDX parsing with errors that name the field, the file and what is wrong.
#include "core/data/idx_reader.h"

#include <cerrno>
#include <cstring>
#include <memory>

#include "absl/numeric/int128.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/file_util.h"
#include "base/status_macros.h"
#include "core/data/data_file.h"

namespace lockstep {
namespace {

constexpr uint32_t kImageMagic = 0x00000803;
constexpr uint32_t kLabelMagic = 0x00000801;

std::string Quoted(const std::string& path) {
  return absl::StrCat("\"", path, "\"");
}

uint32_t BigEndian32(const std::string& data, size_t offset) {
  const auto* p = reinterpret_cast<const unsigned char*>(data.data() + offset);
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) |
         (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

}  // namespace


absl::StatusOr<Dataset> ReadIdxDataset(const std::string& images_field,
                                       const std::string& images_path,
                                       const std::string& labels_field,
                                       const std::string& labels_path,
                                       int64_t num_classes, double scale) {
  if (images_path.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(images_field, ": no file given"));
  }
  if (labels_path.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(labels_field, ": no file given"));
  }
  auto bad = [](const std::string& field, const std::string& path,
                const std::string& what) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": ", Quoted(path), ": ", what));
  };

  // Images: magic, count, rows, cols, then count*rows*cols bytes.
  ASSIGN_OR_RETURN(std::string images,
                   ReadMaybeGzipFile(images_field, images_path));
  if (images.size() >= 4 && BigEndian32(images, 0) != kImageMagic) {
    return bad(images_field, images_path,
               absl::StrFormat("not an IDX image file (magic 0x%08x, expected "
                               "0x%08x)",
                               BigEndian32(images, 0), kImageMagic));
  }
  if (images.size() < 16) {
    return bad(images_field, images_path,
               absl::StrCat("truncated: only ", images.size(),
                            " bytes, an IDX image header needs 16"));
  }
  const int64_t count = BigEndian32(images, 4);
  const int64_t rows = BigEndian32(images, 8);
  const int64_t cols = BigEndian32(images, 12);
  // Each size is below 2^32, so their product is below 2^96: counted in 128
  // bits, a hostile header (2^31 images of 2^16 x 2^16) cannot wrap around
  // to the number of bytes that follow. Past the checks it equals that
  // number, which fits in 64 bits.
  const absl::uint128 want_bytes = absl::uint128(static_cast<uint64_t>(count)) *
                                   static_cast<uint64_t>(rows) *
                                   static_cast<uint64_t>(cols);
  const int64_t follow = static_cast<int64_t>(images.size()) - 16;
  const std::string what_images =
      absl::StrCat(count, " images of ", rows, "x", cols);
  if (absl::uint128(static_cast<uint64_t>(follow)) < want_bytes) {
    return bad(images_field, images_path,
               absl::StrFormat("truncated: header says %s (%d bytes) but only "
                               "%d bytes follow",
                               what_images, want_bytes, follow));
  }
  const int64_t want = static_cast<int64_t>(want_bytes);
  if (follow > want) {
    return bad(images_field, images_path,
               absl::StrCat(follow - want, " bytes of trailing data after ",
                            what_images));
  }
  if (rows == 0 || cols == 0) {
    return bad(images_field, images_path,
               absl::StrCat("images of ", rows, "x", cols, " have no pixels"));
  }

  // Labels: magic, count, then count bytes.
  ASSIGN_OR_RETURN(std::string labels,
                   ReadMaybeGzipFile(labels_field, labels_path));
  if (labels.size() >= 4 && BigEndian32(labels, 0) != kLabelMagic) {
    return bad(labels_field, labels_path,
               absl::StrFormat("not an IDX label file (magic 0x%08x, expected "
                               "0x%08x)",
                               BigEndian32(labels, 0), kLabelMagic));
  }
  if (labels.size() < 8) {
    return bad(labels_field, labels_path,
               absl::StrCat("truncated: only ", labels.size(),
                            " bytes, an IDX label header needs 8"));
  }
  const int64_t label_count = BigEndian32(labels, 4);
  const int64_t label_follow = static_cast<int64_t>(labels.size()) - 8;
  if (label_follow < label_count) {
    return bad(labels_field, labels_path,
               absl::StrCat("truncated: header says ", label_count, " labels (",
                            label_count, " bytes) but only ", label_follow,
                            " bytes follow"));
  }
  if (label_follow > label_count) {
    return bad(
        labels_field, labels_path,
        absl::StrCat(label_follow - label_count,
                     " bytes of trailing data after ", label_count, " labels"));
  }
  if (label_count != count) {
    return absl::InvalidArgumentError(absl::StrCat(
        labels_field, ": ", Quoted(labels_path), " has ", label_count,
        " labels but ", Quoted(images_path), " has ", count, " images"));
  }

  Dataset d;
  d.sample_shape = {rows, cols};
  d.num_samples = count;
  d.num_classes = num_classes;
  d.labels.resize(count);
  for (int64_t i = 0; i < count; ++i) {
    const int label = static_cast<unsigned char>(labels[8 + i]);
    if (label >= num_classes) {
      return bad(labels_field, labels_path,
                 absl::StrCat("label ", label, " at index ", i,
                              " is out of range [0, ", num_classes, ")"));
    }
    d.labels[i] = label;
  }
  d.features.resize(want);
  const auto* px = reinterpret_cast<const unsigned char*>(images.data() + 16);
  for (int64_t i = 0; i < want; ++i)
    d.features[i] = static_cast<float>(px[i] / scale);
  d.source = absl::StrCat(images_path, " + ", labels_path);
  return d;
}

}  // namespace lockstep
