// SampleRecord <-> its message (see sample_wire.h).
#include "rpc/sample_wire.h"

namespace lockstep {

lockstep::v1::SampleRecord SampleRecordToWire(const SampleRecord& r) {
  lockstep::v1::SampleRecord m;
  m.set_generation(r.generation);
  m.set_rank(static_cast<int32_t>(r.rank));
  m.set_step(r.step);
  m.set_epoch(r.epoch);
  m.set_epoch_samples(r.epoch_samples);
  for (const auto& [begin, end] : r.positions) {
    m.add_positions(begin);
    m.add_positions(end);
  }
  m.set_hash(r.hash);
  m.set_count(r.count);
  for (int64_t replica : r.replicas) m.add_replicas(replica);
  m.set_world_replicas(r.world_replicas);
  return m;
}

absl::StatusOr<SampleRecord> SampleRecordFromWire(
    const lockstep::v1::SampleRecord& m) {
  if (m.positions_size() % 2 != 0) {
    return absl::InvalidArgumentError(
        "a sample record's positions come in [begin, end) pairs");
  }
  SampleRecord r;
  r.generation = m.generation();
  r.rank = m.rank();
  r.step = m.step();
  r.epoch = m.epoch();
  r.epoch_samples = m.epoch_samples();
  for (int i = 0; i + 1 < m.positions_size(); i += 2) {
    r.positions.emplace_back(m.positions(i), m.positions(i + 1));
  }
  r.hash = m.hash();
  r.count = m.count();
  r.replicas.assign(m.replicas().begin(), m.replicas().end());
  r.world_replicas = m.world_replicas();
  return r;
}

}  // namespace lockstep
