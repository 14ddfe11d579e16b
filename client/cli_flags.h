// A minimal subcommand flag parser: `--name value`, `--name=value`, boolean
// `--name`, and positional arguments. Unknown flags are errors that name
// the flag, so a typo never silently changes a run.
#ifndef LOCKSTEP_CLIENT_CLI_FLAGS_H_
#define LOCKSTEP_CLIENT_CLI_FLAGS_H_

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace lockstep {

struct ParsedFlags {
  std::map<std::string, std::string> values;  // flag name (no dashes) -> value
  std::vector<std::string> positional;

  bool Has(const std::string& name) const { return values.count(name) > 0; }
  std::string Get(const std::string& name, const std::string& def) const;
  // Integer flag; error "--threads: expected an integer, got "x"".
  absl::StatusOr<int64_t> GetInt(const std::string& name, int64_t def) const;
};

// `value_flags` take a value; `bool_flags` take none.
absl::StatusOr<ParsedFlags> ParseFlags(const std::vector<std::string>& args,
                                       const std::set<std::string>& value_flags,
                                       const std::set<std::string>& bool_flags);

}  // namespace lockstep

#endif  // LOCKSTEP_CLIENT_CLI_FLAGS_H_
