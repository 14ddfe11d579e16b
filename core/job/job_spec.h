// The job description (docs/job-file.md): plain structs filled and
// validated by ParseJobSpec. Everything downstream trusts a parsed spec.
#ifndef LOCKSTEP_CORE_JOB_JOB_SPEC_H_
#define LOCKSTEP_CORE_JOB_JOB_SPEC_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/data/data_format.h"
#include "core/layers/layer_spec.h"
#include "core/loss/loss.h"

namespace lockstep {

enum class OptimizerType { kSgd, kAdam, kAdamW };
enum class ScheduleType { kConstant, kPiecewise, kPolynomial };
enum class ScheduleUnit { kStep, kEpoch };
enum class Collective { kRing, kNccl, kAuto };
enum class Compression { kNone, kBf16 };
// cluster.shard: what each worker keeps only its part of (ZeRO).
enum class ShardMode { kNone, kOptimizer, kGradients };
// "none", "optimizer", "gradients" (the job file's names).
std::string ShardModeName(ShardMode mode);

struct OptimizerSpec {
  OptimizerType type = OptimizerType::kAdam;
  double learning_rate = 1e-3;
  // sgd
  double momentum = 0.0;
  bool nesterov = false;
  // adam, adamw (Keras defaults)
  double beta_1 = 0.9;
  double beta_2 = 0.999;
  double epsilon = 1e-7;
  // adamw: decoupled weight decay (Keras default 0.004); sgd/adam: 0 = none
  double weight_decay = 0.0;
  // Parameters whose name contains one of these are not decayed (Keras'
  // exclude_from_weight_decay; BERT recipes exclude "bias" and "LayerNorm").
  std::vector<std::string> exclude_from_weight_decay;
  // > 0: gradients are scaled so their global L2 norm is at most this
  // (Keras' global_clipnorm), after the all-reduce.
  double global_clipnorm = 0.0;
  // The learning rate (and every rate of the schedule) is multiplied by the
  // job's replica count, as the tutorials scale it by hand for a global
  // batch that grows with the replicas.
  bool scale_with_replicas = false;
};

// Learning rate as a function of the global step (and epoch). Warm-up, when
// set, ramps linearly from 0 to the scheduled value over warmup_steps steps.
struct ScheduleSpec {
  ScheduleType type = ScheduleType::kConstant;
  ScheduleUnit unit = ScheduleUnit::kEpoch;  // piecewise boundaries
  std::vector<double> boundaries;            // piecewise: strictly increasing
  std::vector<double> values;  // piecewise: boundaries.size() + 1 values
  // polynomial: lr = (initial - end) * (1 - min(step, decay_steps) /
  // decay_steps)^power + end, initial = optimizer.learning_rate
  int64_t decay_steps = 0;
  double end_learning_rate = 1e-4;
  double power = 1.0;
  int64_t warmup_steps = 0;
};

struct CheckpointSpec {
  int64_t every_steps = 0;  // 0: only at the end of each epoch
  int64_t keep = 3;
};

struct SummarySpec {
  int64_t every_steps = 100;
};

struct ClusterSpec {
  // The most workers (a plain number: exactly this many). An elastic job
  // ({"min": M, "max": N}) runs with any count in [min_workers, workers]:
  // its global batch is the one of `workers`, split over whoever runs.
  int64_t workers = 1;
  int64_t min_workers = 1;  // == workers unless elastic
  // Elastic jobs: a job with min_workers idle workers waits this long for
  // more (up to `workers`) before it starts; a job that lost a worker waits
  // this long for a replacement before it goes on with the survivors.
  double start_grace_seconds = 10;
  double rejoin_grace_seconds = 10;
  int64_t replicas_per_worker = 1;
  Collective collective = Collective::kRing;
  int64_t bucket_kib = 1024;  // gradients travel in buckets of >= this size
  // The gRPC ring: the largest message (a chunk of a ring segment; bigger
  // segments are cut and pipelined) and the streams to the next worker
  // (0: the worker's --lanes). Measured defaults: benchmarks/README.md.
  int64_t ring_chunk_kib = 4096;
  int64_t ring_streams = 0;
  // Gradients on the gRPC ring as bfloat16 (half the bytes; sums stay
  // float32, see core/collective/ring_allreduce.h). The loss and evaluation sums, the
  // parameters and NCCL's all-reduce stay float32.
  Compression compression = Compression::kNone;
  // Every gRPC ring message carries an XXH3-64 of its header and payload,
  // which the receiver checks as it sums: a message damaged on the way
  // (a NIC, switch or middlebox; TCP's checksum is weak) fails the step
  // instead of summing into it. It costs a pass over every byte sent and
  // received, 22-35% of the all-reduce where CPUs are the limit (docs/
  // failure.md), so it is off unless asked for; TLS's MAC guards the
  // bytes too.
  bool ring_checksum = false;
  // Workers compare parameter fingerprints every this many steps (0: only
  // at the end).
  int64_t fingerprint_every_steps = 100;
  // GPU replicas may run GEMMs and convolutions on TF32 tensor cores (FP32
  // accumulation, inputs rounded to 10 mantissa bits: several times faster,
  // about 1e-3 relative error). CPU replicas ignore it.
  bool allow_tf32 = false;
  // "optimizer" (ZeRO-1): the gradients are reduce-scattered, each worker
  // updates and keeps optimizer state for its 1/N of the parameters (ring
  // segments of every bucket), and the parameters are all-gathered. Same
  // sums in the same order: the same bits as an unsharded run.
  // "gradients" (ZeRO-2): the same, and between steps a worker keeps only
  // its part of the gradients too (the rest of a bucket's pages are handed
  // back once it is reduce-scattered; backward touches a gradient only
  // when it reaches its layer).
  ShardMode shard = ShardMode::kNone;
  // Sharded: each worker's part of the optimizer state is also kept (and
  // updated, from the owner's sums) by the next worker on the ring, so a
  // lost worker's part survives and the next generation starts from the
  // survivors' memory. 2/N of the state per worker instead of 1/N.
  bool copies = true;
};

// What the coordinator does when a worker of the job is lost (DESIGN
// "Failure and rejoin").
struct RestartSpec {
  int64_t max_restarts = 3;    // generations started after a failure; 0: fail
  double backoff_seconds = 1;  // before restart k: backoff * 2^(k-1), <= 60 s
  // RECOVERING this long without enough workers: the job FAILS.
  double replacement_timeout_seconds = 120;
};

// What the workers record for `lockstep audit` (docs/reliability.md).
struct AuditSpec {
  // Every rank records the sample positions of each step before the step's
  // collective (one coordinator call per rank and step).
  bool samples = false;
};

// The most micro-batches a step may accumulate (job_spec.cc): the sums
// inside a pass (sync batch norm) of every micro-batch need their own
// collective ids (core/collective/transport.h kPassSumMicroStride).
inline constexpr int64_t kMaxGradientAccumulationSteps = 1024;

// What a job's matrix products and convolutions compute in ("precision"):
// kBf16 rounds their inputs to bfloat16 and keeps float32 products and
// sums (kernels/cpu/gemm.h GemmPrecision, kernels/cuda/gemm.h on GPUs);
// kFp16 rounds them to IEEE half, on GPU replicas only, with dynamic loss
// scaling (core/train/loss_scale.h); the weights, the optimizer state, the
// gradients' all-reduce and every other op stay float32.
enum class Precision { kFp32, kBf16, kFp16 };

struct JobSpec {
  std::string name;
  uint64_t seed = 0;
  ModelSpec model;
  // A registered loss (core/loss/loss.h), by the job's "loss".
  const Loss* loss = &LossNamed("sparse_categorical_crossentropy");
  OptimizerSpec optimizer;
  ScheduleSpec lr_schedule;
  DataSpec data;
  int64_t batch_size_per_replica = 32;
  // Each replica computes its share of a step's global batch in this many
  // micro-batches of batch_size_per_replica, summing their gradients
  // before the all-reduce: the global batch of a step is
  // batch_size_per_replica * replicas * this, with the gradient of that
  // whole batch, in 1/this of the activation memory.
  int64_t gradient_accumulation_steps = 1;
  int64_t epochs = 0;  // exactly one of epochs / steps is > 0
  int64_t steps = 0;
  CheckpointSpec checkpoint;
  SummarySpec summary;
  ClusterSpec cluster;
  RestartSpec restart;
  AuditSpec audit;
  Precision precision = Precision::kFp32;

