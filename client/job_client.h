// The job client library: the JobService calls behind `lockstep submit`,
// `status`, `watch`, `list` and `cancel`, with errors as absl::Status.
#ifndef LOCKSTEP_CLIENT_JOB_CLIENT_H_
#define LOCKSTEP_CLIENT_JOB_CLIENT_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "proto/jobs.grpc.pb.h"

namespace lockstep {

class JobClient {
 public:
  // `address` host:port of the coordinator; calls fail after `timeout`
  // (Watch: the wait between two snapshots).
  explicit JobClient(const std::string& address,
                     absl::Duration timeout = absl::Seconds(30));

  absl::StatusOr<lockstep::v1::JobStatus> Submit(const std::string& job_json);
  absl::StatusOr<lockstep::v1::JobStatus> Get(const std::string& name);
  absl::StatusOr<lockstep::v1::ListJobsResponse> List();
  absl::StatusOr<lockstep::v1::JobStatus> Cancel(const std::string& name);
  // Calls `on_update` for every snapshot until the job ends; returns the
  // last snapshot. Unavailable if the coordinator goes away.
  absl::StatusOr<lockstep::v1::JobStatus> Watch(
      const std::string& name,
      const std::function<void(const lockstep::v1::JobStatus&)>& on_update);

 private:
  std::string address_;
  absl::Duration timeout_;
  std::unique_ptr<lockstep::v1::JobService::Stub> stub_;
};

}  // namespace lockstep

#endif  // LOCKSTEP_CLIENT_JOB_CLIENT_H_
