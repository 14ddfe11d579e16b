// `lockstep pull JOB DEST`: a job's result, summaries and one checkpoint
// fetched over the job service into DEST, laid out as the job's folder on
// the coordinator's storage (DEST/result.json, DEST/summaries/...,
// DEST/checkpoints/step-XXXXXXXX/...), for a machine that does not mount it.
#include "client/pull_command.h"

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "base/file_util.h"
#include "client/file_fetch.h"
#include "client/job_command_util.h"
#include "client/tls_flags.h"
#include "core/checkpoint/checkpoint.h"

namespace lockstep {
namespace {

namespace v1 = lockstep::v1;

std::string StepFolder(int64_t step) {
  return absl::StrFormat("checkpoints/step-%08d/", step);
}

// The committed steps among `files` ("checkpoints/step-00000100/..."), in
// order, for the message of a step that is not there.
std::string CommittedSteps(const v1::ListJobFilesResponse& files) {
  std::vector<std::string> steps;
  for (const v1::JobFile& f : files.files()) {
    absl::string_view p = f.path();
    if (!absl::ConsumePrefix(&p, "checkpoints/step-")) continue;
    const size_t slash = p.find('/');
    int64_t step;
    if (slash == absl::string_view::npos ||
        !absl::SimpleAtoi(p.substr(0, slash), &step)) {
      continue;
    }
    const std::string s = absl::StrCat(step);
    if (steps.empty() || steps.back() != s) steps.push_back(s);
  }
  return steps.empty() ? "none" : absl::StrJoin(steps, ", ");
}

}  // namespace

int RunPullCommand(const std::vector<std::string>& args) {
  const std::string usage = absl::StrCat(
      "usage: lockstep pull JOB DEST [--step N] [--coordinator HOST:PORT] ",
      kSecurityFlags, "\n",
      "  fetches the job's result.json, summaries and its last committed\n"
      "  checkpoint (--step N: that one) over the job service into DEST,\n"
      "  laid out as the job's folder on the coordinator's storage; every\n"
      "  chunk and file is CRC-checked, a broken or damaged transfer resumes,\n"
      "  and files already in DEST are checked, not fetched again\n",
      kClientSecurityUsage);
  absl::StatusOr<ParsedFlags> f = ParseJobVerbFlags(args, {"step"}, {});
  if (!f.ok() || f->Has("help") || f->positional.size() != 2) {
    if (!f.ok()) std::cerr << "lockstep pull: " << f.status().message() << "\n";
    (f.ok() && f->Has("help") ? std::cout : std::cerr) << usage;
    return f.ok() && f->Has("help") ? 0 : 2;
  }
  absl::StatusOr<int64_t> step = f->GetInt("step", -1);
  if (!step.ok() || (f->Has("step") && *step < 0)) {
    std::cerr << "lockstep pull: --step: expected a step number >= 0\n";
    return 2;
  }
  const std::string& job = f->positional[0];
  const std::string& dest = f->positional[1];
  std::unique_ptr<JobClient> client = JobClientFromFlags("pull", *f);
  if (client == nullptr) return 2;
  absl::StatusOr<v1::JobStatus> status = client->Get(job);
  if (!status.ok()) return FailVerb("pull", status.status());
  absl::StatusOr<v1::ListJobFilesResponse> all = client->ListFiles(job, "");
  if (!all.ok()) return FailVerb("pull", all.status());

  // Which checkpoint: --step, else the last committed one.
  std::string checkpoint;
  if (*step >= 0) {
    checkpoint = StepFolder(*step);
  } else if (!status->checkpoint_path().empty()) {
    const std::string& p = status->checkpoint_path();
    checkpoint = absl::StrCat("checkpoints/", p.substr(p.rfind('/') + 1), "/");
  }
  std::vector<v1::JobFile> wanted;
  bool checkpoint_found = false;
  for (const v1::JobFile& file : all->files()) {
    const std::string& p = file.path();
    const bool in_checkpoint =
        !checkpoint.empty() && absl::StartsWith(p, checkpoint);
    checkpoint_found |= in_checkpoint;
    if (p == "result.json" || absl::StartsWith(p, "summaries/") ||
        in_checkpoint) {
      wanted.push_back(file);
    }
  }
  if (*step >= 0 && !checkpoint_found) {
    return FailVerb(
        "pull", absl::NotFoundError(absl::StrFormat(
                    "job %s has no checkpoint at step %d; committed: %s", job,
                    *step, CommittedSteps(*all))));
  }
  if (checkpoint.empty()) {
    std::cout << absl::StrFormat("job %s (%s) has no committed checkpoint yet",
                                 job, v1::JobState_Name(status->state()))
              << std::endl;
  }

  FetchOptions options;
  options.on_retry = [](const std::string& why) {
    std::cerr << "lockstep pull: " << why << std::endl;
  };
  options.backoff = [](int attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200 * attempt));
  };
  const auto start = std::chrono::steady_clock::now();
  int64_t bytes = 0;
  for (const v1::JobFile& file : wanted) {
    const std::string target = JoinPath(dest, file.path());
    if (absl::Status s = MakeDirs(Dirname(target)); !s.ok()) {
      return FailVerb("pull", s);
    }
    // A file already here is checked, not fetched again: as a partial file
    // of full length its read is only the closing chunk with the file's
    // CRC-32 (a mismatch fetches it again from the start).
    FILE* existing = fopen(target.c_str(), "rb");
    if (existing != nullptr) {
      fclose(existing);
      if (rename(target.c_str(), (target + ".partial").c_str()) != 0) {
        return FailVerb("pull", ErrnoToStatus("rename", target, errno));
      }
    }
    absl::StatusOr<std::unique_ptr<DiskSink>> sink = DiskSink::Open(target);
    if (!sink.ok()) return FailVerb("pull", sink.status());
    absl::Status s = client->FetchFile(job, file, **sink, options);
    if (s.ok()) s = (*sink)->Commit();
    if (!s.ok()) return FailVerb("pull", s);
    bytes += file.size();
    std::cout << absl::StrFormat("  %-52s %12d bytes", file.path(), file.size())
              << std::endl;
  }
  // The copy is the storage's, byte for byte (each file's CRC-32 above);
  // whether those bytes are the checkpoint that was committed is its own
  // CRC32Cs' say (state.json), as when a job resumes from it.
  if (checkpoint_found) {
    const std::string folder =
        JoinPath(dest, checkpoint.substr(0, checkpoint.size() - 1));
    const absl::Status verified = VerifyCheckpointFiles(folder);
    if (absl::IsDataLoss(verified)) {
      return FailVerb("pull",
                      absl::DataLossError(absl::StrFormat(
                          "pulled into %s, but checkpoint %s is damaged on the "
                          "coordinator's storage (%s); committed: %s (--step N "
                          "pulls another)",
                          dest, checkpoint.substr(0, checkpoint.size() - 1),
                          verified.message(), CommittedSteps(*all))));
    }
    if (!verified.ok()) return FailVerb("pull", verified);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  std::cout << absl::StrFormat(
                   "pulled %d files (%.1f MB) of job %s (%s) into %s in "
                   "%.1f s",
                   wanted.size(), bytes / 1e6, job,
                   v1::JobState_Name(status->state()), dest, seconds)
            << std::endl;
  return 0;
}

}  // namespace lockstep
