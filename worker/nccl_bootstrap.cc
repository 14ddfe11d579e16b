// BootstrapNcclId: rank 0 publishes, the others long-poll, both retrying an
// unreachable coordinator until the deadline.
#include "worker/nccl_bootstrap.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "rpc/rpc_util.h"

namespace lockstep {
namespace {

constexpr absl::Duration kRetryInterval = absl::Seconds(1);
// The coordinator caps one FetchNcclId wait at 300 s; longer waits loop.
constexpr absl::Duration kMaxFetchWait = absl::Seconds(300);
// A call's gRPC deadline runs this much past the wait it asks for, so the
// coordinator's own DeadlineExceeded (which names rank 0) arrives first.
constexpr absl::Duration kCallGrace = absl::Seconds(2);

std::chrono::system_clock::time_point ToChrono(absl::Time t) {
  return absl::ToChronoTime(t);
}

lockstep::v1::NcclIdRequest Request(const std::string& worker_id,
                                    const std::string& job,
                                    int64_t generation) {
  lockstep::v1::NcclIdRequest req;
  req.set_worker_id(worker_id);
  req.set_job(job);
  req.set_generation(generation);
  return req;
}

// Sleeps before the next try of an UNAVAILABLE call; false when the
// deadline leaves no time for one.
bool WaitToRetry(absl::Time deadline) {
  const absl::Duration left = deadline - absl::Now();
  if (left <= absl::ZeroDuration()) return false;
  absl::SleepFor(std::min(kRetryInterval, left));
  return absl::Now() < deadline;
}

absl::StatusOr<std::string> Publish(
    const CoordinatorRunner& run, lockstep::v1::NcclIdRequest req,
    absl::Time deadline, absl::Duration timeout, absl::Duration poll,
    const std::function<void(const absl::Status&)>& on_unavailable) {
  while (true) {
    const absl::Time call_deadline = std::min(deadline, absl::Now() + poll);
    const absl::Status s =
        run([&](lockstep::v1::Coordinator::StubInterface* coordinator) {
          grpc::ClientContext context;
          context.set_deadline(ToChrono(call_deadline));
          lockstep::v1::NcclIdResponse resp;
          return FromGrpc(coordinator->PublishNcclId(&context, req, &resp),
                          "PublishNcclId");
        });
    if (s.ok()) return req.unique_id();
    if (absl::IsUnavailable(s) && on_unavailable) on_unavailable(s);
    if (absl::IsUnavailable(s) && WaitToRetry(deadline)) continue;
    // A coordinator that answered nothing within `poll` (paused): again,
    // on the next one where there are several.
    if (absl::IsDeadlineExceeded(s) && absl::Now() < deadline) continue;
    if (absl::IsUnavailable(s)) {
      return absl::DeadlineExceededError(absl::StrCat(
          "the coordinator stayed unreachable for ",
          absl::FormatDuration(timeout), " (last: ", s.message(), ")"));
    }
    return s;
  }
}

absl::StatusOr<std::string> Fetch(
    const CoordinatorRunner& run, lockstep::v1::NcclIdRequest req,
    absl::Time deadline, absl::Duration timeout, absl::Duration poll,
    const std::function<void(const absl::Status&)>& on_unavailable) {
  absl::Status last;
  while (true) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError(absl::StrCat(
          "rank 0 did not publish it within ", absl::FormatDuration(timeout),
          last.ok() ? "" : absl::StrCat(" (last: ", last.message(), ")")));
    }
    const absl::Duration wait = std::min({left, poll, kMaxFetchWait});
    req.set_wait_seconds(absl::ToDoubleSeconds(wait));
    lockstep::v1::NcclIdResponse resp;
    absl::Status not_yet;
    last = run([&](lockstep::v1::Coordinator::StubInterface* coordinator) {
      grpc::ClientContext context;
      const absl::Time call_deadline = absl::Now() + wait + kCallGrace;
      context.set_deadline(ToChrono(call_deadline));
      absl::Status s = FromGrpc(coordinator->FetchNcclId(&context, req, &resp),
                                "FetchNcclId");
      // The coordinator's own answer that rank 0 has not published yet
      // (given at `wait`, before the call's deadline): it is alive, so the
      // runner must not take it for a paused one and fail over.
      if (absl::IsDeadlineExceeded(s) && absl::Now() < call_deadline) {
        not_yet = s;
        return absl::OkStatus();
      }
      return s;
    });
    if (!not_yet.ok()) last = not_yet;
    if (last.ok()) return resp.unique_id();
    if (absl::IsUnavailable(last)) {
      if (on_unavailable) on_unavailable(last);
      WaitToRetry(deadline);
    } else if (!absl::IsDeadlineExceeded(last)) {
      return last;  // the generation is over, not our rank, no such job
    }
  }
}

}  // namespace

absl::StatusOr<std::string> BootstrapNcclId(
    const CoordinatorRunner& run, const std::string& worker_id,
    const std::string& job, int64_t generation, int rank,
    std::function<absl::StatusOr<std::string>()> make_id,
    absl::Duration timeout, absl::Duration poll,
    std::function<void(const absl::Status&)> on_unavailable) {
  const absl::Time deadline = absl::Now() + timeout;
  lockstep::v1::NcclIdRequest req = Request(worker_id, job, generation);
  if (rank != 0) {
    absl::StatusOr<std::string> id =
        Fetch(run, std::move(req), deadline, timeout, poll, on_unavailable);
    if (id.ok()) return id;
    return AnnotateStatus(
        id.status(),
        absl::StrFormat("while fetching the NCCL id of job %s generation %d "
                        "from the coordinator (as rank %d)",
                        job, generation, rank));
  }
  const std::string context = absl::StrFormat(
      "while publishing the NCCL id of job %s generation %d to the "
      "coordinator (as rank 0)",
      job, generation);
  absl::StatusOr<std::string> made = make_id();
  if (!made.ok()) return AnnotateStatus(made.status(), context);
  req.set_unique_id(*std::move(made));
  absl::StatusOr<std::string> id =
      Publish(run, std::move(req), deadline, timeout, poll, on_unavailable);
  if (id.ok()) return id;
  return AnnotateStatus(id.status(), context);
}

}  // namespace lockstep
