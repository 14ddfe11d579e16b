// JobService calls with deadlines and one status conversion each.
#include "client/job_client.h"

#include <algorithm>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "rpc/rpc_util.h"

namespace lockstep {

namespace v1 = lockstep::v1;

JobClient::JobClient(const std::string& address, const TlsFiles& tls,
                     std::string token, absl::Duration timeout)
    : addresses_(absl::StrSplit(address, ',')),
      tls_(tls),
      token_(std::move(token)),
      timeout_(timeout) {
  for (const std::string& a : addresses_) {
    stubs_.push_back(v1::JobService::NewStub(MakeChannel(a, tls)));
  }
}

void JobClient::Prepare(grpc::ClientContext& c, bool deadline) const {
  if (deadline) c.set_deadline(absl::ToChronoTime(absl::Now() + timeout_));
  if (!token_.empty()) c.AddMetadata("authorization", "Bearer " + token_);
}

absl::Status JobClient::Check(const grpc::Status& status, const char* what,
                              int coordinator) const {
  return AddTlsHint(
      FromGrpc(status, absl::StrCat(what, addresses_[coordinator])), tls_,
      "the coordinator", "--tls-ca");
}

absl::Status JobClient::Call(
    const char* what,
    const std::function<grpc::Status(Stub*, grpc::ClientContext*)>& call) {
  const int n = static_cast<int>(stubs_.size());
  absl::Status s;
  for (int i = 0; i < n; ++i) {
    const int at = (current_ + i) % n;
    grpc::ClientContext c;
    Prepare(c);
    s = Check(call(stubs_[at].get(), &c), what, at);
    // DEADLINE_EXCEEDED: a paused coordinator (every call here may be
    // repeated: a submission of the same spec returns the job made).
    if (!absl::IsUnavailable(s) && !(n > 1 && absl::IsDeadlineExceeded(s))) {
      current_ = at;
      return s;
    }
  }
  return s;
}

absl::StatusOr<v1::SubmitResponse> JobClient::Submit(
    const std::string& job_json, v1::SubmitMode mode) {
  v1::SubmitRequest req;
  req.set_job_json(job_json);
  req.set_mode(mode);
  v1::SubmitResponse resp;
  // A retry on the next coordinator is safe: the same spec under the same
  // name returns the job the first call made (SubmitResponse.existing).
  absl::Status s = Call("submit to ", [&](Stub* stub, grpc::ClientContext* c) {
    return stub->Submit(c, req, &resp);
  });
  if (!s.ok()) return s;
  return resp;
}

absl::StatusOr<v1::JobStatus> JobClient::Get(const std::string& name) {
  v1::GetJobRequest req;
  req.set_name(name);
  v1::JobStatus resp;
  absl::Status s =
      Call("status from ", [&](Stub* stub, grpc::ClientContext* c) {
        return stub->GetJob(c, req, &resp);
      });
  if (!s.ok()) return s;
  return resp;
}

absl::StatusOr<v1::ListJobsResponse> JobClient::List() {
  v1::ListJobsResponse resp;
  absl::Status s = Call("list from ", [&](Stub* stub, grpc::ClientContext* c) {
    return stub->ListJobs(c, v1::ListJobsRequest(), &resp);
  });
  if (!s.ok()) return s;
  return resp;
}

absl::StatusOr<v1::JobStatus> JobClient::Cancel(const std::string& name) {
  v1::CancelJobRequest req;
  req.set_name(name);
  v1::JobStatus resp;
  absl::Status s = Call("cancel at ", [&](Stub* stub, grpc::ClientContext* c) {
    return stub->CancelJob(c, req, &resp);
  });
  if (!s.ok()) return s;
  return resp;
}

absl::StatusOr<v1::JobStatus> JobClient::Watch(
    const std::string& name,
    const std::function<void(const v1::JobStatus&)>& on_update) {
  v1::JobStatus last;
  bool any = false;
  int64_t events_seen = 0;
  // A coordinator that restarts (it resumes from its journal) is waited for
  // this long; the watch goes on where it left off.
  const absl::Duration kReconnectFor = absl::Seconds(60);
  absl::Time unreachable_since = absl::InfiniteFuture();
  int unanswered = 0;
  while (true) {
    grpc::ClientContext c;
    Prepare(c, /*deadline=*/false);
    v1::WatchJobRequest req;
    req.set_name(name);
    req.set_events_seen(events_seen);
    const int at = current_;
    auto reader = stubs_[at]->WatchJob(&c, req);
    v1::JobStatus msg;
    while (reader->Read(&msg)) {
      unreachable_since = absl::InfiniteFuture();
      on_update(msg);
      events_seen = msg.events_total();
      last = msg;
      any = true;
    }
    absl::Status s = Check(reader->Finish(), "watch at ", at);
    // Another coordinator may lead now: the next attempt asks it.
    if (absl::IsUnavailable(s)) current_ = (at + 1) % stubs_.size();
    if (any && (last.state() == v1::SUCCEEDED || last.state() == v1::FAILED ||
                last.state() == v1::CANCELLED)) {
      return last;
    }
    if (!s.ok() && !absl::IsUnavailable(s)) return s;
    const absl::Time now = absl::Now();
    if (unreachable_since == absl::InfiniteFuture()) {
      unreachable_since = now;
      if (any) {
        std::cerr << s.message() << "; reconnecting for up to "
                  << absl::FormatDuration(kReconnectFor) << std::endl;
      }
    }
    if (!any && !s.ok()) {
      // Never reached: say so at once, once every coordinator was asked.
      if (++unanswered >= static_cast<int>(stubs_.size())) return s;
      continue;
    }
    if (now - unreachable_since > kReconnectFor) {
      return s.ok()
                 ? absl::UnavailableError(absl::StrCat(
                       "watch at ", addresses_[at], ": the stream ended early"))
                 : s;
    }
    absl::SleepFor(absl::Seconds(1));
  }
}

absl::StatusOr<v1::ListJobFilesResponse> JobClient::ListFiles(
    const std::string& job, const std::string& prefix) {
  v1::ListJobFilesRequest req;
  req.set_job(job);
  req.set_prefix(prefix);
  v1::ListJobFilesResponse resp;
  absl::Status s =
      Call("list files from ", [&](Stub* stub, grpc::ClientContext* c) {
        return stub->ListJobFiles(c, req, &resp);
      });
  if (!s.ok()) return s;
  return resp;
}

absl::Status JobClient::FetchFile(const std::string& job,
                                  const v1::JobFile& file, FileSink& sink,
                                  const FetchOptions& options) {
  ChunkStream stream =
      [&](int64_t offset, int64_t expect_size,
          const std::function<bool(const v1::FileChunk&)>& on_chunk) {
        grpc::ClientContext c;
        Prepare(c, /*deadline=*/false);
        const double mib_left =
            std::max<int64_t>(0, file.size() - offset) / double(1 << 20);
        c.set_deadline(absl::ToChronoTime(absl::Now() + timeout_ +
                                          absl::Seconds(mib_left)));
        v1::ReadJobFileRequest req;
        req.set_job(job);
        req.set_path(file.path());
        req.set_offset(offset);
        req.set_expect_size(expect_size);
        const int at = current_;
        auto reader = stubs_[at]->ReadJobFile(&c, req);
        v1::FileChunk chunk;
        bool stopped = false;
        while (reader->Read(&chunk)) {
          if (!on_chunk(chunk)) {
            stopped = true;
            c.TryCancel();
            break;
          }
        }
        absl::Status s = Check(reader->Finish(), "read a file from ", at);
        // The stream was cancelled by this side: its status says nothing.
        return stopped ? absl::OkStatus() : s;
      };
  return lockstep::FetchFile(file.path(), stream, sink, options);
}

}  // namespace lockstep
