// What a rank keeps when its generation ends early (a failure, a regroup;
// DESIGN "Failure and rejoin"): the training state of its last completed
// step goes into the worker's KeptState, so the next generation can start
// from memory instead of the latest checkpoint, and the Finish report says
// what is held. Part of the job runner (worker/job_runner.cc).
#ifndef LOCKSTEP_WORKER_KEEP_RUN_STATE_H_
#define LOCKSTEP_WORKER_KEEP_RUN_STATE_H_

#include <functional>
#include <string>

#include "core/train/training_session.h"
#include "proto/cluster.pb.h"
#include "worker/kept_state.h"

namespace lockstep {

// The session's state (TrainingSession::CopyState) into `kept`, and into
// `req` its step with the fingerprint of the whole state (held_step,
// held_fingerprint) or, sharded with copies, the parts of ranks r and r-1
// (held_rank, held_world, held_next_step when the failure came between
// two steps). `log` says what was kept (and its size), or why nothing
// was: the next generation then starts from the latest checkpoint.
void KeepRunState(TrainingSession& session, const lockstep::v1::Assignment& a,
                  KeptState& kept,
                  const std::function<void(const std::string&)>& log,
                  lockstep::v1::FinishRequest& req);

}  // namespace lockstep

#endif  // LOCKSTEP_WORKER_KEEP_RUN_STATE_H_
