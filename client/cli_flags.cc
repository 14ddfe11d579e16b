// Subcommand flag parsing.
#include "client/cli_flags.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace lockstep {

std::string ParsedFlags::Get(const std::string& name,
                             const std::string& def) const {
  auto it = values.find(name);
  return it == values.end() ? def : it->second;
}

absl::StatusOr<int64_t> ParsedFlags::GetInt(const std::string& name,
                                            int64_t def) const {
  auto it = values.find(name);
  if (it == values.end()) return def;
  int64_t v;
  if (!absl::SimpleAtoi(it->second, &v)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", name, ": expected an integer, got \"", it->second, "\""));
  }
  return v;
}

absl::StatusOr<ParsedFlags> ParseFlags(
    const std::vector<std::string>& args,
    const std::set<std::string>& value_flags,
    const std::set<std::string>& bool_flags) {
  ParsedFlags out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.size() < 2 || a.compare(0, 2, "--") != 0) {
      out.positional.push_back(a);
      continue;
    }
    std::string name = a.substr(2), value;
    bool has_value = false;
    size_t eq = name.find('=');
    if (eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    if (bool_flags.count(name)) {
      if (has_value) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", name, " takes no value"));
      }
      out.values[name] = "true";
    } else if (value_flags.count(name)) {
      if (!has_value) {
        if (i + 1 >= args.size()) {
          return absl::InvalidArgumentError(
              absl::StrCat("--", name, " needs a value"));
        }
        value = args[++i];
      }
      out.values[name] = value;
    } else {
      // Every flag the command takes, so a typo shows the right one (and
      // the reference test, docs/cli.md, reads the same list).
      std::set<std::string> known = value_flags;
      known.insert(bool_flags.begin(), bool_flags.end());
      std::string list;
      for (const std::string& k : known) {
        absl::StrAppend(&list, list.empty() ? "" : ", ", "--", k);
      }
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag --", name, " (this command takes ",
                       known.empty() ? "no flags" : list, ")"));
    }
  }
  return out;
}

}  // namespace lockstep
