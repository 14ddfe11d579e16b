// The image root tests' fixture: what it runs on the host (env, tar, ldd's
// listing parsed) and its static members.
#include "deploy/image_root_test_fixture.h"

#include <unistd.h>

#include <cstdlib>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace lockstep {
namespace testing {
namespace image_root {

std::string ImageBinary() {
  const char* b = std::getenv("LOCKSTEP_IMAGE_BINARY");
  return b != nullptr ? b : "client/lockstep";
}

std::string Env(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

std::string Which(const std::string& tool) {
  std::string dirs = Env("PATH", "") + ":/usr/sbin:/sbin:/usr/bin:/bin";
  std::stringstream ss(dirs);
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    if (dir.empty()) continue;
    const std::string path = dir + "/" + tool;
    if (access(path.c_str(), X_OK) == 0) return path;
  }
  return "";
}

std::set<std::string> LoadedPaths(const std::string& listing,
                                  std::vector<std::string>* missing) {
  static const std::regex kArrow(R"(^\s*\S+ => (/\S+) \(0x[0-9a-f]+\)$)");
  static const std::regex kBare(R"(^\s*(/\S+) \(0x[0-9a-f]+\)$)");
  std::set<std::string> paths;
  std::stringstream ss(listing);
  std::string line;
  std::smatch m;
  while (std::getline(ss, line)) {
    if (line.find("not found") != std::string::npos) missing->push_back(line);
    if (std::regex_match(line, m, kArrow) || std::regex_match(line, m, kBare)) {
      paths.insert(m[1]);
    }
  }
  return paths;
}

std::string ImageRootTest::tar_, ImageRootTest::root_, ImageRootTest::logs_,
    ImageRootTest::unpack_error_, ImageRootTest::skip_reason_,
    ImageRootTest::note_;
bool ImageRootTest::gpu_ = false, ImageRootTest::owners_kept_ = false,
     ImageRootTest::as_user_ = false;
Entry ImageRootTest::entry_ = Entry::kNone;

}  // namespace image_root
}  // namespace testing
}  // namespace lockstep
