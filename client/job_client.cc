// JobService calls with deadlines and one status conversion each.
#include "client/job_client.h"

#include <algorithm>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "rpc/rpc_util.h"

namespace lockstep {

namespace v1 = lockstep::v1;

JobClient::JobClient(const std::string& address, const TlsFiles& tls,
                     std::string token, absl::Duration timeout)
    : address_(address),
      tls_(tls),
      token_(std::move(token)),
      timeout_(timeout),
      stub_(v1::JobService::NewStub(MakeChannel(address, tls))) {}

void JobClient::Prepare(grpc::ClientContext& c, bool deadline) const {
  if (deadline) c.set_deadline(absl::ToChronoTime(absl::Now() + timeout_));
  if (!token_.empty()) c.AddMetadata("authorization", "Bearer " + token_);
}

absl::Status JobClient::Check(const grpc::Status& status,
                              const char* what) const {
  return AddTlsHint(FromGrpc(status, absl::StrCat(what, address_)), tls_,
                    "the coordinator", "--tls-ca");
}

absl::StatusOr<v1::SubmitResponse> JobClient::Submit(
    const std::string& job_json, v1::SubmitMode mode) {
  grpc::ClientContext c;
  Prepare(c);
  v1::SubmitRequest req;
  req.set_job_json(job_json);
  req.set_mode(mode);
  v1::SubmitResponse resp;
  absl::Status s = Check(stub_->Submit(&c, req, &resp), "submit to ");
  if (!s.ok()) return s;
  return resp;
}

absl::StatusOr<v1::JobStatus> JobClient::Get(const std::string& name) {
  grpc::ClientContext c;
  Prepare(c);
  v1::GetJobRequest req;
  req.set_name(name);
  v1::JobStatus resp;
  absl::Status s = Check(stub_->GetJob(&c, req, &resp), "status from ");
  if (!s.ok()) return s;
  return resp;
}

absl::StatusOr<v1::ListJobsResponse> JobClient::List() {
  grpc::ClientContext c;
  Prepare(c);
  v1::ListJobsResponse resp;
  absl::Status s =
      Check(stub_->ListJobs(&c, v1::ListJobsRequest(), &resp), "list from ");
  if (!s.ok()) return s;
  return resp;
}

absl::StatusOr<v1::JobStatus> JobClient::Cancel(const std::string& name) {
  grpc::ClientContext c;
  Prepare(c);
  v1::CancelJobRequest req;
  req.set_name(name);
  v1::JobStatus resp;
  absl::Status s = Check(stub_->CancelJob(&c, req, &resp), "cancel at ");
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
  while (true) {
    grpc::ClientContext c;
    Prepare(c, /*deadline=*/false);
    v1::WatchJobRequest req;
    req.set_name(name);
    req.set_events_seen(events_seen);
    auto reader = stub_->WatchJob(&c, req);
    v1::JobStatus msg;
    while (reader->Read(&msg)) {
      unreachable_since = absl::InfiniteFuture();
      on_update(msg);
      events_seen = msg.events_total();
      last = msg;
      any = true;
    }
    absl::Status s = Check(reader->Finish(), "watch at ");
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
    if (!any && !s.ok()) return s;  // never reached: say so at once
    if (now - unreachable_since > kReconnectFor) {
      return s.ok() ? absl::UnavailableError(absl::StrCat(
                          "watch at ", address_, ": the stream ended early"))
                    : s;
    }
    absl::SleepFor(absl::Seconds(1));
  }
}

absl::StatusOr<v1::ListJobFilesResponse> JobClient::ListFiles(
    const std::string& job, const std::string& prefix) {
  grpc::ClientContext c;
  Prepare(c);
  v1::ListJobFilesRequest req;
  req.set_job(job);
  req.set_prefix(prefix);
  v1::ListJobFilesResponse resp;
  absl::Status s =
      Check(stub_->ListJobFiles(&c, req, &resp), "list files from ");
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
        auto reader = stub_->ReadJobFile(&c, req);
        v1::FileChunk chunk;
        bool stopped = false;
        while (reader->Read(&chunk)) {
          if (!on_chunk(chunk)) {
            stopped = true;
            c.TryCancel();
            break;
          }
        }
        absl::Status s = Check(reader->Finish(), "read a file from ");
        // The stream was cancelled by this side: its status says nothing.
        return stopped ? absl::OkStatus() : s;
      };
  return lockstep::FetchFile(file.path(), stream, sink, options);
}

}  // namespace lockstep
