// Job file parsing and validation: JSON in, a trusted JobSpec out, with every
// error naming the JSON path of the offending field.
//
// Schema (docs/job-file.md); "?" marks an optional field and its default.
//
// name                    string, required, [A-Za-z0-9_.-]{1,64}, not . or ..
// seed                    integer >= 0 ? 0
// model                   object, required; one of three forms:
//   input_shape           array of integers >= 1: a model with one input
//                         ("input"), and
//   layers                array of layer objects, required, non-empty; or
//   inputs                array of {name, shape?}: named inputs (a data
//                         field each; the shape defaults to the field's), and
//                         layers (each may name its "inputs"); or
//   preset                a block type with preset inputs (bert_mlm) and that
//                         block's fields beside it
//   param_names           keras | torch ? keras (a preset: torch)
//   init                  {"safetensors": path} ? none: initial weights
//   A layer object: type (a registered layer type, core/layers/*.h) and
//   name ? "<stem>", "<stem>_1", ... (Keras stems, skipping given names;
//   [A-Za-z0-9_.-]{1,64}, unique), inputs ? the previous layer (the first
//   layer: the first model input), then the type's own fields.
// loss                    sparse_categorical_crossentropy | mse |
//                         binary_crossentropy (one logit or sigmoid per sample)
//                         ? sparse_categorical_crossentropy
// optimizer               object ? {"type": "adam"}
//   type                  required: sgd | adam | adamw
//   learning_rate         number > 0 ? 0.001
//   weight_decay          number >= 0 ? 0 (adamw: 0.004); decoupled, as Keras
//   sgd:        momentum (number in [0, 1]) ? 0, nesterov (bool) ? false
//   adam/adamw: beta_1, beta_2 (numbers in [0, 1)) ? 0.9, 0.999;
//               epsilon (number > 0) ? 1e-07
//   exclude_from_weight_decay  string or array of strings ? none (names
//                         containing one are not decayed)
//   global_clipnorm       number > 0 ? none (clip by the global L2 norm)
//   scale_with_replicas   bool ? false (rates x the job's replica count)
// lr_schedule             object ? {"type": "constant"}
//   type                  required: constant | piecewise | polynomial
//   warmup_steps          integer >= 0 ? 0 (lr * min(1, (step + 1) / warmup))
//   piecewise:  unit (epoch | step) ? epoch; boundaries (numbers >= 0,
//               strictly increasing, required); values (numbers > 0, exactly
//               one more than boundaries, required). The values replace
//               optimizer.learning_rate.
//   polynomial: decay_steps (integer >= 1, required), end_learning_rate
//               (number >= 0) ? 0.0001, power (number > 0) ? 1
// data                    object, required
//   format                required: mnist_idx | csv | synthetic | text |
//                         image_folder
//   scale                 number > 0 ? 1 (features are divided by it; not
//                         for text)
//   shuffle               bool ? true
//   num_classes           integer >= 1 ? 10 (not for text: the vocabulary)
//   mnist_idx:  train_images, train_labels, test_images, test_labels
//               (non-empty strings, required; .gz or raw)
//   csv:        train_path, test_path (non-empty strings, required),
//               header (bool) ? false
//   synthetic:  train_samples (integer >= 1) ? 8192, test_samples (integer
//               >= 1) ? 2048, seed (integer >= 0) ? 1234
//   text:       train_path, test_path (a path or an array of them,
//               required), min_line_chars (integer >= 0) ? 0, lowercase ?
//               true, vocab (a vocab.txt) ? built from train_path with
//               vocab_size (integer >= 8, required then), sequence_length
//               (integer >= 4) ? 128, pack_lines ? true, mask_rate (0, 1] ?
//               0.15, max_predictions [1, sequence_length - 2] ? 20,
//               mask_token_rate ? 0.8, random_token_rate ? 0.1 (in [0, 1],
//               summing to <= 1)
//   image_folder: train_path (a folder of class subfolders, required),
//               test_path (the same classes) | validation_split (0, 1):
//               exactly one; image_size (int or [h, w], required),
//               preprocessing (unit | mobilenet | imagenet) ? unit,
//               random_flip ? false, random_crop (0, 1] ? 1
//   Relative paths are resolved against the job file's folder.
// batch_size_per_replica  integer >= 1 ? 32 (one micro-batch)
// gradient_accumulation_steps integer in [1, 1024] ? 1 (micro-batches per
//                         replica and step, gradients summed)
// epochs | steps          integer >= 1; exactly one of the two is required
// precision               fp32 | bf16 | fp16 ? fp32 (bf16: matrix products
//                         and convolutions take bfloat16-rounded inputs,
//                         float32 products and sums; fp16: half-rounded, GPU
//                         replicas only, with dynamic loss scaling)
// checkpoint              object ? {}
//   every_steps           integer >= 0 ? 0 (0: at the end of each epoch)
//   keep                  integer >= 1 ? 3
// summary                 object ? {}
//   every_steps           integer >= 1 ? 100
// cluster                 object ? {}
//   workers               integer >= 1 ? 1, or {"min": M, "max": N} (an
//                         elastic job: 1 <= M <= N; the global batch is N's)
//   start_grace_seconds   number >= 0 ? 10 (elastic: wait for more than min)
//   rejoin_grace_seconds  number >= 0 ? 10 (elastic: wait for a replacement
//                         before going on with the survivors)
//   replicas_per_worker   integer >= 1 ? 1
//   collective            ring | nccl | auto ? ring
//   bucket_kib            integer >= 1 ? 1024 (gradient bucket size)
//   ring_chunk_kib        integer in [4, 1048576] ? 4096 (largest ring message)
//   ring_streams          integer in [0, 16] ? 0 (0: the worker's --lanes)
//   compression           none | bf16 ? none (gradients on the gRPC ring as
//                         bfloat16; not with collective nccl)
//   ring_checksum         boolean ? false (each gRPC ring message carries
//                         an XXH3-64 of its header and payload, checked as
//                         it is summed: a message damaged on the way fails
//                         the step instead of summing into it)
//   fingerprint_every_steps integer >= 0 ? 100 (0: only at the end)
//   allow_tf32            boolean ? false (GPU replicas: TF32 tensor cores)
//   shard                 none | optimizer ? none (optimizer: each worker
//                         keeps and updates 1/N of the optimizer state,
//                         ZeRO-1; gRPC ring and CPU replicas; the same
//                         bits as unsharded)
//   copies                boolean ? true (sharded: each worker's part also
//                         kept by the next worker, 2/N of the state each,
//                         so a lost worker's part is not lost)
// restart                 object ? {} (what happens when a worker is lost)
//   max_restarts          integer >= 0 ? 3 (0: the job fails at once)
//   backoff_seconds       number >= 0 ? 1 (doubles per restart, <= 60)
//   replacement_timeout_seconds number > 0 ? 120 (wait for a worker)
// audit                   object ? {}
//   samples               boolean ? false (each rank records every step's
//                         sample positions; `lockstep audit` counts them)
//
// Unknown fields are rejected everywhere, as are fields that belong to
// another variant (`optimizer.momentum: unknown field for optimizer type
// "adam"`).
#include "core/job/job_spec.h"

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/file_util.h"
#include "base/status_macros.h"
#include "core/job/job_spec_internal.h"
#include "core/json_util.h"

