// One process's part of a job's training, for every driver: `lockstep
// train` (every replica of the job here) and a worker's rank of a cluster
// job (its replicas; the other workers reached through a Transport). The
// session owns setup (data, replicas or GPUs, optimizer, schedule), restore,
// the step, evaluation, checkpoint state and the result. What differs
// between the drivers is the SessionHost it is given (where a checkpoint
// comes from and goes to, where progress and summaries go, when to stop)
// and SessionPeers (the other workers, if any).
//
// A step (DESIGN "A step"): every local replica computes its slice of the
// global batch; the gradients are summed over the local replicas in
// replica order and, with peers, over the workers (gradient buckets on the
// ring, or NCCL); a GatherSum of 5 values carries the global loss, how
// many ranks leave and whether the world regroups; every replica applies
// the same update.
#ifndef LOCKSTEP_CORE_TRAIN_TRAINING_SESSION_H_
#define LOCKSTEP_CORE_TRAIN_TRAINING_SESSION_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/audit/sample_audit.h"
#include "core/checkpoint/checkpoint.h"
#include "core/collective/gradient_buckets.h"
#include "core/collective/ring_allreduce.h"
#include "core/collective/transport.h"
#include "core/data/dataset.h"
#include "core/data/shard_plan.h"
#include "core/job/job_spec.h"
#include "core/progress.h"
#include "core/train/gpu_replicas.h"
#include "core/train/lr_schedule.h"
#include "core/train/optimizer.h"
#include "core/train/replica_set.h"
#include "core/train/step_meter.h"

namespace lockstep {

using ScalarList = std::vector<std::pair<std::string, double>>;

// One step's figures, for a host's metrics.
struct StepFigures {
  int64_t step = 0;           // global steps done after it
  double seconds = 0;         // the whole step, from the wait for data on
  int64_t local_samples = 0;  // this process's share of the global batch
  BatchLoss loss;             // global
  BucketStats buckets;        // the gradients' all-reduce (peers, CPU)
};

// What differs between one process and a cluster rank. Called on the
// session's thread, in the order of a step: StepDone, Progress (when
// ProgressDue or a fingerprint is due), Scalars, Event, SaveCheckpoint,
// EndStep.
class SessionHost {
 public:
  virtual ~SessionHost() = default;

  // The checkpoint to start from, or nullopt for a fresh start. Called
  // first: its vocabulary tokenizes a text job's data.
  virtual absl::StatusOr<std::optional<LoadedCheckpoint>>
  StartingCheckpoint() = 0;
  // The ncclUniqueId (128 bytes) of the GPUs' communicator; asked only
  // with GPU replicas.
  virtual absl::StatusOr<std::string> NcclId() = 0;
  // Saves a checkpoint of `state` (the tensors are borrowed for the call).
  // `final`: of the job's last step. An error ends the session; a host
  // that can go on without this checkpoint returns OK.
  virtual absl::Status SaveCheckpoint(const CheckpointState& state,
                                      const NamedTensors& model,
                                      const OptimizerParts& optimizer,
                                      bool final) = 0;
  // Whether to report progress after `step`; `boundary`: it ends an epoch
  // or the run.
  virtual bool ProgressDue(int64_t step, bool boundary) = 0;
  // The progress after a step, with the parameters' fingerprint when one
  // is due (SessionConfig::report_fingerprints), else null.
  virtual absl::Status Progress(const ProgressInfo& info,
                                const std::string* fingerprint) = 0;
  // Summary scalars of `step` (TensorBoard).
  virtual absl::Status Scalars(int64_t step, const ScalarList& values) = 0;
  // An event line ("[job] epoch 3 done ...").
  virtual void Event(const std::string& line) = 0;
  virtual void Log(const std::string& line) = 0;
  virtual void StepDone(const StepFigures& figures) {}
  // A job with "audit": {"samples": true}: the samples this process takes
  // for a step (generation and rank for the host to fill), before the
  // step's collective, so that no step completes without every rank's
  // record kept. An error ends the session.
  virtual absl::Status SamplesTaken(SampleRecord& record) {
    return absl::UnimplementedError(
        "this kind of run keeps no sample audit (audit.samples)");
  }
  // After everything of step `step`; an error ends the session.
  virtual absl::Status EndStep(int64_t step) { return absl::OkStatus(); }
  // Checked before every step.
  virtual bool StopRequested() const = 0;
  // This process leaves after the current step: the ranks learn it in the
  // step's sum and all end the run there (Run returns kLeaving).
  virtual bool Leaving() const { return false; }
  // The coordinator asked this generation to end after the current step
  // (workers join an elastic job): as with Leaving, every rank learns it in
  // the step's sum and all end the run there (Run returns kRegroup).
  virtual bool Regrouping() const { return false; }
};

// The other workers of a cluster job in one generation.
struct SessionPeers {
  Transport* transport = nullptr;  // not owned; null: one process
  int64_t generation = 0;
  RingOptions ring;           // the loss, evaluation, barrier and pass sums
  RingOptions gradient_ring;  // gradients (cluster.compression)
  int64_t bucket_bytes = 1 << 20;
  // GPU replicas: NCCL sums the gradients over every worker's GPUs (else
  // over this process's, and the ring over the workers).
  bool nccl = false;
};

struct SessionConfig {
  JobSpec spec;
  std::string job_json;           // canonical; stored with checkpoints
  std::vector<int64_t> replicas;  // the global replica indices held here
  int64_t world_replicas = 0;     // every worker's replicas
  int rank = 0;                   // this process among the job's workers
  int world = 1;
  int threads = 0;                // compute threads; 0: every core
  std::vector<int> cuda_devices;  // one per replica; empty: CPU replicas
  int64_t end_step = -1;          // stop there (< 0: the job's end)
  // Fingerprints go with the progress every fingerprint_every_steps steps
  // (0: never) and at the job's last step.
  bool report_fingerprints = false;
  int64_t fingerprint_every_steps = 0;
  SessionPeers peers;
};

// How far a session got, and its figures.
struct SessionResult {
  bool finished = false;  // trained to the job's last step
  int64_t steps = 0;      // global steps done
  int64_t total_steps = 0;
  int64_t epochs = 0;  // completed
  int64_t resumed_from_step = 0;
  BatchLoss train;             // the last epoch (or the part of it run)
  BatchLoss test;              // the last evaluation (finished runs)
  double samples_per_sec = 0;  // this run's training samples / seconds
  int64_t num_parameters = 0;
  int64_t optimizer_state_bytes = 0;  // held here (sharded: this rank's)
  LossScaleState loss_scale;          // precision fp16 (scale 0: none)
  std::string fingerprint;  // core/fingerprint.h
  // Samples that could not be made (undecodable images), train and this
  // process's test share, sorted.
  std::vector<std::string> skipped_samples;
};

class TrainingSession {
 public:
  enum class Outcome {
    kFinished,  // the job's last step, or config.end_step
    kStopped,   // the host asked to stop, before a step
    kLeaving,   // ranks leave after this step (leaving() of them)
    kRegroup,   // the world changes after this step (Regrouping)
  };

