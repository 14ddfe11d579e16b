// Rendering (kubectl kustomize), YAML to JSON, JSON access and the
// ManifestsTest fixture of the deploy/k8s manifest tests.
//
// YAML to JSON without a YAML library and without a cluster: `kubectl
// annotate --local -f FILE -o json` reads the rendered YAML with kubectl's
// own decoder and prints each object as JSON (no API server, no discovery:
// `kubectl create --dry-run=client` needs one). It works the same in
// kubectl 1.20 (Debian's kubernetes-client, Kustomize v2.0.3) and 1.32
// (Kustomize v5). LOCKSTEP_KUBECTL=/path/to/kubectl (with --test_env)
// picks the binary; otherwise the first kubectl on PATH, /usr/bin,
// /usr/local/bin.
#include "deploy/k8s/manifests_test_util.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <stdexcept>

#include "deploy/k8s/manifests_checks.h"

namespace lockstep {
namespace testing {
namespace k8s {

namespace fs = std::filesystem;

namespace {

constexpr char kRenderedAnnotation[] = "lockstep-test/rendered";

bool Executable(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
         access(path.c_str(), X_OK) == 0;
}

std::string FindKubectl() {
  if (const char* env = std::getenv("LOCKSTEP_KUBECTL"); env && *env) {
    return Executable(env) ? env : "";
  }
  std::vector<std::string> dirs;
  if (const char* path = std::getenv("PATH")) {
    std::string p = path;
    size_t start = 0;
    while (start <= p.size()) {
      size_t end = p.find(':', start);
      if (end == std::string::npos) end = p.size();
      if (end > start) dirs.push_back(p.substr(start, end - start));
      start = end + 1;
    }
  }
  dirs.insert(dirs.end(), {"/usr/bin", "/usr/local/bin"});
  for (const std::string& d : dirs) {
    if (Executable(d + "/kubectl")) return d + "/kubectl";
  }
  return "";
}

const Json& Null() {
  static const Json* null = new Json();
  return *null;
}

}  // namespace

std::string Describe(const std::vector<std::string>& argv, const RunResult& r) {
  std::string s;
  for (const std::string& a : argv) s += (s.empty() ? "" : " ") + a;
  if (!r.exit.exited) return s + ": still running after the time limit";
  return s + ": exit " + std::to_string(r.exit.exit_code) + " signal " +
         std::to_string(r.exit.term_signal) + "\n" + r.out + r.err;
}

bool Succeeded(const RunResult& r) {
  return r.exit.exited && r.exit.exit_code == 0;
}

std::string DecodeBase64(const std::string& in) {
  std::string out;
  unsigned buf = 0;
  int bits = 0;
  for (char c : in) {
    int v;
    if (c >= 'A' && c <= 'Z') {
      v = c - 'A';
    } else if (c >= 'a' && c <= 'z') {
      v = c - 'a' + 26;
    } else if (c >= '0' && c <= '9') {
      v = c - '0' + 52;
    } else if (c == '+') {
      v = 62;
    } else if (c == '/') {
      v = 63;
    } else {
      continue;  // '=', whitespace
    }
    buf = (buf << 6) | v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((buf >> bits) & 0xff));
    }
  }
  return out;
}

std::vector<Json> ParseJsonStream(const std::string& text, std::string* error) {
  std::vector<Json> objects;
  int depth = 0;
  bool in_string = false, escaped = false;
  size_t start = std::string::npos;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{') {
      if (depth++ == 0) start = i;
    } else if (c == '}') {
      if (--depth == 0) {
        Json j = Json::parse(text.substr(start, i - start + 1), nullptr, false);
        if (j.is_discarded()) {
          *error = "unparsable JSON object at offset " + std::to_string(start);
          return {};
        }
        if (j.value("kind", "") == "List" && j.contains("items")) {
          for (const Json& item : j["items"]) objects.push_back(item);
        } else {
          objects.push_back(std::move(j));
        }
      }
    } else if (depth == 0 && !isspace(static_cast<unsigned char>(c))) {
      *error = std::string("unexpected '") + c + "' between objects";
      return {};
    }
  }
  if (depth != 0) *error = "truncated JSON";
  return objects;
}

const Json& Get(const Json& j, std::initializer_list<const char*> path) {
  const Json* cur = &j;
  for (const char* key : path) {
    if (!cur->is_object() || !cur->contains(key)) return Null();
    cur = &(*cur)[key];
  }
  return *cur;
}

std::string Str(const Json& j) {
  if (j.is_string()) return j.get<std::string>();
  if (j.is_null()) return "";
  return j.dump();
}

// --- The fixture ---

void ManifestsTest::SetUpTestSuite() {
  // kubectl caches under $HOME; never read a developer's kubeconfig.
  const char* tmp = std::getenv("TEST_TMPDIR");
  setenv("HOME", tmp ? tmp : "/tmp", 1);
  unsetenv("KUBECONFIG");
  const char* path = std::getenv("PATH");
  setenv(
      "PATH",
      (std::string(path ? path : "") + ":/usr/local/bin:/usr/bin:/bin").c_str(),
      1);
  kubectl_ = new std::string(FindKubectl());
  prepared_ = new std::string();
  setup_error_ = new std::string();
  if (access(kOpenSsl, X_OK) != 0) {
    *setup_error_ = std::string(kOpenSsl) +
                    " not found: make-secrets.sh needs the openssl CLI "
                    "(scripts/install_deps.sh installs it)";
    return;
  }
  try {
    *prepared_ = CopyManifests("prepared");
  } catch (const std::exception& e) {
    *setup_error_ = std::string("copying deploy/k8s: ") + e.what();
    return;
  }
  const std::vector<std::string> argv = {kBash, *prepared_ + "/make-secrets.sh",
                                         "--namespace", kNamespace};
  RunResult r = RunProcess(argv, NewTempDir("log"), kTimeoutS);
  if (!Succeeded(r)) *setup_error_ = Describe(argv, r);
}

