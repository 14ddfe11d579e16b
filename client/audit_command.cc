// `lockstep audit` (see audit_command.h).
#include "client/audit_command.h"

#include <sys/stat.h>

#include <iostream>

#include "base/file_util.h"
#include "client/cli_flags.h"
#include "core/audit/audit_check.h"

namespace lockstep {

int RunAuditCommand(const std::vector<std::string>& args) {
  const std::string usage =
      "usage: lockstep audit STORAGE/jobs/NAME | AUDIT.jsonl\n"
      "  checks a job's sample audit (the job's \"audit\": {\"samples\": "
      "true}): per epoch, the\n"
      "  training samples seen 0, 1 or more times by the steps that stand "
      "(steps a later\n"
      "  generation redid are left out), each record checked against the "
      "shard plan.\n"
      "  Exit 0 when every complete epoch saw each sample exactly once.\n"
      "  (A client without the coordinator's storage: `lockstep pull` "
      "fetches audit.jsonl.)\n";
  absl::StatusOr<ParsedFlags> f = ParseFlags(args, {}, {"help"});
  if (!f.ok() || f->Has("help") || f->positional.size() != 1) {
    if (!f.ok())
      std::cerr << "lockstep audit: " << f.status().message() << "\n";
    if (f.ok() && !f->Has("help")) {
      std::cerr << "lockstep audit: expected one job folder or audit file\n";
    }
    (f.ok() && f->Has("help") ? std::cout : std::cerr) << usage;
    return f.ok() && f->Has("help") ? 0 : 2;
  }
  std::string path = f->positional[0];
  struct stat st;
  if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    path = JoinPath(path, "audit.jsonl");
  }
  absl::StatusOr<AuditReport> report = CheckAudit(path);
  if (!report.ok()) {
    std::cerr << "lockstep audit: " << report.status().message() << "\n";
    return 2;
  }
  std::cout << FormatAudit(*report);
  return report->exactly_once() ? 0 : 1;
}

}  // namespace lockstep
