// The coordinator's two gRPC services as thin adapters over Coordinator:
// JobService for clients, Coordinator (cluster.proto) for worker daemons.
// Every method first asks the Authorizer (coordinator/auth.h).
#ifndef LOCKSTEP_COORDINATOR_SERVICES_H_
#define LOCKSTEP_COORDINATOR_SERVICES_H_

#include <atomic>

#include "coordinator/auth.h"
#include "coordinator/coordinator.h"
#include "proto/cluster.grpc.pb.h"
#include "proto/jobs.grpc.pb.h"

namespace lockstep {

class JobServiceImpl final : public lockstep::v1::JobService::Service {
 public:
  // `shutdown` (not owned) ends open WatchJob streams. Nothing owned.
  JobServiceImpl(Coordinator* c, Authorizer* auth,
                 const std::atomic<bool>* shutdown)
      : c_(c), auth_(auth), shutdown_(shutdown) {}
  grpc::Status Submit(grpc::ServerContext*,
                      const lockstep::v1::SubmitRequest* req,
                      lockstep::v1::SubmitResponse* resp) override;
  grpc::Status GetJob(grpc::ServerContext*,
                      const lockstep::v1::GetJobRequest* req,
                      lockstep::v1::JobStatus* resp) override;
  grpc::Status ListJobs(grpc::ServerContext*,
                        const lockstep::v1::ListJobsRequest* req,
                        lockstep::v1::ListJobsResponse* resp) override;
  grpc::Status WatchJob(
      grpc::ServerContext* context, const lockstep::v1::WatchJobRequest* req,
      grpc::ServerWriter<lockstep::v1::JobStatus>* writer) override;
  grpc::Status CancelJob(grpc::ServerContext*,
                         const lockstep::v1::CancelJobRequest* req,
                         lockstep::v1::JobStatus* resp) override;
  grpc::Status ListJobFiles(grpc::ServerContext*,
                            const lockstep::v1::ListJobFilesRequest* req,
                            lockstep::v1::ListJobFilesResponse* resp) override;
  grpc::Status ReadJobFile(
      grpc::ServerContext* context, const lockstep::v1::ReadJobFileRequest* req,
      grpc::ServerWriter<lockstep::v1::FileChunk>* writer) override;

 private:
  Coordinator* const c_;
  Authorizer* const auth_;
  const std::atomic<bool>* const shutdown_;
};

class ClusterServiceImpl final : public lockstep::v1::Coordinator::Service {
 public:
  // Nothing owned.
  ClusterServiceImpl(Coordinator* c, Authorizer* auth) : c_(c), auth_(auth) {}
  grpc::Status Register(grpc::ServerContext* context,
                        const lockstep::v1::RegisterRequest* req,
                        lockstep::v1::RegisterResponse* resp) override;
  grpc::Status Heartbeat(grpc::ServerContext*,
                         const lockstep::v1::HeartbeatRequest* req,
                         lockstep::v1::HeartbeatResponse* resp) override;
  grpc::Status ReportProgress(grpc::ServerContext*,
                              const lockstep::v1::ProgressReport* req,
                              lockstep::v1::ReportResponse* resp) override;
  grpc::Status RecordSamples(grpc::ServerContext*,
                             const lockstep::v1::SampleRecord* req,
                             lockstep::v1::ReportResponse* resp) override;
  grpc::Status UploadCheckpoint(
      grpc::ServerContext*,
      grpc::ServerReader<lockstep::v1::CheckpointSlice>* reader,
      lockstep::v1::CheckpointAck* ack) override;
  grpc::Status FetchCheckpoint(
      grpc::ServerContext*, const lockstep::v1::FetchCheckpointRequest* req,
      grpc::ServerWriter<lockstep::v1::CheckpointSlice>* writer) override;
  grpc::Status Finish(grpc::ServerContext*,
                      const lockstep::v1::FinishRequest* req,
                      lockstep::v1::FinishResponse* resp) override;
  grpc::Status PublishNcclId(grpc::ServerContext*,
                             const lockstep::v1::NcclIdRequest* req,
                             lockstep::v1::NcclIdResponse* resp) override;
  grpc::Status FetchNcclId(grpc::ServerContext*,
                           const lockstep::v1::NcclIdRequest* req,
                           lockstep::v1::NcclIdResponse* resp) override;

 private:
  Coordinator* const c_;
  Authorizer* const auth_;
};

}  // namespace lockstep

#endif  // LOCKSTEP_COORDINATOR_SERVICES_H_