namespace lockstep {
namespace {

using job_spec_internal::Bad;
using job_spec_internal::CheckName;
using job_spec_internal::Collectives;
using job_spec_internal::Compressions;
using job_spec_internal::Json;
using job_spec_internal::LossTable;
using job_spec_internal::ParseModel;
using job_spec_internal::ParseOptimizer;
using job_spec_internal::ParseSchedule;
using job_spec_internal::Reader;
using job_spec_internal::ShardModes;

}  // namespace

std::string ShardModeName(ShardMode mode) {
  return job_spec_internal::NameOf(ShardModes(), mode);
}

namespace {

// cluster.workers: a count, or {"min": M, "max": N} with 1 <= M <= N.
absl::Status ParseWorkers(const Reader& c, ClusterSpec* cluster) {
  if (!c.Has("workers") || !c.Get("workers").is_object()) {
    RETURN_IF_ERROR(c.Int("workers", 1, &cluster->workers));
    cluster->min_workers = cluster->workers;
    return absl::OkStatus();
  }
  Reader w(c.Get("workers"), "cluster.workers");
  RETURN_IF_ERROR(w.CheckKeys(job_spec_internal::ElasticWorkersKeys()));
  RETURN_IF_ERROR(w.Require("min"));
  RETURN_IF_ERROR(w.Require("max"));
  RETURN_IF_ERROR(w.Int("min", 1, &cluster->min_workers));
  RETURN_IF_ERROR(w.Int("max", 1, &cluster->workers));
  if (cluster->min_workers > cluster->workers) {
    return Bad("cluster.workers.min",
               absl::StrCat("must be <= cluster.workers.max (",
                            cluster->workers, "), got ", cluster->min_workers));
  }
  return absl::OkStatus();
}

absl::Status ParseRoot(const Json& v, absl::string_view base_dir,
                       JobSpec* spec) {
  RETURN_IF_ERROR(Reader::CheckObject(v, "job"));
  Reader r(v, "");
  RETURN_IF_ERROR(r.CheckKeys(job_spec_internal::RootKeys()));
  RETURN_IF_ERROR(r.Require("name"));
  RETURN_IF_ERROR(r.String("name", &spec->name));
  RETURN_IF_ERROR(CheckName(spec->name, "name"));
  RETURN_IF_ERROR(r.Uint("seed", &spec->seed));
  RETURN_IF_ERROR(r.Require("model"));
  RETURN_IF_ERROR(ParseModel(r.Get("model"), base_dir, &spec->model));
  RETURN_IF_ERROR(r.Enum("loss", "loss", LossTable(), &spec->loss));
  if (r.Has("optimizer")) {
    RETURN_IF_ERROR(ParseOptimizer(r.Get("optimizer"), &spec->optimizer));
  }
  if (r.Has("lr_schedule")) {
    RETURN_IF_ERROR(ParseSchedule(r.Get("lr_schedule"), &spec->lr_schedule));
  }
  RETURN_IF_ERROR(r.Require("data"));
  RETURN_IF_ERROR(ParseDataSpec(r.Get("data"), base_dir, &spec->data));
  RETURN_IF_ERROR(
      job_spec_internal::ResolveInputShapes(spec->data, &spec->model));
  RETURN_IF_ERROR(
      r.Int("batch_size_per_replica", 1, &spec->batch_size_per_replica));
  RETURN_IF_ERROR(r.Int("gradient_accumulation_steps", 1,
                        &spec->gradient_accumulation_steps));
  if (spec->gradient_accumulation_steps > kMaxGradientAccumulationSteps) {
    return Bad("gradient_accumulation_steps",
               absl::StrCat("at most ", kMaxGradientAccumulationSteps,
                            " micro-batches a step, got ",
                            spec->gradient_accumulation_steps));
  }
  if (r.Has("epochs") == r.Has("steps")) {
    return Bad("epochs", "give exactly one of epochs or steps");
  }
  RETURN_IF_ERROR(r.Int("epochs", 1, &spec->epochs));
  RETURN_IF_ERROR(r.Int("steps", 1, &spec->steps));
  RETURN_IF_ERROR(r.Enum("precision", "precision",
                         job_spec_internal::Precisions(), &spec->precision));

  if (r.Has("checkpoint")) {
    RETURN_IF_ERROR(Reader::CheckObject(r.Get("checkpoint"), "checkpoint"));
    Reader c(r.Get("checkpoint"), "checkpoint");
    RETURN_IF_ERROR(c.CheckKeys(job_spec_internal::CheckpointKeys()));
    RETURN_IF_ERROR(c.Int("every_steps", 0, &spec->checkpoint.every_steps));
    RETURN_IF_ERROR(c.Int("keep", 1, &spec->checkpoint.keep));
  }
  if (r.Has("summary")) {
    RETURN_IF_ERROR(Reader::CheckObject(r.Get("summary"), "summary"));
    Reader s(r.Get("summary"), "summary");
    RETURN_IF_ERROR(s.CheckKeys(job_spec_internal::SummaryKeys()));
    RETURN_IF_ERROR(s.Int("every_steps", 1, &spec->summary.every_steps));
  }
  if (r.Has("cluster")) {
    RETURN_IF_ERROR(Reader::CheckObject(r.Get("cluster"), "cluster"));
    Reader c(r.Get("cluster"), "cluster");
    RETURN_IF_ERROR(c.CheckKeys(job_spec_internal::ClusterKeys()));
    RETURN_IF_ERROR(ParseWorkers(c, &spec->cluster));
    for (const char* grace : {"start_grace_seconds", "rejoin_grace_seconds"}) {
      if (c.Has(grace) && !spec->elastic()) {
        return Bad(absl::StrCat("cluster.", grace),
                   "only an elastic job waits for more workers: give "
                   "cluster.workers as {\"min\": M, \"max\": N} with M < N");
      }
    }
    RETURN_IF_ERROR(c.Number("start_grace_seconds",
                             job_spec_internal::kNonNegative,
                             &spec->cluster.start_grace_seconds));
    RETURN_IF_ERROR(c.Number("rejoin_grace_seconds",
                             job_spec_internal::kNonNegative,
                             &spec->cluster.rejoin_grace_seconds));
    RETURN_IF_ERROR(
        c.Int("replicas_per_worker", 1, &spec->cluster.replicas_per_worker));
    RETURN_IF_ERROR(c.Enum("collective", "collective", Collectives(),
                           &spec->cluster.collective));
    RETURN_IF_ERROR(c.Int("bucket_kib", 1, &spec->cluster.bucket_kib));
    RETURN_IF_ERROR(c.Int("ring_chunk_kib", 4, &spec->cluster.ring_chunk_kib));
    RETURN_IF_ERROR(c.Int("ring_streams", 0, &spec->cluster.ring_streams));
    RETURN_IF_ERROR(c.Enum("compression", "compression", Compressions(),
                           &spec->cluster.compression));
    if (spec->cluster.compression != Compression::kNone &&
        spec->cluster.collective == Collective::kNccl) {
      return absl::InvalidArgumentError(
          "cluster.compression: \"bf16\" compresses the gRPC ring; NCCL's "
          "all-reduce (collective \"nccl\") is float32 only: use collective "
          "\"ring\" or compression \"none\"");
    }
    if (spec->cluster.ring_chunk_kib > (int64_t{1} << 20)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cluster.ring_chunk_kib: at most 1048576 (1 GiB messages), got ",
          spec->cluster.ring_chunk_kib));
    }
    if (spec->cluster.ring_streams > 16) {
      return absl::InvalidArgumentError(
          absl::StrCat("cluster.ring_streams: at most 16 streams, got ",
                       spec->cluster.ring_streams));
    }
    RETURN_IF_ERROR(c.Int("fingerprint_every_steps", 0,
                          &spec->cluster.fingerprint_every_steps));
    RETURN_IF_ERROR(c.Bool("allow_tf32", &spec->cluster.allow_tf32));
    RETURN_IF_ERROR(c.Bool("ring_checksum", &spec->cluster.ring_checksum));
    RETURN_IF_ERROR(
        c.Enum("shard", "shard mode", ShardModes(), &spec->cluster.shard));
    RETURN_IF_ERROR(c.Bool("copies", &spec->cluster.copies));
    if (c.Has("copies") && spec->cluster.copies &&
        spec->cluster.shard == ShardMode::kNone) {
      // Else asked for and silently unused (false says what is so).
      return absl::InvalidArgumentError(
          "cluster.copies: true only with cluster.shard (the copies of "
          "sharded optimizer state a neighbour keeps); this job's state is "
          "whole");
    }
    if (spec->cluster.shard != ShardMode::kNone &&
        spec->cluster.collective == Collective::kNccl) {
      return absl::InvalidArgumentError(
          "cluster.shard: sharded optimizer state runs on the gRPC ring; "
          "NCCL (collective \"nccl\") keeps it whole: use collective "
          "\"ring\" or shard \"none\"");
    }
  }
  // At its fewest workers an elastic job's replicas take the same global
  // batch in more micro-batches (each batch_size_per_replica at most).
  const int64_t most_micros =
      spec->gradient_accumulation_steps *
      ((spec->cluster.workers + spec->cluster.min_workers - 1) /
       spec->cluster.min_workers);
  if (most_micros > kMaxGradientAccumulationSteps) {
    return Bad("cluster.workers.min",
               absl::StrCat("at ", spec->cluster.min_workers, " of at most ",
                            spec->cluster.workers,
                            " workers each replica would take its share of "
                            "the global batch in up to ",
                            most_micros, " micro-batches; at most ",
                            kMaxGradientAccumulationSteps));
  }
  if (r.Has("restart")) {
    RETURN_IF_ERROR(Reader::CheckObject(r.Get("restart"), "restart"));
    Reader c(r.Get("restart"), "restart");
    RETURN_IF_ERROR(c.CheckKeys(job_spec_internal::RestartKeys()));
    RETURN_IF_ERROR(c.Int("max_restarts", 0, &spec->restart.max_restarts));
    RETURN_IF_ERROR(c.Number("backoff_seconds", job_spec_internal::kNonNegative,
                             &spec->restart.backoff_seconds));
    RETURN_IF_ERROR(c.Number("replacement_timeout_seconds",
                             job_spec_internal::kPositive,
                             &spec->restart.replacement_timeout_seconds));
  }
  if (r.Has("audit")) {
    RETURN_IF_ERROR(Reader::CheckObject(r.Get("audit"), "audit"));
    Reader c(r.Get("audit"), "audit");
    RETURN_IF_ERROR(c.CheckKeys(job_spec_internal::AuditKeys()));
    RETURN_IF_ERROR(c.Bool("samples", &spec->audit.samples));
  }
  return absl::OkStatus();
}

