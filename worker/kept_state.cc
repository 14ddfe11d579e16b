#include "worker/kept_state.h"

#include <utility>

#include "absl/strings/str_format.h"
#include "rpc/checkpoint_stream.h"

namespace lockstep {

void KeptState::Keep(const std::string& job,
                     std::vector<LoadedCheckpoint> states,
                     const std::string& fingerprint, Parts parts) {
  std::vector<std::shared_ptr<const LoadedCheckpoint>> kept;
  for (LoadedCheckpoint& s : states) {
    kept.push_back(std::make_shared<const LoadedCheckpoint>(std::move(s)));
  }
  std::vector<std::shared_ptr<const LoadedCheckpoint>> drop;
  absl::MutexLock lock(&mu_);
  job_ = job;
  fingerprint_ = fingerprint;
  parts_ = parts;
  drop = std::move(states_);
  states_ = std::move(kept);
}

std::shared_ptr<const LoadedCheckpoint> KeptState::Get(
    const std::string& job, int64_t step,
    const std::string& fingerprint) const {
  absl::MutexLock lock(&mu_);
  if (job_ != job || (!fingerprint.empty() && fingerprint != fingerprint_)) {
    return nullptr;
  }
  for (const auto& s : states_) {
    if (s->state.step == step) return s;
  }
  return nullptr;
}

void KeptState::Clear() {
  // Freed outside the lock.
  std::vector<std::shared_ptr<const LoadedCheckpoint>> drop;
  absl::MutexLock lock(&mu_);
  drop = std::move(states_);
  job_.clear();
  fingerprint_.clear();
  parts_ = Parts();
}

void KeptState::Describe(lockstep::v1::RegisterRequest* req) const {
  absl::MutexLock lock(&mu_);
  if (states_.empty()) return;
  req->set_held_job(job_);
  req->set_held_generation(states_.front()->state.generation);
  req->set_held_step(states_.front()->state.step);
  req->set_held_fingerprint(fingerprint_);
  if (parts_.world > 0) {
    req->set_held_rank(parts_.rank);
    req->set_held_world(parts_.world);
    if (states_.size() > 1) {
      req->set_held_next_step(states_.back()->state.step);
    }
  }
}

grpc::Status WorkerStateService::FetchState(
    grpc::ServerContext*, const lockstep::v1::FetchStateRequest* request,
    grpc::ServerWriter<lockstep::v1::CheckpointSlice>* writer) {
  std::shared_ptr<const LoadedCheckpoint> state =
      kept_->Get(request->job(), request->step());
  if (state == nullptr) {
    return grpc::Status(
        grpc::StatusCode::NOT_FOUND,
        absl::StrFormat("this worker keeps no training state of job \"%s\" at "
                        "step %d",
                        request->job(), request->step()));
  }
  if (request->parts_size() > 0) {
    const std::vector<int> parts(request->parts().begin(),
                                 request->parts().end());
    WriteCheckpointStream(*state, request->job(), writer, &parts,
                          request->whole());
  } else {
    WriteCheckpointStream(*state, request->job(), writer);
  }
  return grpc::Status::OK;
}

}  // namespace lockstep
