// The one conversion between a checkpoint's state (core/checkpoint) and the
// state fields of a CheckpointSlice message: for the worker's upload and
// fetch, the coordinator's assembly and its answer to a fetch.
#ifndef LOCKSTEP_RPC_CHECKPOINT_WIRE_H_
#define LOCKSTEP_RPC_CHECKPOINT_WIRE_H_

#include "core/checkpoint/checkpoint.h"
#include "proto/cluster.pb.h"

namespace lockstep {

// Sets msg's step, generation, epoch, data position, seed, optimizer
// iterations, job JSON, train loss and data artifacts from `state`; the other
// fields are left alone.
void CheckpointStateToSlice(const CheckpointState& state,
                            lockstep::v1::CheckpointSlice* msg);
// The state a slice message carries (job JSON "" and no artifacts where
// this message does not carry them: they ride on a slice's first message
// only).
CheckpointState CheckpointStateFromSlice(
    const lockstep::v1::CheckpointSlice& msg);

}  // namespace lockstep

#endif  // LOCKSTEP_RPC_CHECKPOINT_WIRE_H_