  // Loads the data (after host->StartingCheckpoint()), builds the replicas
  // (or GPUs), optimizer and schedule, and restores the checkpoint. Errors
  // name the file or field (bad data, a model that does not fit it, a
  // checkpoint of another model). `host` is not owned and must outlive
  // the session.
  static absl::StatusOr<std::unique_ptr<TrainingSession>> Create(
      SessionConfig config, SessionHost* host);
  ~TrainingSession();

  // Trains from step() to the end step, a stop or a leave. Blocks. Errors:
  // a step's, a collective's (naming it), a diverged loss, a host's.
  absl::StatusOr<Outcome> Run();

  // A checkpoint of step() through the host, unless one was saved there.
  absl::Status SaveCheckpoint();
  // A copy of what that checkpoint holds (parameters in model order,
  // optimizer state, data position), for a worker to keep in memory when
  // its generation fails: step() is always a step every rank completed or
  // the step after it, whatever broke (the update follows the last
  // collective of a step; on GPU replicas the update comes before the
  // loss's sum, so theirs may be the step after). FailedPrecondition for
  // sharded optimizer state without copies, and on GPU replicas when a
  // failed step may have updated some devices and not others. Sharded with
  // copies: the parts of this rank and the previous one (parameters and
  // optimizer state; LoadedCheckpoint::model_parts, optimizer_parts), of step()
  // or, when the update of the step that broke was made here, of the step after
  // it; when the failure came at the barrier before that update, both (the
  // update made on the copy: another rank may have made it).
  absl::StatusOr<std::vector<LoadedCheckpoint>> CopyState();
  // Returns once every rank called it with the same bucket (the drain's
  // barrier); at once without peers.
  absl::Status Barrier(int32_t bucket);
  // The figures so far (the parameters brought to the host for the
  // fingerprint).
  absl::StatusOr<SessionResult> Result();
  // From any thread: a collective blocked in NCCL fails (GPU replicas).
  void Abort();

  int64_t step() const { return step_; }
  int64_t total_steps() const { return total_steps_; }
  int64_t steps_per_epoch() const { return plan_->steps_per_epoch(); }
  int64_t global_batch_size() const { return plan_->global_batch_size(); }
  int64_t num_parameters();
  // Ranks that leave after this step (Run returned kLeaving).
  int leaving() const { return leaving_; }
  const StepMeter& meter() const { return meter_; }
  const Dataset& train_data() const { return train_; }
  int64_t test_samples() const { return test_total_; }
  // The checkpoint restored at Create ("" for a fresh start).
  const std::string& restored_from() const { return restored_from_; }
  bool uses_devices() const { return gpus_ != nullptr; }
  // Whether CopyState can copy the training state (the optimizer state
  // whole, or sharded with copies; GPU replicas pull theirs).
  bool state_in_memory() const {
    return !optimizer_->sharded() || copy_ != nullptr;
  }
  // The optimizer state held here (sharded: this rank's part).
  bool sharded() const { return optimizer_->sharded(); }
  int64_t optimizer_state_bytes() const {
    const int64_t copy = copy_ != nullptr ? copy_->state_elements() : 0;
    return (optimizer_->state_elements() + copy) *
           static_cast<int64_t>(sizeof(float));
  }
  // The CPU gradients' buckets on the ring; null without peers or on GPUs.
  const GradientBuckets* buckets() const { return buckets_.get(); }

