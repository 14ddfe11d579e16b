// CSV parsing with errors that name "file":line and the field.
#include "core/data/csv_reader.h"

#include <cmath>
#include <cstdlib>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "core/data/data_file.h"

namespace lockstep {

absl::StatusOr<Dataset> ReadCsvDataset(const std::string& field,
                                       const std::string& path, bool header,
                                       int64_t num_classes, double scale) {
  if (path.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": no file given"));
  }
  // Also accepts a gzip-compressed CSV.
  ASSIGN_OR_RETURN(std::string text, ReadMaybeGzipFile(field, path));
  const std::string where = absl::StrCat(field, ": \"", path, "\"");
  auto bad_line = [&](int64_t line, const std::string& what) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ":", line, ": ", what));
  };

  Dataset d;
  d.num_classes = num_classes;
  d.source = path;
  int64_t width = 0;  // fields per row, fixed by the first data row
  int64_t line_no = 0;
  bool header_skipped = !header;
  std::vector<absl::string_view> fields;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    if (!header_skipped) {
      header_skipped = true;
      continue;
    }
    fields = absl::StrSplit(line, ',');
    const int64_t n = static_cast<int64_t>(fields.size());
    if (width == 0) {
      if (n < 2) {
        return bad_line(line_no,
                        absl::StrCat("expected a label and at least one "
                                     "feature, got ",
                                     n, " field"));
      }
      width = n;
      d.sample_shape = {width - 1};
    } else if (n != width) {
      return bad_line(line_no,
                      absl::StrCat("expected ", width, " fields, got ", n));
    }
    const absl::string_view label_text = absl::StripAsciiWhitespace(fields[0]);
    int64_t label = 0;
    if (!absl::SimpleAtoi(label_text, &label)) {
      return bad_line(line_no, absl::StrCat("field 1: label is not an "
                                            "integer: \"",
                                            label_text, "\""));
    }
    if (label < 0 || label >= num_classes) {
      return bad_line(line_no,
                      absl::StrCat("label ", label, " is out of range [0, ",
                                   num_classes, ")"));
    }
    d.labels.push_back(static_cast<int32_t>(label));
    for (int64_t f = 1; f < n; ++f) {
      const absl::string_view t = absl::StripAsciiWhitespace(fields[f]);
      double v = 0;
      if (!absl::SimpleAtod(t, &v)) {
        return bad_line(line_no, absl::StrCat("field ", f + 1,
                                              ": not a number: \"", t, "\""));
      }
      // Finite as the float it is stored as: 1e39 is a finite double but
      // an infinite float.
      const float value = static_cast<float>(v / scale);
      if (!std::isfinite(v) || !std::isfinite(value)) {
        return bad_line(
            line_no, absl::StrCat("field ", f + 1, ": not a finite number: \"",
                                  t, "\""));
      }
      d.features.push_back(value);
    }
  }
  if (d.labels.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": no data rows", header ? " (after the header line)" : ""));
  }
  d.num_samples = static_cast<int64_t>(d.labels.size());
  return d;
}

}  // namespace lockstep