void ManifestsTest::TearDownTestSuite() {
  delete kubectl_;
  delete prepared_;
  delete setup_error_;
}

std::string ManifestsTest::NoKubectlMessage() {
  return std::getenv("LOCKSTEP_KUBECTL")
             ? std::string("LOCKSTEP_KUBECTL=") +
                   std::getenv("LOCKSTEP_KUBECTL") + " is not executable"
             : "kubectl not found: scripts/install_deps.sh installs "
               "kubernetes-client";
}

std::string ManifestsTest::CopyManifests(const std::string& name) {
  const std::string src = Runfile("deploy/k8s");
  const std::string dst = NewTempDir(name);
  for (const char* part : {"base", "overlays", "examples"}) {
    for (const auto& e : fs::recursive_directory_iterator(
             src + "/" + part,
             fs::directory_options::follow_directory_symlink)) {
      if (!e.is_regular_file()) continue;  // follows the runfile links
      // Lexically: fs::relative would follow the runfile links back to
      // the source tree.
      const fs::path rel = e.path().lexically_relative(src);
      if (rel.empty() || *rel.begin() == "..") {
        throw std::runtime_error("runfile outside deploy/k8s: " +
                                 e.path().string());
      }
      fs::create_directories((dst / rel).parent_path());
      fs::copy_file(e.path(), dst / rel);  // the content, not the link
      fs::permissions(dst / rel, fs::perms::owner_write, fs::perm_options::add);
    }
  }
  fs::copy_file(src + "/make-secrets.sh", dst + "/make-secrets.sh");
  return dst;
}

std::string ManifestsTest::CopyPrepared(const std::string& name) {
  const std::string dst = NewTempDir(name);
  fs::copy(*prepared_, dst,
           fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  return dst;
}

SecretFiles ManifestsTest::ReadSecrets(const std::string& tree) {
  const std::string d = tree + "/base/secrets/";
  return {ReadFileOrEmpty(d + "ca.crt"),
          ReadFileOrEmpty(d + "ca.key"),
          ReadFileOrEmpty(d + "coordinator.crt"),
          ReadFileOrEmpty(d + "coordinator.key"),
          ReadFileOrEmpty(d + "worker.crt"),
          ReadFileOrEmpty(d + "worker.key"),
          ReadFileOrEmpty(d + "token")};
}

std::vector<Json> ManifestsTest::YamlToObjects(const std::string& yaml_path,
                                               std::string* error) {
  const std::vector<std::string> argv = {
      *kubectl_, "annotate",
      "--local", "-f",
      yaml_path, "-o",
      "json",    std::string(kRenderedAnnotation) + "=1"};
  RunResult r = RunProcess(argv, NewTempDir("log"), kTimeoutS);
  if (!Succeeded(r)) {
    *error = Describe(argv, r);
    return {};
  }
  std::vector<Json> objects = ParseJsonStream(r.out, error);
  for (Json& o : objects) {  // take our annotation back out
    Json& a = o["metadata"]["annotations"];
    a.erase(kRenderedAnnotation);
    if (a.empty()) o["metadata"].erase("annotations");
  }
  return objects;
}

std::vector<Json> ManifestsTest::Render(const std::string& dir,
                                        std::string* error) {
  const std::vector<std::string> argv = {*kubectl_, "kustomize", dir};
  RunResult r = RunProcess(argv, NewTempDir("log"), kTimeoutS);
  if (!Succeeded(r)) {
    *error = Describe(argv, r);
    return {};
  }
  const std::string yaml = NewTempDir("render") + "/rendered.yaml";
  WriteStringToFile(yaml, r.out);
  return YamlToObjects(yaml, error);
}

Json ManifestsTest::ExampleJob(const std::string& file) {
  return Json::parse(ReadFileOrEmpty(Runfile("examples/" + file)), nullptr,
                     false);
}

Problems ManifestsTest::RenderAndCheck(const std::string& tree, Flavor flavor,
                                       std::string* error) {
  std::vector<Json> objects =
      Render(tree + (flavor == Flavor::kGpu  ? "/overlays/gpu"
                     : flavor == Flavor::kHa ? "/overlays/ha"
                                             : "/overlays/cpu"),
             error);
  if (!error->empty()) return {};
  return CheckDeployment(Objects(std::move(objects)), flavor, ReadSecrets(tree),
                         ExampleJob("mnist_cnn_multiworker.json"),
                         ExampleJob("default.json"));
}

std::string* ManifestsTest::kubectl_ = nullptr;
std::string* ManifestsTest::prepared_ = nullptr;
std::string* ManifestsTest::setup_error_ = nullptr;

}  // namespace k8s
}  // namespace testing
}  // namespace lockstep