  // Every replica of the job at its most workers: the global batch's
  // divisor (an elastic job's smaller worlds split the same global batch).
  int64_t total_replicas() const {
    return cluster.workers * cluster.replicas_per_worker;
  }
  bool elastic() const { return cluster.min_workers < cluster.workers; }
  // The job's global batch, whatever its world (ShardPlan splits it over
  // the replicas that run).
  int64_t global_batch_size() const {
    return batch_size_per_replica * gradient_accumulation_steps *
           total_replicas();
  }
};

// " x 4 micro-batches" when the job accumulates gradients, else "": for
// the lines that state a job's batch.
std::string AccumulationNote(const JobSpec& spec);

// Field-by-field equality (ParseJobSpec(JobSpecToJson(s)) == s).
bool operator==(const OptimizerSpec& a, const OptimizerSpec& b);
bool operator==(const ScheduleSpec& a, const ScheduleSpec& b);
bool operator==(const CheckpointSpec& a, const CheckpointSpec& b);
bool operator==(const SummarySpec& a, const SummarySpec& b);
bool operator==(const ClusterSpec& a, const ClusterSpec& b);
bool operator==(const RestartSpec& a, const RestartSpec& b);
bool operator==(const AuditSpec& a, const AuditSpec& b);
bool operator==(const JobSpec& a, const JobSpec& b);
inline bool operator!=(const JobSpec& a, const JobSpec& b) { return !(a == b); }

// Parses and validates a job document. Errors are kInvalidArgument and name
// the field: "optimizer.learning_rate: must be > 0, got -1". Relative data
// paths are resolved against `base_dir` when it is non-empty.
absl::StatusOr<JobSpec> ParseJobSpec(absl::string_view json_text,
                                     absl::string_view base_dir = "");
// Reads `path` and parses it; a missing file or bad JSON names the file.
// Relative data paths are resolved against `data_dir` when given, else
// against the job file's folder.
absl::StatusOr<JobSpec> LoadJobSpec(const std::string& path,
                                    const std::string& data_dir = "");
// The canonical JSON form (all defaults filled): stored with checkpoints.
std::string JobSpecToJson(const JobSpec& spec);
// A model section alone (the job file's "model" object), for code and tests
// that build models by hand. Input shapes must be given.
absl::StatusOr<ModelSpec> ParseModelSpec(absl::string_view json_text);

// The data options of a job: its model's input names and its seed.
DataOptions DataOptionsFor(const JobSpec& spec);

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_JOB_JOB_SPEC_H_
