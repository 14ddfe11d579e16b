// gRPC adapters: unpack, call Coordinator, convert the status once.
#include "coordinator/services.h"

#include <algorithm>
#include <vector>

#include "coordinator/job_files.h"
#include "rpc/checkpoint_stream.h"
#include "rpc/rpc_util.h"

namespace lockstep {

// Nothing is answered before the journal is replayed, nor by a
// coordinator that does not lead (UNAVAILABLE naming the leader: the
// callers retry, or go there); then the refusal of the Authorizer check
// `check`, if any.
#define LOCKSTEP_AUTHORIZE(check)                               \
  do {                                                          \
    const std::string _why = c_->NotServing();                  \
    if (!_why.empty()) {                                        \
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, _why); \
    }                                                           \
    grpc::Status _auth = (check);                               \
    if (!_auth.ok()) return _auth;                              \
  } while (0)

// The answer of a call that changes state, unless the coordinator stopped
// leading while it was made: the journal write behind it was refused, so
// the caller must not take it as done (UNAVAILABLE: it retries with the
// leader).
grpc::Status Answer(const Coordinator& c, grpc::Status answer) {
  const std::string why = c.NotServing();
  if (why.empty()) return answer;
  return grpc::Status(grpc::StatusCode::UNAVAILABLE, why);
}

