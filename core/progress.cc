// Progress line formatting.
#include "core/progress.h"

#include <cmath>

#include "absl/strings/str_format.h"

namespace lockstep {

std::string FormatDuration(double seconds) {
  if (seconds < 0 || !std::isfinite(seconds)) return "?";
  int64_t s = static_cast<int64_t>(std::llround(seconds));
  return absl::StrFormat("%d:%02d:%02d", s / 3600, (s / 60) % 60, s % 60);
}

std::string FormatThousands(double value) {
  int64_t v = static_cast<int64_t>(std::llround(value));
  bool negative = v < 0;
  std::string digits = std::to_string(negative ? -v : v);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return negative ? "-" + out : out;
}

std::string FormatProgress(const ProgressInfo& p) {
  std::string epoch =
      p.epochs > 0 ? absl::StrFormat("epoch %d/%d  ", p.epoch, p.epochs) : "";
  const std::string scale = p.loss_scale > 0
                                ? absl::StrFormat("  scale %g (%d skipped)",
                                                  p.loss_scale, p.skipped_steps)
                                : "";
  return absl::StrFormat(
      "[%s] %sstep %d/%d  loss %.4f  acc %.4f  lr %.1e%s  %s samples/s  ETA "
      "%s",
      p.job, epoch, p.step, p.total_steps, p.loss, p.accuracy, p.learning_rate,
      scale, FormatThousands(p.samples_per_sec), FormatDuration(p.eta_seconds));
}

}  // namespace lockstep