 private:
  TrainingSession(SessionConfig config, SessionHost* host);
  absl::Status Setup(const std::optional<LoadedCheckpoint>& resume);
  absl::Status SetupDevices();
  absl::Status Restore(const LoadedCheckpoint& loaded);
  // One step of `batch`; `next` is the following batch if ready (GPUs copy
  // it during this step). Sets the global loss, and leaving_.
  absl::Status Step(Batch& batch, const Batch* next, BatchLoss* global);
  // The CPU replicas' gradients of `batch` (every micro-batch of it,
  // summed), with the workers' all-reduce when there are peers.
  absl::StatusOr<BatchLoss> ComputeGradients(Batch& batch);
  // Sharded: the update of this rank's ranges (and the copy's) with the
  // step's global norm, and the moving averages; sets applied_.
  void Update(double lr, double norm, int64_t global_count);
  // The parameters and the whole optimizer state as the host holds them
  // now, as the state of `step`.
  LoadedCheckpoint WholeState(int64_t step);
  // Sharded with copies: the parts of this rank and the previous one (of
  // the parameters and the optimizer state) as they are now, of `step`.
  LoadedCheckpoint KeptParts(int64_t step);
  absl::StatusOr<BatchLoss> Evaluate();
  // Sums `count` values over the workers in place (nothing alone).
  absl::Status SumOverWorkers(int32_t bucket, int64_t step, float* values,
                              int count, const char* what);
  // The sums inside the pass (sync batch norm) over the workers.
  absl::Status PassSum(int64_t step, int32_t key, float* data, int64_t count);
  // The GPUs' parameters and optimizer state into the host copies.
  absl::Status SyncHostState();
  absl::StatusOr<std::string> Fingerprint();
  // The checkpoint state of `step` (step(), or the one after it).
  CheckpointState State(int64_t step) const;
  ProgressInfo Progress();
  ScalarList SummaryScalars(double step_seconds);
  bool CheckpointDue(bool epoch_end) const;

  const SessionConfig config_;
  SessionHost* const host_;
  Dataset train_, test_;  // test_: this process's share
  int64_t test_total_ = 0;
  std::unique_ptr<ShardPlan> plan_;
  // With GPUs gpus_ trains and replicas_ is one host replica holding what
  // checkpoints and the fingerprint need.
  std::unique_ptr<ReplicaSet> replicas_;
  std::unique_ptr<GpuReplicas> gpus_;
  std::unique_ptr<GradientBuckets> buckets_;
  std::unique_ptr<Optimizer> optimizer_;
  // Sharded with copies (cluster.copies): the previous rank's part of the
  // optimizer state, updated here from its sums as its owner updates it.
  std::unique_ptr<Optimizer> copy_;
  // Sharded: this step's update is made (parameters and optimizer state of
  // this rank's ranges are the next step's) but not yet all-gathered.
  bool applied_ = false;
  // The last step's update was skipped (fp16's loss scale overflowed).
  bool skipped_ = false;
  // Sharded with copies: what this step's update needs is here (sums,
  // norm) but the barrier before it has not passed.
  struct PendingUpdate {
    double lr = 0, norm = 0;
    int64_t global_count = 0;
  };
  std::optional<PendingUpdate> pending_;
  std::unique_ptr<LrSchedule> schedule_;
  StepMeter meter_;
  BatchLoss last_eval_, last_train_;
  bool evaluated_ = false;
  int64_t total_steps_ = 0;
  int64_t start_step_ = 0;
  int64_t end_step_ = 0;
  int64_t step_ = 0;
  // GPU replicas: the steps whose update the devices hold (step_, or one
  // more when the step's update was made and a later collective failed).
  int64_t gpu_steps_ = 0;
  int64_t saved_step_ = -1;
  int leaving_ = 0;
  bool regroup_ = false;
  // Micro-batches of batch_size_per_replica a CPU replica's share of a step
  // takes (GPUs take their share whole).
  int32_t micros_ = 1;
  std::string restored_from_;
};

// InvalidArgument naming the field when the data does not fit the model
// (values per sample, classes) or the training set is empty.
absl::Status CheckDataFitsModel(const JobSpec& spec, const Model& model,
                                const Dataset& train, const Dataset& test);

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_TRAIN_TRAINING_SESSION_H_
