// The job client library: the JobService calls behind `lockstep submit`,
// `status`, `watch`, `list` and `cancel`, with errors as absl::Status.
#ifndef LOCKSTEP_CLIENT_JOB_CLIENT_H_
#define LOCKSTEP_CLIENT_JOB_CLIENT_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/file_fetch.h"
#include "proto/jobs.grpc.pb.h"
#include "rpc/tls.h"

namespace lockstep {

class JobClient {
 public:
  // `address` host:port of the coordinator, or several comma-separated
  // (coordinators in standby behind etcd: a call answered UNAVAILABLE, as
  // a standby answers naming the leader, goes on to the next one, each
  // once), over TLS with `tls` when it is on; a non-empty `token` goes
  // with every call as `authorization: Bearer <token>`. Calls fail after
  // `timeout` (Watch: the wait between two snapshots). A failure that may
  // be a TLS mismatch says so.
  JobClient(const std::string& address, const TlsFiles& tls, std::string token,
            absl::Duration timeout = absl::Seconds(30));

  absl::StatusOr<lockstep::v1::SubmitResponse> Submit(
      const std::string& job_json,
      lockstep::v1::SubmitMode mode = lockstep::v1::SUBMIT_NEW);
  absl::StatusOr<lockstep::v1::JobStatus> Get(const std::string& name);
  absl::StatusOr<lockstep::v1::ListJobsResponse> List();
  absl::StatusOr<lockstep::v1::JobStatus> Cancel(const std::string& name);
  // Calls `on_update` for every snapshot until the job ends; returns the
  // last snapshot. Unavailable if the coordinator goes away.
  absl::StatusOr<lockstep::v1::JobStatus> Watch(
      const std::string& name,
      const std::function<void(const lockstep::v1::JobStatus&)>& on_update);
  // The files of a job's folder on the coordinator's storage (under
  // `prefix`, a folder of it, when not empty).
  absl::StatusOr<lockstep::v1::ListJobFilesResponse> ListFiles(
      const std::string& job, const std::string& prefix);
  // Fetches one of them into `sink` (FetchFile's checks and retries). Each
  // attempt may take the call timeout plus a second per MiB of `size`.
  absl::Status FetchFile(const std::string& job,
                         const lockstep::v1::JobFile& file, FileSink& sink,
                         const FetchOptions& options);

 private:
  using Stub = lockstep::v1::JobService::Stub;
  // Sets the deadline (unless `deadline` is false) and the token.
  void Prepare(grpc::ClientContext& c, bool deadline = true) const;
  absl::Status Check(const grpc::Status& status, const char* what,
                     int coordinator) const;
  // `call(stub, context)` on the coordinator that answered last, then on
  // each other one while it is UNAVAILABLE (or, with several, does not
  // answer in time); `what` ("submit to ") and the address name a
  // failure.
  absl::Status Call(
      const char* what,
      const std::function<grpc::Status(Stub*, grpc::ClientContext*)>& call);

  std::vector<std::string> addresses_;
  TlsFiles tls_;
  std::string token_;
  absl::Duration timeout_;
  std::vector<std::unique_ptr<Stub>> stubs_;
  int current_ = 0;
};

}  // namespace lockstep

#endif  // LOCKSTEP_CLIENT_JOB_CLIENT_H_
