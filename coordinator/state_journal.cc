// StateJournal (see state_journal.h).
#include "coordinator/state_journal.h"

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "core/job/job_spec.h"
#include "proto/journal.pb.h"

namespace lockstep {
namespace {

using Worker = Membership::Worker;
using Job = JobTable::Job;

constexpr size_t kMaxJournaledEvents = 500;
constexpr int kMaxJournaledRank = 1 << 20;
// The journal's sequence and next worker number: far past any real count
// (one a second for 10^11 years), far below int64's end.
constexpr int64_t kMaxJournalCounter = int64_t{1} << 62;

double UnixSeconds(absl::Time t) {
  return t == absl::InfinitePast() ? 0 : absl::ToUnixMicros(t) / 1e6;
}
// A journaled time. NaN and values past year 5000 (a damaged or hostile
// file: the conversion to microseconds would be undefined) read as the
// far past and year 5000, so nothing waits on them forever.
absl::Time FromUnixSeconds(double s) {
  constexpr double kLatest = 95617584000.0;  // 5000-01-01
  if (!(s > 0)) return absl::InfinitePast();
  return absl::FromUnixMicros(static_cast<int64_t>(std::min(s, kLatest) * 1e6));
}

}  // namespace

StateJournal::StateJournal(std::shared_ptr<JournalStore> store)
    : store_(std::move(store)) {}

absl::Status StateJournal::Write(const Membership& members,
                                 const JobTable& jobs) {
  lockstep::v1::Journal j;
  // Saturates where a load stops accepting it: a journal loaded at the
  // bound writes the bound again, and loads again.
  sequence_ = std::min(sequence_ + 1, kMaxJournalCounter);
  j.set_sequence(sequence_);
  j.set_next_worker(members.next_order());
  for (const auto& [id, w] : members.workers()) {
    if (w.lost) continue;  // a lost worker must register again anyway
    auto* out = j.add_workers();
    out->set_id(w.id);
    *out->mutable_info() = w.info;
    out->mutable_info()->set_name(w.name);
    out->set_order(w.order);
    out->set_job(w.job);
    out->set_rank(w.rank);
  }
  for (const Job* each : jobs.InOrder()) {
    const Job& job = *each;
    auto* out = j.add_jobs();
    out->set_job_json(job.job_json);
    *out->mutable_status() = job.status;
    out->mutable_status()->clear_events();
    out->mutable_status()->clear_workers();
    for (const std::string& id : job.ranks) out->add_ranks(id);
    out->set_start_step(job.start_step);
    out->set_collective(job.collective);
    for (const auto& [n, count] : job.failures)
      (*out->mutable_failures())[n] = count;
    out->set_recovering_since_unix(UnixSeconds(job.recovering_since));
    out->set_next_start_unix(UnixSeconds(job.next_start));
    out->set_planned_recovery(job.planned_recovery);
    out->set_started_unix(UnixSeconds(job.started));
    for (const auto& [rank, f] : job.finished) *out->add_finished() = f;
    out->set_memory_step(job.memory_step);
    out->set_memory_donor(job.memory_donor);
    out->set_memory_fingerprint(job.memory_fingerprint);
    for (int d : job.memory_part_donors) out->add_memory_part_donors(d);
    out->set_regroup_generation(job.regroup_generation);
    out->set_growing_by(job.growing_by);
    out->set_nccl_id(job.nccl_id);
    const size_t first = job.events.size() > kMaxJournaledEvents
                             ? job.events.size() - kMaxJournaledEvents
                             : 0;
    for (size_t i = first; i < job.events.size(); ++i) {
      out->add_events(job.events[i]);
    }
  }
  return store_->Write(j);
}

absl::StatusOr<StateJournal::Found> StateJournal::Read(
    absl::Time now, const std::function<absl::Status(Job&)>& open_files,
    Membership* members, JobTable* jobs, std::vector<Job*>* resumed) {
  ASSIGN_OR_RETURN(std::optional<lockstep::v1::Journal> read, store_->Read());
  if (!read.has_value()) return Found();
  const lockstep::v1::Journal& j = *read;
  auto damaged = [this](const std::string& why) {
    return store_->Damaged(why);
  };
  // Both count up by one per write / registration: a damaged value near
  // int64's end would overflow there.
  if (j.sequence() < 0 || j.sequence() > kMaxJournalCounter) {
    return damaged(absl::StrCat("sequence ", j.sequence(), " out of range"));
  }
  if (j.next_worker() < 0 || j.next_worker() > kMaxJournalCounter) {
    return damaged(
        absl::StrCat("next worker number ", j.next_worker(), " out of range"));
  }
  sequence_ = j.sequence();
  members->set_next_order(j.next_worker());
  for (const auto& in : j.workers()) {
    Worker w;
    w.id = in.id();
    w.info = in.info();
    w.name = in.info().name();
    w.order = in.order();
    w.job = in.job();
    // A rank indexes rank tables and sizes shard arithmetic: a damaged one
    // must not reach them.
    if (in.rank() < -1 || in.rank() >= kMaxJournaledRank) {
      return damaged(absl::StrCat("worker ", in.id(), ": rank ", in.rank(),
                                  " out of range"));
    }
    w.rank = in.rank();
    // It has worker_timeout from now to heartbeat again.
    w.last_heartbeat = now;
    members->Add(std::move(w));
  }
  for (const auto& in : j.jobs()) {
    auto job = std::make_unique<Job>();
    absl::StatusOr<JobSpec> spec = ParseJobSpec(in.job_json());
    if (!spec.ok()) {
      return damaged(absl::StrCat("job ", in.status().name(), ": ",
                                  spec.status().message()));
    }
    job->spec = *std::move(spec);
    job->name = job->spec.name;
    if (jobs->Find(job->name) != nullptr) {
      return damaged(absl::StrCat("job ", job->name, " appears twice"));
    }
    job->job_json = in.job_json();
    job->status = in.status();
    job->ranks.assign(in.ranks().begin(), in.ranks().end());
    job->start_step = in.start_step();
    job->collective = in.collective();
    for (const auto& [n, count] : in.failures()) job->failures[n] = count;
    job->recovering_since = FromUnixSeconds(in.recovering_since_unix());
    job->next_start = FromUnixSeconds(in.next_start_unix());
    job->planned_recovery = in.planned_recovery();
    job->started = FromUnixSeconds(in.started_unix());
    job->submitted = FromUnixSeconds(in.status().submitted_unix_seconds());
    job->events.assign(in.events().begin(), in.events().end());
    // Ranks index the rank table and its workers: a damaged one must not.
    const int world = static_cast<int>(job->ranks.size());
    for (const lockstep::v1::FinishRequest& f : in.finished()) {
      if (f.rank() < 0 || f.rank() >= world) {
        return damaged(absl::StrFormat(
            "job %s: a finish report of rank %d in a world of %d", job->name,
            f.rank(), world));
      }
      job->finished[f.rank()] = f;
      job->fingerprints[f.steps()][f.rank()] = f.fingerprint();
    }
    job->memory_step = in.memory_step();
    // No memory start: no donor (-1), whatever an older journal left.
    job->memory_donor = in.memory_step() > 0 ? in.memory_donor() : -1;
    job->memory_fingerprint = in.memory_fingerprint();
    job->memory_part_donors.assign(in.memory_part_donors().begin(),
                                   in.memory_part_donors().end());
    std::vector<int> donors = job->memory_part_donors;
    if (job->memory_donor != -1) donors.push_back(job->memory_donor);
    for (int d : donors) {
      if (d < 0 || d >= world) {
        return damaged(
            absl::StrFormat("job %s: memory donor rank %d in a world of %d",
                            job->name, d, world));
      }
    }
    job->regroup_generation = in.regroup_generation();
    job->growing_by = std::max<int64_t>(0, in.growing_by());
    if (!in.nccl_id().empty() && in.nccl_id().size() != kNcclUniqueIdBytes) {
      return damaged(
          absl::StrFormat("job %s: an NCCL id of %d bytes (%d expected)",
                          job->name, in.nccl_id().size(), kNcclUniqueIdBytes));
    }
    job->nccl_id = in.nccl_id();
    // The message is "<reason>; recovering: <what it waits for>".
    job->lost_reason = in.status().message().substr(
        0, in.status().message().find("; recovering"));
    if (job->status.state() == lockstep::v1::RECOVERING) {
      job->recovering_since = now;  // the replacement wait starts again
    }
    RETURN_IF_ERROR(open_files(*job));
    for (const std::string& id : job->ranks) {
      if (IsTerminal(job->status.state())) break;  // its ranks are history
      if (members->Find(id) == nullptr) {
        // A rank whose worker was already lost: keep the rank table whole.
        // Its process is not known (the journal keeps only live workers).
        Worker gone;
        gone.id = id;
        gone.lost = true;
        gone.lost_at = now;
        gone.last_heartbeat = now;
        members->Add(std::move(gone));
      }
    }
    Job& ref = jobs->Put(std::move(job));
    if (!IsTerminal(ref.status.state())) {
      ref.events.push_back(absl::StrFormat(
          "coordinator restarted: %s at generation %d taken over from the "
          "journal",
          JobStateName(ref.status.state()), ref.status.generation()));
      resumed->push_back(&ref);
    }
  }
  return Found{true, j.jobs_size(), j.workers_size()};
}

}  // namespace lockstep
