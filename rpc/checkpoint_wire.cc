// CheckpointState <-> CheckpointSlice (see checkpoint_wire.h).
#include "rpc/checkpoint_wire.h"

namespace lockstep {

void CheckpointStateToSlice(const CheckpointState& state,
                            lockstep::v1::CheckpointSlice* msg) {
  msg->set_step(state.step);
  msg->set_generation(state.generation);
  msg->set_epoch(state.epoch);
  msg->set_step_in_epoch(state.step_in_epoch);
  msg->set_seed(state.seed);
  msg->set_optimizer_iterations(state.optimizer_iterations);
  msg->set_loss_scale(state.loss_scale.scale);
  msg->set_loss_scale_good_steps(state.loss_scale.good_steps);
  msg->set_loss_scale_skipped_steps(state.loss_scale.skipped_steps);
  msg->set_job_json(state.job_json);
  msg->set_train_loss(state.train_loss);
  for (const auto& [name, bytes] : state.artifacts) {
    (*msg->mutable_artifacts())[name] = bytes;
  }
}

CheckpointState CheckpointStateFromSlice(
    const lockstep::v1::CheckpointSlice& msg) {
  CheckpointState state;
  state.step = msg.step();
  state.generation = msg.generation();
  state.epoch = msg.epoch();
  state.step_in_epoch = msg.step_in_epoch();
  state.seed = msg.seed();
  state.optimizer_iterations = msg.optimizer_iterations();
  state.loss_scale.scale = msg.loss_scale();
  state.loss_scale.good_steps = msg.loss_scale_good_steps();
  state.loss_scale.skipped_steps = msg.loss_scale_skipped_steps();
  state.job_json = msg.job_json();
  state.train_loss = msg.train_loss();
  state.artifacts.insert(msg.artifacts().begin(), msg.artifacts().end());
  return state;
}

}  // namespace lockstep
