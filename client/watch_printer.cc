// What the watching verbs print (see watch_printer.h).
#include "client/watch_printer.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/progress.h"

namespace lockstep {

const char* StateName(v1::JobState s) { return v1::JobState_Name(s).c_str(); }

std::string ProgressLine(const v1::JobStatus& s) {
  ProgressInfo info;
  info.job = s.name();
  info.epoch = s.epoch();
  info.epochs = s.epochs();
  info.step = s.step();
  info.total_steps = s.total_steps();
  info.loss = s.loss();
  info.accuracy = s.accuracy();
  info.learning_rate = s.learning_rate();
  info.samples_per_sec = s.samples_per_sec();
  info.eta_seconds = s.eta_seconds();
  return absl::StrFormat("%s  workers %d/%d", FormatProgress(info),
                         s.workers_alive(), s.workers_needed());
}

bool Waiting(const v1::JobStatus& s) {
  return s.state() == v1::PENDING || s.state() == v1::RECOVERING;
}

std::string StateWords(const v1::JobStatus& s) {
  if (s.state() == v1::RECOVERING && s.recovery() == "grow") {
    return "RECOVERING (growing)";
  }
  if (s.state() == v1::RECOVERING && s.recovery() == "leave") {
    return "RECOVERING (after a planned leave)";
  }
  return StateName(s.state());
}

std::string WaitingLine(const v1::JobStatus& s) {
  if (!Waiting(s) || s.waiting_for().empty()) return "";
  return absl::StrCat(
      "waiting for ", s.waiting_for(),
      s.waiting_seconds_left() >= 0
          ? absl::StrFormat(": %d s left", static_cast<int64_t>(std::ceil(
                                               s.waiting_seconds_left())))
          : "");
}

bool WatchPrinter::IsEnd(const v1::JobStatus& s) {
  return s.state() == v1::SUCCEEDED || s.state() == v1::FAILED ||
         s.state() == v1::CANCELLED;
}

void WatchPrinter::PrintEvents(const v1::JobStatus& s) {
  // The job's closing event ("SUCCEEDED: 1955 steps, ...") is what the
  // verb's last line says again with the job's name: printed once.
  const std::string closing =
      IsEnd(s) ? absl::StrCat(StateName(s.state()),
                              s.message().empty() ? "" : ": ", s.message())
               : std::string();
  for (const std::string& e : s.events()) {
    if (closing.empty() || e != closing) out_ << e << "\n";
  }
}

void WatchPrinter::operator()(const v1::JobStatus& s) {
  // The final progress line goes before the job's closing events; but when
  // this is the first progress the whole run is in these events, and its
  // epochs come first.
  const bool whole_run = IsEnd(s) && last_step_ < 0;
  if (!IsEnd(s) || whole_run) PrintEvents(s);
  const auto now = std::chrono::steady_clock::now();
  // Once a second, at each new epoch and at the end (so a short job
  // shows its figures too).
  const bool done = s.state() == v1::SUCCEEDED;
  if ((s.state() == v1::RUNNING || done) && s.total_steps() > 0 &&
      s.step() != last_step_ &&
      (now - last_print_ >= std::chrono::seconds(1) ||
       s.epoch() != last_epoch_ || done)) {
    out_ << ProgressLine(s) << "\n";
    last_step_ = s.step();
    last_epoch_ = s.epoch();
    last_print_ = now;
  }
  if (IsEnd(s) && !whole_run) PrintEvents(s);
  // A waiting job: each change once, then a countdown of what it waits
  // for (every second in its last ten, else every ten).
  if (Waiting(s)) {
    // A state change: the state, why (the message up to what the job
    // waits for, which may change as workers come and go) and the
    // generation.
    const std::string why =
        s.message().substr(0, s.message().find("; recovering: "));
    const std::string key =
        absl::StrCat(StateWords(s), "|", why, "|", s.generation());
    if (key != last_head_) {
      out_ << "[" << s.name() << "] " << StateWords(s) << ": " << s.message()
           << "\n";
      last_head_ = key;
      last_left_ = -1;
      last_waiting_.clear();
    }
    if (!s.waiting_for().empty() && s.waiting_seconds_left() >= 0) {
      const int64_t left =
          static_cast<int64_t>(std::ceil(s.waiting_seconds_left()));
      if (s.waiting_for() != last_waiting_ ||
          (left != last_left_ && (left <= 10 || left % 10 == 0))) {
        out_ << "[" << s.name() << "] " << WaitingLine(s) << "\n";
        last_waiting_ = s.waiting_for();
        last_left_ = left;
      }
    }
  } else {
    last_head_.clear();
    last_waiting_.clear();
  }
  out_.flush();
}

}  // namespace lockstep