template <typename T>
grpc::Status Fill(absl::StatusOr<T> result, T* out) {
  if (!result.ok()) return ToGrpc(result.status());
  *out = *std::move(result);
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::Submit(grpc::ServerContext* context,
                                    const v1::SubmitRequest* req,
                                    v1::SubmitResponse* resp) {
  LOCKSTEP_AUTHORIZE(auth_->CheckJobClient(*context, "Submit"));
  SubmitMode mode = SubmitMode::kNew;
  if (req->mode() == v1::SUBMIT_RESUME) mode = SubmitMode::kResume;
  if (req->mode() == v1::SUBMIT_RESTART) mode = SubmitMode::kRestart;
  bool existing = false;
  grpc::Status s =
      Fill(c_->submissions().Submit(req->job_json(), mode, &existing),
           resp->mutable_status());
  resp->set_existing(existing);
  return Answer(*c_, s);
}

grpc::Status JobServiceImpl::GetJob(grpc::ServerContext* context,
                                    const v1::GetJobRequest* req,
                                    v1::JobStatus* resp) {
  LOCKSTEP_AUTHORIZE(auth_->CheckJobClient(*context, "GetJob"));
  return Fill(c_->views().Get(req->name()), resp);
}

grpc::Status JobServiceImpl::ListJobs(grpc::ServerContext* context,
                                      const v1::ListJobsRequest*,
                                      v1::ListJobsResponse* resp) {
  LOCKSTEP_AUTHORIZE(auth_->CheckJobClient(*context, "ListJobs"));
  *resp = c_->views().List();
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::WatchJob(
    grpc::ServerContext* context, const v1::WatchJobRequest* req,
    grpc::ServerWriter<v1::JobStatus>* writer) {
  LOCKSTEP_AUTHORIZE(auth_->CheckJobClient(*context, "WatchJob"));
  int64_t version = -1, events_seen = std::max<int64_t>(0, req->events_seen());
  while (!context->IsCancelled() && !shutdown_->load()) {
    absl::StatusOr<v1::JobStatus> s =
        c_->views().WaitForChange(req->name(), &version, &events_seen,
                                  absl::Now() + absl::Milliseconds(500));
    if (!s.ok()) return ToGrpc(s.status());
    if (!writer->Write(*s)) return grpc::Status::OK;  // the client left
    if (IsTerminal(s->state())) return grpc::Status::OK;
    // At most a few snapshots a second, however busy the job is.
    absl::SleepFor(absl::Milliseconds(200));
  }
  return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                      "the coordinator is shutting down");
}

grpc::Status JobServiceImpl::CancelJob(grpc::ServerContext* context,
                                       const v1::CancelJobRequest* req,
                                       v1::JobStatus* resp) {
  LOCKSTEP_AUTHORIZE(auth_->CheckJobClient(*context, "CancelJob"));
  return Answer(*c_, Fill(c_->submissions().Cancel(req->name()), resp));
}

grpc::Status JobServiceImpl::ListJobFiles(grpc::ServerContext* context,
                                          const v1::ListJobFilesRequest* req,
                                          v1::ListJobFilesResponse* resp) {
  LOCKSTEP_AUTHORIZE(auth_->CheckJobClient(*context, "ListJobFiles"));
  absl::StatusOr<v1::JobStatus> job = c_->views().Get(req->job());
  if (!job.ok()) return ToGrpc(job.status());
  return Fill(lockstep::ListJobFiles(job->storage_path(), req->prefix()), resp);
}

grpc::Status JobServiceImpl::ReadJobFile(
    grpc::ServerContext* context, const v1::ReadJobFileRequest* req,
    grpc::ServerWriter<v1::FileChunk>* writer) {
  LOCKSTEP_AUTHORIZE(auth_->CheckJobClient(*context, "ReadJobFile"));
  absl::StatusOr<v1::JobStatus> job = c_->views().Get(req->job());
  if (!job.ok()) return ToGrpc(job.status());
  return ToGrpc(lockstep::ReadJobFile(
      job->storage_path(), req->path(), req->offset(), req->expect_size(),
      kJobFileChunkBytes, [&](const v1::FileChunk& chunk) {
        return !context->IsCancelled() && !shutdown_->load() &&
               writer->Write(chunk);
      }));
}

grpc::Status ClusterServiceImpl::Register(grpc::ServerContext* context,
                                          const v1::RegisterRequest* req,
                                          v1::RegisterResponse* resp) {
  LOCKSTEP_AUTHORIZE(auth_->CheckWorker(*context, "Register"));
  return Answer(
      *c_, Fill(c_->registrations().Register(*req, context->peer()), resp));
}

grpc::Status ClusterServiceImpl::Heartbeat(grpc::ServerContext* context,
                                           const v1::HeartbeatRequest* req,
                                           v1::HeartbeatResponse* resp) {
  LOCKSTEP_AUTHORIZE(auth_->CheckWorker(*context, "Heartbeat"));
  return Answer(*c_, Fill(c_->registrations().Heartbeat(*req), resp));
}

grpc::Status ClusterServiceImpl::ReportProgress(grpc::ServerContext* context,
                                                const v1::ProgressReport* req,
                                                v1::ReportResponse* resp) {
  LOCKSTEP_AUTHORIZE(auth_->CheckWorker(*context, "ReportProgress"));
  return Answer(*c_, Fill(c_->reports().ReportProgress(*req), resp));
}

grpc::Status ClusterServiceImpl::RecordSamples(grpc::ServerContext* context,
                                               const v1::SampleRecord* req,
                                               v1::ReportResponse* resp) {
  LOCKSTEP_AUTHORIZE(auth_->CheckWorker(*context, "RecordSamples"));
  return Answer(*c_, Fill(c_->reports().RecordSamples(*req), resp));
}

grpc::Status ClusterServiceImpl::UploadCheckpoint(
    grpc::ServerContext* context,
    grpc::ServerReader<v1::CheckpointSlice>* reader, v1::CheckpointAck* ack) {
  LOCKSTEP_AUTHORIZE(auth_->CheckWorker(*context, "UploadCheckpoint"));
  std::vector<v1::CheckpointSlice> messages;
  v1::CheckpointSlice m;
  while (reader->Read(&m)) messages.push_back(std::move(m));
  return Answer(*c_, Fill(c_->checkpoints().AddCheckpointSlice(messages), ack));
}

grpc::Status ClusterServiceImpl::FetchCheckpoint(
    grpc::ServerContext* context, const v1::FetchCheckpointRequest* req,
    grpc::ServerWriter<v1::CheckpointSlice>* writer) {
  LOCKSTEP_AUTHORIZE(auth_->CheckWorker(*context, "FetchCheckpoint"));
  absl::StatusOr<LoadedCheckpoint> loaded =
      c_->checkpoints().LoadCheckpoint(req->job(), req->step());
  if (!loaded.ok()) return ToGrpc(loaded.status());
  WriteCheckpointStream(*loaded, req->job(), writer);
  return grpc::Status::OK;
}

grpc::Status ClusterServiceImpl::Finish(grpc::ServerContext* context,
                                        const v1::FinishRequest* req,
                                        v1::FinishResponse* resp) {
  LOCKSTEP_AUTHORIZE(auth_->CheckWorker(*context, "Finish"));
  std::string over;
  absl::Status s = c_->reports().Finish(*req, &over);
  resp->set_over(over);
  return Answer(*c_, ToGrpc(s));
}

grpc::Status ClusterServiceImpl::PublishNcclId(grpc::ServerContext* context,
                                               const v1::NcclIdRequest* req,
                                               v1::NcclIdResponse*) {
  LOCKSTEP_AUTHORIZE(auth_->CheckWorker(*context, "PublishNcclId"));
  return Answer(*c_, ToGrpc(c_->nccl().PublishNcclId(*req)));
}

grpc::Status ClusterServiceImpl::FetchNcclId(grpc::ServerContext* context,
                                             const v1::NcclIdRequest* req,
                                             v1::NcclIdResponse* resp) {
  LOCKSTEP_AUTHORIZE(auth_->CheckWorker(*context, "FetchNcclId"));
  absl::StatusOr<std::string> id = c_->nccl().FetchNcclId(*req);
  if (!id.ok()) return ToGrpc(id.status());
  resp->set_unique_id(*id);
  return grpc::Status::OK;
}

}  // namespace lockstep