absl::StatusOr<JobSpec> ParseNamed(absl::string_view json_text,
                                   absl::string_view base_dir,
                                   absl::string_view source) {
  ASSIGN_OR_RETURN(Json doc, ParseOrderedJson(json_text, source));
  JobSpec spec;
  // Every access in ParseRoot is type-checked first, so nothing throws.
  RETURN_IF_ERROR(ParseRoot(doc, base_dir, &spec));
  return spec;
}

absl::StatusOr<std::string> ReadJobFile(const std::string& path) {
  auto fail = [&path](int err) {
    std::string msg =
        absl::StrCat("cannot read job file \"", path, "\": ", strerror(err));
    if (err == ENOENT) return absl::NotFoundError(msg);
    if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(msg);
    return absl::InvalidArgumentError(msg);
  };
  return ReadFile(path, fail, fail);
}

}  // namespace

std::string AccumulationNote(const JobSpec& spec) {
  if (spec.gradient_accumulation_steps <= 1) return "";
  return absl::StrCat(" x ", spec.gradient_accumulation_steps,
                      " micro-batches");
}

absl::StatusOr<JobSpec> ParseJobSpec(absl::string_view json_text,
                                     absl::string_view base_dir) {
  return ParseNamed(json_text, base_dir, "job");
}

absl::StatusOr<ModelSpec> ParseModelSpec(absl::string_view json_text) {
  ASSIGN_OR_RETURN(Json doc, ParseOrderedJson(json_text, "model"));
  ModelSpec model;
  RETURN_IF_ERROR(ParseModel(doc, "", &model));
  for (size_t i = 0; i < model.inputs.size(); ++i) {
    // An ONNX graph gives its input's shape when built.
    if (model.inputs[i].shape.empty() && model.onnx_path.empty()) {
      return Bad(absl::StrCat("model.inputs[", i, "].shape"), "required");
    }
  }
  return model;
}

DataOptions DataOptionsFor(const JobSpec& spec) {
  DataOptions o;
  o.fields.clear();
  for (const ModelInput& in : spec.model.inputs) o.fields.push_back(in.name);
  o.seed = spec.seed;
  return o;
}

absl::StatusOr<JobSpec> LoadJobSpec(const std::string& path,
                                    const std::string& data_dir) {
  ASSIGN_OR_RETURN(std::string text, ReadJobFile(path));
  if (!data_dir.empty()) return ParseNamed(text, data_dir, path);
  // A bare file name: the paths stay relative to the working folder.
  if (path.find('/') == std::string::npos) return ParseNamed(text, "", path);
  return ParseNamed(text, Dirname(path), path);
}

}  // namespace lockstep
