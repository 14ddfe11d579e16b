// What `lockstep submit --wait` and `watch` print as a job's status
// streams in, and the status words the other job verbs share.
#ifndef LOCKSTEP_CLIENT_WATCH_PRINTER_H_
#define LOCKSTEP_CLIENT_WATCH_PRINTER_H_

#include <chrono>
#include <cstdint>
#include <ostream>
#include <string>

#include "proto/jobs.pb.h"

namespace lockstep {

const char* StateName(v1::JobState s);
// "[job] epoch 2/3  step 10/15  loss ...  workers 2/2".
std::string ProgressLine(const v1::JobStatus& s);
// PENDING or RECOVERING: the job waits for workers, a back-off, ...
bool Waiting(const v1::JobStatus& s);
// The state as a person reads it: a planned grow is not a failure.
std::string StateWords(const v1::JobStatus& s);
// "waiting for the restart back-off: 3 s left" ("" when it waits for
// nothing in particular).
std::string WaitingLine(const v1::JobStatus& s);

// Prints a job's events as they arrive, a progress line at most once a
// second (and at each new epoch and the end), and a waiting job's
// countdown. Events come in the order the job had them; the final
// progress line goes before the job's closing events, or after all of
// them when the whole run arrived at once (a job that ended before the
// first status came).
class WatchPrinter {
 public:
  explicit WatchPrinter(std::ostream& out) : out_(out) {}
  static bool IsEnd(const v1::JobStatus& s);
  void operator()(const v1::JobStatus& s);

 private:
  // The events of `s`, without the closing one the verb's last line
  // repeats when `s` is the end.
  void PrintEvents(const v1::JobStatus& s);

  std::ostream& out_;
  int64_t last_step_ = -1;
  int64_t last_epoch_ = -1;
  std::string last_head_, last_waiting_;
  int64_t last_left_ = -1;
  std::chrono::steady_clock::time_point last_print_;
};

}  // namespace lockstep

#endif  // LOCKSTEP_CLIENT_WATCH_PRINTER_H_
