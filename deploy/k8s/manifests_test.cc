// The Kubernetes manifests of deploy/k8s: copies them to a temporary folder,
// makes the Secrets' files with make-secrets.sh, renders each overlay with
// `kubectl kustomize` and checks that the pieces fit together: names,
// ports, probes, volumes, flags, Secrets, resources, security.
//
// YAML to JSON without a YAML library and without a cluster: `kubectl
// annotate --local -f FILE -o json` reads the rendered YAML with kubectl's
// own decoder and prints each object as JSON (no API server, no discovery:
// `kubectl create --dry-run=client` needs one). It works the same in
// kubectl 1.20 (Debian's kubernetes-client, Kustomize v2.0.3) and 1.32
// (Kustomize v5). LOCKSTEP_KUBECTL=/path/to/kubectl (with --test_env)
// picks the binary; otherwise the first kubectl on PATH, /usr/bin,
// /usr/local/bin.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/subprocess.h"

namespace lockstep {
namespace testing {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

constexpr double kTimeoutS = 90;  // one kubectl or openssl call
constexpr char kNamespace[] = "lockstep-test";
constexpr char kOpenSsl[] = "/usr/bin/openssl";
constexpr char kBash[] = "/bin/bash";
constexpr char kRenderedAnnotation[] = "lockstep-test/rendered";

// The names the manifests promise (README, example Job, clients).
constexpr char kCoordinator[] = "lockstep-coordinator";
constexpr char kWorker[] = "lockstep-worker";
constexpr char kStorageClaim[] = "lockstep-storage";
constexpr char kJobConfigMap[] = "lockstep-job";

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

// Base64 (standard alphabet); whitespace is skipped (Kustomize v5 wraps
// long Secret values).
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

// Splits kubectl's output (JSON objects one after another) into objects.
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

// --- JSON access ---

const Json& Null() {
  static const Json* null = new Json();
  return *null;
}

// j[path...], or null when any step is missing.
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

// --- Objects ---

class Objects {
 public:
  explicit Objects(std::vector<Json> objects) : objects_(std::move(objects)) {}
  const Json* Find(const std::string& kind, const std::string& name) const {
    for (const Json& o : objects_) {
      if (Str(Get(o, {"kind"})) == kind &&
          Str(Get(o, {"metadata", "name"})) == name)
        return &o;
    }
    return nullptr;
  }
  std::vector<const Json*> OfKind(const std::string& kind) const {
    std::vector<const Json*> out;
    for (const Json& o : objects_) {
      if (Str(Get(o, {"kind"})) == kind) out.push_back(&o);
    }
    return out;
  }
  const std::vector<Json>& all() const { return objects_; }

 private:
  std::vector<Json> objects_;
};

// What a set of checks found wrong, in words.
class Problems {
 public:
  void Add(const std::string& what) { list_.push_back(what); }
  bool Expect(bool ok, const std::string& what) {
    if (!ok) Add(what);
    return ok;
  }
  const std::vector<std::string>& list() const { return list_; }
  bool Mentions(const std::string& needle) const {
    for (const std::string& p : list_) {
      if (p.find(needle) != std::string::npos) return true;
    }
    return false;
  }
  std::string Joined() const {
    std::string s;
    for (const std::string& p : list_) s += "  - " + p + "\n";
    return s;
  }

 private:
  std::vector<std::string> list_;
};

// --- Pod templates ---

// A workload's pod template with the helpers the checks need.
struct Pod {
  std::string owner;             // "Deployment lockstep-coordinator"
  const Json* spec = nullptr;    // template.spec
  const Json* labels = nullptr;  // template.metadata.labels
  const Json* annotations = nullptr;

  const Json* Container(const std::string& name) const {
    for (const Json& c : Get(*spec, {"containers"})) {
      if (Str(Get(c, {"name"})) == name) return &c;
    }
    return nullptr;
  }
  const Json* Volume(const std::string& name) const {
    for (const Json& v : Get(*spec, {"volumes"})) {
      if (Str(Get(v, {"name"})) == name) return &v;
    }
    return nullptr;
  }
};

std::optional<Pod> PodOf(const Json* workload) {
  if (workload == nullptr) return std::nullopt;
  const Json& tmpl = Get(*workload, {"spec", "template"});
  if (!tmpl.is_object() || !Get(tmpl, {"spec", "containers"}).is_array()) {
    return std::nullopt;
  }
  Pod p;
  p.owner = Str(Get((*workload), {"kind"})) + " " +
            Str(Get(*workload, {"metadata", "name"}));
  p.spec = &tmpl["spec"];
  p.labels = &Get(tmpl, {"metadata", "labels"});
  p.annotations = &Get(tmpl, {"metadata", "annotations"});
  return p;
}

// Every key=value of `selector` is among `labels` (a non-empty selector).
bool SelectorMatches(const Json& selector, const Json& labels) {
  if (!selector.is_object() || selector.empty() || !labels.is_object()) {
    return false;
  }
  for (auto it = selector.begin(); it != selector.end(); ++it) {
    if (!labels.contains(it.key()) || labels[it.key()] != it.value()) {
      return false;
    }
  }
  return true;
}

// The container's args with $(VAR) expanded as the kubelet does: a `value`
// env var by its value, a downward-API one as <fieldRef:PATH>; unknown
// references stay as they are.
std::vector<std::string> ExpandedArgs(const Json& container) {
  std::map<std::string, std::string> env;
  for (const Json& e : Get(container, {"env"})) {
    const Json& field = Get(e, {"valueFrom", "fieldRef", "fieldPath"});
    env[Str(Get(e, {"name"}))] = field.is_string()
                                     ? "<fieldRef:" + Str(field) + ">"
                                     : Str(Get(e, {"value"}));
  }
  std::vector<std::string> out;
  for (const Json& a : Get(container, {"args"})) {
    const std::string arg = Str(a);
    std::string s;
    for (size_t i = 0; i < arg.size();) {
      if (arg.compare(i, 2, "$$") == 0) {
        s += '$';
        i += 2;
        continue;
      }
      if (arg.compare(i, 2, "$(") == 0) {
        const size_t close = arg.find(')', i);
        if (close != std::string::npos) {
          const std::string name = arg.substr(i + 2, close - i - 2);
          if (env.count(name)) {
            s += env[name];
            i = close + 1;
            continue;
          }
        }
      }
      s += arg[i++];
    }
    out.push_back(s);
  }
  return out;
}

// The value of --flag (as "--flag V" or "--flag=V"); nullopt when absent.
// A flag given twice is a problem.
std::optional<std::string> Flag(const std::vector<std::string>& args,
                                const std::string& flag, Problems* problems,
                                const std::string& who) {
  std::optional<std::string> value;
  int count = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == flag && i + 1 < args.size()) {
      value = args[++i];
      ++count;
    } else if (args[i].rfind(flag + "=", 0) == 0) {
      value = args[i].substr(flag.size() + 1);
      ++count;
    }
  }
  if (count > 1)
    problems->Add(who + ": " + flag + " is given " + std::to_string(count) +
                  " times");
  return value;
}

bool HasArg(const std::vector<std::string>& args, const std::string& arg) {
  for (const std::string& a : args) {
    if (a == arg) return true;
  }
  return false;
}

// "HOST:PORT" -> PORT (0 when malformed).
int PortOf(const std::string& host_port) {
  const size_t colon = host_port.rfind(':');
  if (colon == std::string::npos) return 0;
  return std::atoi(host_port.c_str() + colon + 1);
}
std::string HostOf(const std::string& host_port) {
  return host_port.substr(0, host_port.rfind(':'));
}

// The container port a Service targetPort (name or number) reaches; 0 when
// none.
int ResolveContainerPort(const Json& container, const Json& target) {
  for (const Json& p : Get(container, {"ports"})) {
    if (target.is_string() && Str(Get(p, {"name"})) == Str(target))
      return p.value("containerPort", 0);
    if (target.is_number() && p.value("containerPort", 0) == target.get<int>())
      return p.value("containerPort", 0);
  }
  return 0;
}

bool HasContainerPort(const Json& container, int port) {
  for (const Json& p : Get(container, {"ports"})) {
    if (p.value("containerPort", 0) == port) return true;
  }
  return false;
}

// What a file path in a container is: the object (Secret or ConfigMap) and
// key behind the volume mounted over it.
struct MountedFile {
  std::string kind, name, key;
  bool read_only = false;
};

std::optional<MountedFile> ResolveFile(const Pod& pod, const Json& container,
                                       const std::string& path,
                                       std::string* why) {
  const Json* best = nullptr;
  std::string best_path;
  for (const Json& m : Get(container, {"volumeMounts"})) {
    const std::string mp = Str(Get(m, {"mountPath"}));
    if (path.size() > mp.size() && path.compare(0, mp.size(), mp) == 0 &&
        path[mp.size()] == '/' && mp.size() > best_path.size()) {
      best = &m;
      best_path = mp;
    }
  }
  if (best == nullptr) {
    *why = "no volume is mounted over " + path;
    return std::nullopt;
  }
  const Json* volume = pod.Volume(Str(Get((*best), {"name"})));
  if (volume == nullptr) {
    *why = "volume " + Str(Get((*best), {"name"})) + " (mounted at " +
           best_path + ") is not declared";
    return std::nullopt;
  }
  const std::string rel = path.substr(best_path.size() + 1);
  MountedFile f;
  f.read_only = best->value("readOnly", false);
  const Json* source = nullptr;
  if (volume->contains("secret")) {
    f.kind = "Secret";
    source = &(*volume)["secret"];
    f.name = Str(Get((*source), {"secretName"}));
  } else if (volume->contains("configMap")) {
    f.kind = "ConfigMap";
    source = &(*volume)["configMap"];
    f.name = Str(Get((*source), {"name"}));
  } else {
    *why = path + " is on volume " + Str(Get((*best), {"name"})) +
           ", neither a Secret nor a ConfigMap";
    return std::nullopt;
  }
  f.key = rel;
  if (source->contains("items")) {  // only the listed keys, at their paths
    f.key.clear();
    for (const Json& item : (*source)["items"]) {
      if (Str(Get(item, {"path"})) == rel) f.key = Str(Get(item, {"key"}));
    }
    if (f.key.empty()) {
      *why = path + ": no item of volume " + Str(Get((*best), {"name"})) +
             " has path " + rel;
      return std::nullopt;
    }
  }
  return f;
}

// The content of a mounted file from the rendered objects.
std::optional<std::string> FileContent(const Objects& objects,
                                       const MountedFile& f, std::string* why) {
  const Json* o = objects.Find(f.kind, f.name);
  if (o == nullptr) {
    *why = f.kind + " " + f.name + " is not in the rendered objects";
    return std::nullopt;
  }
  if (f.kind == "Secret") {
    const Json& v = Get(*o, {"data", f.key.c_str()});
    if (v.is_string()) return DecodeBase64(Str(v));
    const Json& s = Get(*o, {"stringData", f.key.c_str()});
    if (s.is_string()) return Str(s);
  } else {
    const Json& v = Get(*o, {"data", f.key.c_str()});
    if (v.is_string()) return Str(v);
  }
  *why = f.kind + " " + f.name + " has no key " + f.key;
  return std::nullopt;
}

// --- The checks ---

enum class Flavor { kCpu, kGpu };

// What make-secrets.sh wrote (to compare with what the pods mount).
struct SecretFiles {
  std::string ca, ca_key, coordinator_cert, coordinator_key, worker_cert,
      worker_key, token;
};

// Non-root, read-only root, no privilege escalation, no capabilities, /tmp
// writable, resources set.
void CheckPodHardening(const Pod& pod, Problems* p) {
  const Json& sc = Get(*pod.spec, {"securityContext"});
  const std::string who = pod.owner;
  p->Expect(sc.value("runAsNonRoot", false),
            who + ": runAsNonRoot is not true");
  p->Expect(sc.value("runAsUser", -1) == 65532,
            who + ": runAsUser is not 65532");
  p->Expect(sc.value("fsGroup", -1) == 65532, who + ": fsGroup is not 65532");
  p->Expect(Get(*pod.spec, {"automountServiceAccountToken"}) == Json(false),
            who + ": automountServiceAccountToken is not false (no API use)");
  for (const Json& c : Get(*pod.spec, {"containers"})) {
    const std::string cw = who + " container " + Str(Get(c, {"name"}));
    const Json& csc = Get(c, {"securityContext"});
    p->Expect(csc.value("allowPrivilegeEscalation", true) == false,
              cw + ": allowPrivilegeEscalation is not false");
    p->Expect(csc.value("readOnlyRootFilesystem", false),
              cw + ": readOnlyRootFilesystem is not true");
    const Json& drop = Get(csc, {"capabilities", "drop"});
    p->Expect(drop.is_array() && std::find(drop.begin(), drop.end(),
                                           Json("ALL")) != drop.end(),
              cw + ": capabilities do not drop ALL");
    bool tmp = false;
    for (const Json& m : Get(c, {"volumeMounts"})) {
      const Json* v = pod.Volume(Str(Get(m, {"name"})));
      if (Str(Get(m, {"mountPath"})) == "/tmp" && v &&
          v->contains("emptyDir")) {
        tmp = true;
      }
    }
    p->Expect(tmp, cw + ": no emptyDir at /tmp (the root filesystem is "
                        "read-only)");
    for (const char* kind : {"requests", "limits"}) {
      for (const char* res : {"cpu", "memory"}) {
        p->Expect(!Get(c, {"resources", kind, res}).is_null(),
                  cw + ": no resources." + kind + "." + res);
      }
    }
    p->Expect(Str(Get(c, {"image"})).find(':') != std::string::npos,
              cw + ": image \"" + Str(Get(c, {"image"})) +
                  "\" has no tag (the overlay's images: did not apply)");
  }
}

// Every Secret, ConfigMap and claim a pod's volumes name is rendered.
void CheckVolumeSources(const Objects& objects, const Pod& pod, Problems* p) {
  for (const Json& v : Get(*pod.spec, {"volumes"})) {
    std::string kind, name;
    if (v.contains("secret")) {
      kind = "Secret";
      name = Str(Get(v, {"secret", "secretName"}));
    } else if (v.contains("configMap")) {
      kind = "ConfigMap";
      name = Str(Get(v, {"configMap", "name"}));
    } else if (v.contains("persistentVolumeClaim")) {
      kind = "PersistentVolumeClaim";
      name = Str(Get(v, {"persistentVolumeClaim", "claimName"}));
    } else {
      continue;
    }
    p->Expect(objects.Find(kind, name) != nullptr,
              pod.owner + ": volume " + Str(Get(v, {"name"})) + " names " +
                  kind + " \"" + name + "\", which is not rendered");
  }
}

// The gRPC health probes: native grpc probes on the plaintext health port,
// "liveness" for liveness (and startup), "" (ready) for readiness.
void CheckProbes(const std::string& who, const Json& container, int health_port,
                 Problems* p) {
  struct Want {
    const char* probe;
    bool required;
    const char* service;
  };
  for (const Want& w : {Want{"livenessProbe", true, "liveness"},
                        Want{"readinessProbe", true, ""},
                        Want{"startupProbe", false, "liveness"}}) {
    const Json& probe = Get(container, {w.probe});
    if (probe.is_null()) {
      p->Expect(!w.required, who + ": no " + w.probe);
      continue;
    }
    const Json& grpc = Get(probe, {"grpc"});
    if (!p->Expect(grpc.is_object(),
                   who + ": " + w.probe + " is not a grpc probe")) {
      continue;
    }
    p->Expect(grpc.value("port", 0) == health_port,
              who + ": " + w.probe + " grpc port " + Str(Get(grpc, {"port"})) +
                  " is not the --health-listen port " +
                  std::to_string(health_port));
    const std::string service = Str(Get(grpc, {"service"}));
    p->Expect(service == w.service,
              who + ": " + w.probe + " asks for service \"" + service +
                  "\", expected \"" + w.service + "\"" +
                  (std::string(w.service) == "liveness"
                       ? " (readiness needs the coordinator: never liveness)"
                       : ""));
  }
}

// A listening flag (0.0.0.0:PORT, PORT a containerPort); returns PORT.
int CheckListenFlag(const std::string& who,
                    const std::vector<std::string>& args, const Json& container,
                    const std::string& flag, Problems* p) {
  std::optional<std::string> v = Flag(args, flag, p, who);
  if (!p->Expect(v.has_value(), who + ": no " + flag)) return 0;
  p->Expect(HostOf(*v) == "0.0.0.0",
            who + ": " + flag + " " + *v + " does not listen on 0.0.0.0");
  const int port = PortOf(*v);
  p->Expect(HasContainerPort(container, port), who + ": " + flag + " port " +
                                                   std::to_string(port) +
                                                   " is not a containerPort");
  return port;
}

// The Prometheus scrape annotations name the --http port.
void CheckScrape(const Pod& pod, int http_port, Problems* p) {
  const Json& a = *pod.annotations;
  p->Expect(Str(Get(a, {"prometheus.io/scrape"})) == "true",
            pod.owner + ": no prometheus.io/scrape: \"true\"");
  p->Expect(Str(Get(a, {"prometheus.io/port"})) == std::to_string(http_port),
            pod.owner + ": prometheus.io/port is not the --http port " +
                std::to_string(http_port));
  p->Expect(Str(Get(a, {"prometheus.io/path"})) == "/metrics",
            pod.owner + ": prometheus.io/path is not /metrics");
}

// A TLS/token flag names a file mounted from the Secret holding `expected`.
void CheckMountedFlag(const Objects& objects, const Pod& pod,
                      const Json& container,
                      const std::vector<std::string>& args,
                      const std::string& flag, const std::string& expected,
                      const std::string& expected_name, Problems* p) {
  const std::string who = pod.owner;
  std::optional<std::string> path = Flag(args, flag, p, who);
  if (!p->Expect(path.has_value(), who + ": no " + flag)) return;
  std::string why;
  std::optional<MountedFile> f = ResolveFile(pod, container, *path, &why);
  if (!p->Expect(f.has_value(), who + ": " + flag + " " + *path + ": " + why)) {
    return;
  }
  p->Expect(f->kind == "Secret",
            who + ": " + flag + " " + *path + " is not from a Secret");
  std::optional<std::string> content = FileContent(objects, *f, &why);
  if (!p->Expect(content.has_value(),
                 who + ": " + flag + " " + *path + ": " + why)) {
    return;
  }
  p->Expect(*content == expected,
            who + ": " + flag + " " + *path + " (Secret " + f->name + " key " +
                f->key + ") is not make-secrets.sh's " + expected_name);
}

// host:port of a Service reaches `pod`'s container port `want_port`.
void CheckServiceAddress(const Objects& objects, const std::string& who,
                         const std::string& address, const Pod& pod,
                         const Json& container, int want_port, Problems* p) {
  const std::string host = HostOf(address);
  const int port = PortOf(address);
  const Json* svc = objects.Find("Service", host);
  if (!p->Expect(svc != nullptr,
                 who + ": " + address + ": no Service " + host)) {
    return;
  }
  p->Expect(SelectorMatches(Get(*svc, {"spec", "selector"}), *pod.labels),
            who + ": " + address + ": Service " + host +
                " does not select the pods of " + pod.owner);
  const Json* sp = nullptr;
  for (const Json& x : Get(*svc, {"spec", "ports"})) {
    if (x.value("port", 0) == port) sp = &x;
  }
  if (!p->Expect(sp != nullptr, who + ": " + address + ": Service " + host +
                                    " has no port " + std::to_string(port))) {
    return;
  }
  const Json& target =
      sp->contains("targetPort") ? (*sp)["targetPort"] : Get(*sp, {"port"});
  p->Expect(ResolveContainerPort(container, target) == want_port,
            who + ": " + address + ": Service " + host + " port " +
                std::to_string(port) + " targets " + Str(target) +
                ", which is not the listening port " +
                std::to_string(want_port) + " of " + pod.owner);
}

// Everything but the submit Job, for one overlay.
void CheckDeploymentInto(const Objects& objects, Flavor flavor,
                         const SecretFiles& secrets, const Json& job_example,
                         const Json& synthetic_example, Problems& p) {
  // Present, and nothing that `kubectl apply -k` would re-create each time.
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"Deployment", kCoordinator},
      {"Service", kCoordinator},
      {"StatefulSet", kWorker},
      {"Service", kWorker},
      {"PodDisruptionBudget", kWorker},
      {"PersistentVolumeClaim", kStorageClaim},
      {"ConfigMap", kJobConfigMap},
      {"Secret", "lockstep-ca"},
      {"Secret", "lockstep-coordinator-tls"},
      {"Secret", "lockstep-worker-tls"},
      {"Secret", "lockstep-token"},
  };
  for (const auto& [kind, name] : expected) {
    p.Expect(objects.Find(kind, name) != nullptr,
             "missing " + kind + " " + name);
  }
  p.Expect(objects.OfKind("Job").empty(),
           "a Job is in the kustomization (apply would re-create it)");
  for (const Json& o : objects.all()) {
    p.Expect(Str(Get(o, {"metadata", "labels", "app.kubernetes.io/name"})) ==
                 "lockstep",
             Str(Get(o, {"kind"})) + " " + Str(Get(o, {"metadata", "name"})) +
                 ": no label app.kubernetes.io/name: lockstep");
  }
  // The CA's key never enters the cluster.
  for (const Json* s : objects.OfKind("Secret")) {
    for (const auto& [key, value] : Get(*s, {"data"}).items()) {
      p.Expect(DecodeBase64(Str(value)) != secrets.ca_key,
               "Secret " + Str(Get(*s, {"metadata", "name"})) + " key " + key +
                   " holds the CA's private key");
    }
  }

  const Json* pvc = objects.Find("PersistentVolumeClaim", kStorageClaim);
  if (pvc) {
    const Json& modes = Get(*pvc, {"spec", "accessModes"});
    p.Expect(
        modes.is_array() && modes.size() == 1 && modes[0] == "ReadWriteMany",
        std::string("PersistentVolumeClaim ") + kStorageClaim +
            ": accessModes is not [ReadWriteMany]");
  }

  // --- coordinator ---
  const Json* deploy = objects.Find("Deployment", kCoordinator);
  std::optional<Pod> cpod = PodOf(deploy);
  const Json* coord = cpod ? cpod->Container("coordinator") : nullptr;
  int coord_grpc_port = 0;
  if (p.Expect(coord != nullptr,
               "Deployment lockstep-coordinator: no container coordinator")) {
    const std::string who = cpod->owner;
    p.Expect(Get(*deploy, {"spec", "replicas"}) == Json(1),
             who + ": replicas is not 1");
    p.Expect(Str(Get(*deploy, {"spec", "strategy", "type"})) == "Recreate",
             who +
                 ": strategy is not Recreate (two coordinators would share "
                 "the journal)");
    p.Expect(SelectorMatches(Get(*deploy, {"spec", "selector", "matchLabels"}),
                             *cpod->labels),
             who + ": selector does not match its pod template's labels");
    const int grace =
        Get(*cpod->spec, {"terminationGracePeriodSeconds"}).is_number()
            ? (*cpod->spec)["terminationGracePeriodSeconds"].get<int>()
            : 30;
    p.Expect(grace >= 45 && grace <= 300,
             who + ": terminationGracePeriodSeconds " + std::to_string(grace) +
                 " is not in [45, 300]");
    CheckPodHardening(*cpod, &p);
    CheckVolumeSources(objects, *cpod, &p);
    const std::vector<std::string> args = ExpandedArgs(*coord);
    p.Expect(!args.empty() && args[0] == "coordinator",
             who + ": args do not start with \"coordinator\"");
    coord_grpc_port = CheckListenFlag(who, args, *coord, "--listen", &p);
    const int http = CheckListenFlag(who, args, *coord, "--http", &p);
    const int health =
        CheckListenFlag(who, args, *coord, "--health-listen", &p);
    CheckProbes(who, *coord, health, &p);
    CheckScrape(*cpod, http, &p);
    p.Expect(Flag(args, "--log-format", &p, who) == std::string("json"),
             who + ": --log-format is not json");
    // --storage is the shared claim, writable.
    std::optional<std::string> storage = Flag(args, "--storage", &p, who);
    bool storage_ok = false;
    if (p.Expect(storage.has_value(), who + ": no --storage")) {
      for (const Json& m : Get(*coord, {"volumeMounts"})) {
        const Json* v = cpod->Volume(Str(Get(m, {"name"})));
        if (Str(Get(m, {"mountPath"})) == *storage && v &&
            Str(Get(*v, {"persistentVolumeClaim", "claimName"})) ==
                kStorageClaim &&
            !m.value("readOnly", false) && !m.contains("subPath")) {
          storage_ok = true;
        }
      }
      p.Expect(storage_ok, who + ": --storage " + *storage +
                               " is not the writable mount of claim " +
                               kStorageClaim);
    }
    CheckMountedFlag(objects, *cpod, *coord, args, "--tls-cert",
                     secrets.coordinator_cert, "coordinator.crt", &p);
    CheckMountedFlag(objects, *cpod, *coord, args, "--tls-key",
                     secrets.coordinator_key, "coordinator.key", &p);
    CheckMountedFlag(objects, *cpod, *coord, args, "--tls-ca", secrets.ca,
                     "ca.crt", &p);
    CheckMountedFlag(objects, *cpod, *coord, args, "--token-file",
                     secrets.token, "token", &p);
    const Json* svc = objects.Find("Service", kCoordinator);
    if (svc) {
      const std::string type = Str(Get(*svc, {"spec", "type"}));
      p.Expect(
          type.empty() || type == "ClusterIP",
          "Service lockstep-coordinator: type " + type + " is not ClusterIP");
      p.Expect(Str(Get(*svc, {"spec", "clusterIP"})) != "None",
               "Service lockstep-coordinator is headless");
      for (const Json& sp : Get(*svc, {"spec", "ports"})) {
        const Json& target =
            sp.contains("targetPort") ? sp["targetPort"] : Get(sp, {"port"});
        p.Expect(ResolveContainerPort(*coord, target) != 0,
                 "Service lockstep-coordinator port " + Str(Get(sp, {"port"})) +
                     ": targetPort " + Str(target) +
                     " is no port of the coordinator container");
      }
    }
    p.Expect(Str(coord->value("image", "")) == "lockstep:latest",
             who + ": image " + Str(coord->value("image", "")) +
                 " is not lockstep:latest");
    p.Expect(Get(*coord, {"resources", "limits", "nvidia.com/gpu"}).is_null(),
             who + ": the coordinator asks for a GPU");
  }

  // --- workers ---
  const Json* sts = objects.Find("StatefulSet", kWorker);
  std::optional<Pod> wpod = PodOf(sts);
  const Json* worker = wpod ? wpod->Container("worker") : nullptr;
  if (p.Expect(worker != nullptr,
               "StatefulSet lockstep-worker: no container worker")) {
    const std::string who = wpod->owner;
    const std::string service_name = Str(Get(*sts, {"spec", "serviceName"}));
    const Json* headless = objects.Find("Service", service_name);
    if (p.Expect(headless != nullptr, who + ": serviceName \"" + service_name +
                                          "\" is no Service")) {
      p.Expect(Str(Get(*headless, {"spec", "clusterIP"})) == "None",
               "Service " + service_name + " is not headless (clusterIP None)");
      p.Expect(
          Get(*headless, {"spec", "publishNotReadyAddresses"}) == Json(true),
          "Service " + service_name +
              ": publishNotReadyAddresses is not true (peers dial each "
              "other before readiness)");
      p.Expect(
          SelectorMatches(Get(*headless, {"spec", "selector"}), *wpod->labels),
          "Service " + service_name + " does not select the workers");
      for (const Json& sp : Get(*headless, {"spec", "ports"})) {
        const Json& target =
            sp.contains("targetPort") ? sp["targetPort"] : Get(sp, {"port"});
        p.Expect(ResolveContainerPort(*worker, target) != 0,
                 "Service " + service_name + " port " + Str(Get(sp, {"port"})) +
                     ": targetPort " + Str(target) +
                     " is no port of the worker container");
      }
    }
    p.Expect(SelectorMatches(Get(*sts, {"spec", "selector", "matchLabels"}),
                             *wpod->labels),
             who + ": selector does not match its pod template's labels");
    p.Expect(Str(Get(*sts, {"spec", "podManagementPolicy"})) == "Parallel",
             who + ": podManagementPolicy is not Parallel");
    const Json& vct = Get(*sts, {"spec", "volumeClaimTemplates"});
    p.Expect(vct.is_null() || vct.is_array(),
             who +
                 ": volumeClaimTemplates is not a list (the API refuses it; "
                 "old Kustomize commonLabels do this)");
    const int grace =
        Get(*wpod->spec, {"terminationGracePeriodSeconds"}).is_number()
            ? (*wpod->spec)["terminationGracePeriodSeconds"].get<int>()
            : 30;
    p.Expect(grace >= 45 && grace <= 300,
             who + ": terminationGracePeriodSeconds " + std::to_string(grace) +
                 " is not in [45, 300] (a worker finishes its step first)");
    CheckPodHardening(*wpod, &p);
    CheckVolumeSources(objects, *wpod, &p);
    const std::vector<std::string> args = ExpandedArgs(*worker);
    p.Expect(!args.empty() && args[0] == "worker",
             who + ": args do not start with \"worker\"");
    const int listen = CheckListenFlag(who, args, *worker, "--listen", &p);
    const int http = CheckListenFlag(who, args, *worker, "--http", &p);
    const int health =
        CheckListenFlag(who, args, *worker, "--health-listen", &p);
    CheckProbes(who, *worker, health, &p);
    CheckScrape(*wpod, http, &p);
    p.Expect(Flag(args, "--log-format", &p, who) == std::string("json"),
             who + ": --log-format is not json");
    std::optional<std::string> coordinator =
        Flag(args, "--coordinator", &p, who);
    if (p.Expect(coordinator.has_value(), who + ": no --coordinator") && cpod &&
        coord) {
      CheckServiceAddress(objects, who + " --coordinator", *coordinator, *cpod,
                          *coord, coord_grpc_port, &p);
    }
    // Peers dial POD.SERVICE.NAMESPACE.svc.cluster.local: the headless
    // Service's per-pod DNS name, which the worker certificate covers.
    const std::string want_advertise =
        "<fieldRef:metadata.name>." + service_name +
        ".<fieldRef:metadata.namespace>.svc.cluster.local:" +
        std::to_string(listen);
    std::optional<std::string> advertise = Flag(args, "--advertise", &p, who);
    p.Expect(advertise == want_advertise,
             who + ": --advertise is \"" + advertise.value_or("(none)") +
                 "\" after expanding env, expected \"" + want_advertise + "\"");
    p.Expect(Flag(args, "--name", &p, who) ==
                 std::string("<fieldRef:metadata.name>"),
             who + ": --name is not the pod name");
    CheckMountedFlag(objects, *wpod, *worker, args, "--tls-cert",
                     secrets.worker_cert, "worker.crt", &p);
    CheckMountedFlag(objects, *wpod, *worker, args, "--tls-key",
                     secrets.worker_key, "worker.key", &p);
    CheckMountedFlag(objects, *wpod, *worker, args, "--tls-ca", secrets.ca,
                     "ca.crt", &p);
    // Datasets: the shared claim, read-only at /data; the example job reads
    // under it.
    std::string data_mount;
    for (const Json& m : Get(*worker, {"volumeMounts"})) {
      const Json* v = wpod->Volume(Str(Get(m, {"name"})));
      if (v && Str(Get(*v, {"persistentVolumeClaim", "claimName"})) ==
                   kStorageClaim) {
        data_mount = Str(Get(m, {"mountPath"}));
        p.Expect(m.value("readOnly", false),
                 who + ": the shared volume is not mounted read-only");
      }
    }
    p.Expect(data_mount == "/data",
             who + ": the shared volume is not mounted at /data");
    // Devices, threads, GPU.
    const std::string devices = Flag(args, "--devices", &p, who).value_or("");
    const Json& limits = Get(*worker, {"resources", "limits"});
    const Json& gpu = Get(limits, {"nvidia.com/gpu"});
    const std::string image = Str(worker->value("image", ""));
    if (flavor == Flavor::kGpu) {
      p.Expect(devices == "cuda:0",
               who + ": --devices is \"" + devices + "\", expected cuda:0");
      p.Expect(Str(gpu) == "1",
               who + ": limits.nvidia.com/gpu is " + Str(gpu) + ", expected 1");
      p.Expect(image == "lockstep:latest-gpu",
               who + ": image " + image + " is not lockstep:latest-gpu");
      bool tolerates = false;
      for (const Json& t : Get(*wpod->spec, {"tolerations"})) {
        if (Str(Get(t, {"key"})) == "nvidia.com/gpu") tolerates = true;
      }
      p.Expect(tolerates || !Get(*wpod->spec, {"nodeSelector"}).is_null(),
               who + ": no toleration or nodeSelector for GPU nodes");
    } else {
      p.Expect(devices.rfind("cpu:", 0) == 0,
               who + ": --devices is \"" + devices + "\", expected cpu:N");
      p.Expect(image == "lockstep:latest",
               who + ": image " + image + " is not lockstep:latest");
    }
    // --threads N within the CPU limit (whole cores or millicores).
    const std::string threads = Flag(args, "--threads", &p, who).value_or("");
    const std::string cpu = Str(Get(limits, {"cpu"}));
    double cores = std::atof(cpu.c_str());
    if (!cpu.empty() && cpu.back() == 'm') cores /= 1000;
    const int n = std::atoi(threads.c_str());
    p.Expect(n >= 1 && n <= cores + 1e-9,
             who + ": --threads \"" + threads +
                 "\" is not a count within the CPU limit " + cpu);
    // Enough workers for the example job.
    const int replicas = Get(*sts, {"spec", "replicas"}).is_number()
                             ? (*sts)["spec"]["replicas"].get<int>()
                             : 1;
    const int want = Get(job_example, {"cluster", "workers"}).is_number()
                         ? job_example["cluster"]["workers"].get<int>()
                         : 1;
    p.Expect(replicas >= want, who + ": " + std::to_string(replicas) +
                                   " replicas, the example job needs " +
                                   std::to_string(want));

    // The PodDisruptionBudget: one worker at a time, only workers.
    const Json* pdb = objects.Find("PodDisruptionBudget", kWorker);
    if (pdb) {
      p.Expect(Get(*pdb, {"spec", "maxUnavailable"}) == Json(1),
               "PodDisruptionBudget lockstep-worker: maxUnavailable is not 1");
      const Json& sel = Get(*pdb, {"spec", "selector", "matchLabels"});
      p.Expect(SelectorMatches(sel, *wpod->labels),
               "PodDisruptionBudget lockstep-worker does not select the "
               "workers");
      p.Expect(!cpod || !SelectorMatches(sel, *cpod->labels),
               "PodDisruptionBudget lockstep-worker selects the coordinator");
    }
    // The job ConfigMap: the examples/ jobs, data paths under /data.
    const Json* cm = objects.Find("ConfigMap", kJobConfigMap);
    if (cm) {
      const Json job =
          Json::parse(Str(Get(*cm, {"data", "job.json"})), nullptr, false);
      const Json synthetic = Json::parse(
          Str(Get(*cm, {"data", "synthetic.json"})), nullptr, false);
      p.Expect(synthetic == synthetic_example,
               "ConfigMap lockstep-job: synthetic.json is not "
               "examples/default.json");
      if (p.Expect(job.is_object(),
                   "ConfigMap lockstep-job: no JSON job.json")) {
        Json expected_job = job_example;
        for (auto& [key, value] : expected_job["data"].items()) {
          const std::string got = Str(Get(job, {"data", key.c_str()}));
          if (!value.is_string() || key == "format") continue;
          p.Expect(got.rfind(data_mount + "/", 0) == 0 &&
                       got.size() >= Str(value).size() &&
                       got.compare(got.size() - Str(value).size(),
                                   std::string::npos, Str(value)) == 0,
                   "ConfigMap lockstep-job: job.json data." + key + " \"" +
                       got + "\" is not " + Str(value) + " under " +
                       data_mount + "/");
          value = got;
        }
        p.Expect(job == expected_job,
                 "ConfigMap lockstep-job: job.json differs from "
                 "examples/mnist_cnn_multiworker.json beyond its data paths");
      }
    }
  }
  if (flavor == Flavor::kCpu) {
    for (const Json& o : objects.all()) {
      p.Expect(o.dump().find("nvidia.com/gpu") == std::string::npos,
               Str(Get(o, {"kind"})) + " " + Str(Get(o, {"metadata", "name"})) +
                   " mentions nvidia.com/gpu in the cpu overlay");
    }
  }
}

// A field of an unexpected type (value() on a list, say) is a problem too.
Problems CheckDeployment(const Objects& objects, Flavor flavor,
                         const SecretFiles& secrets, const Json& job_example,
                         const Json& synthetic_example) {
  Problems p;
  try {
    CheckDeploymentInto(objects, flavor, secrets, job_example,
                        synthetic_example, p);
  } catch (const Json::exception& e) {
    p.Add(std::string("a field of an unexpected type: ") + e.what());
  }
  return p;
}

// The example submit Job against the deployment's objects.
void CheckSubmitJobInto(const Json& job, const Objects& objects,
                        const SecretFiles& secrets, Problems& p) {
  const std::string who = "Job (examples/submit-job.yaml)";
  p.Expect(Str(Get(job, {"kind"})) == "Job", who + ": not a Job");
  p.Expect(!Str(Get(job, {"metadata", "generateName"})).empty() &&
               Get(job, {"metadata", "name"}).is_null(),
           who + ": no generateName (kubectl create -f would work only once)");
  p.Expect(Get(job, {"spec", "backoffLimit"}) == Json(0),
           who + ": backoffLimit is not 0 (a retried submit is refused)");
  std::optional<Pod> pod = PodOf(&job);
  if (!p.Expect(pod.has_value(), who + ": no pod template")) return;
  pod->owner = who;
  p.Expect(Str(Get(*pod->spec, {"restartPolicy"})) == "Never",
           who + ": restartPolicy is not Never");
  CheckPodHardening(*pod, &p);
  CheckVolumeSources(objects, *pod, &p);
  const Json& containers = Get(*pod->spec, {"containers"});
  if (!p.Expect(containers.size() == 1, who + ": not one container")) return;
  const Json& c = containers[0];
  p.Expect(Str(c.value("image", "")) == "lockstep:latest",
           who + ": image is not lockstep:latest");
  const std::vector<std::string> args = ExpandedArgs(c);
  p.Expect(args.size() >= 2 && args[0] == "submit",
           who + ": args do not start with \"submit JOB.json\"");
  if (args.size() >= 2) {
    std::string why;
    std::optional<MountedFile> f = ResolveFile(*pod, c, args[1], &why);
    if (p.Expect(f.has_value(), who + ": " + args[1] + ": " + why)) {
      p.Expect(f->kind == "ConfigMap" && f->name == kJobConfigMap,
               who + ": " + args[1] + " is not from ConfigMap lockstep-job");
      std::optional<std::string> content = FileContent(objects, *f, &why);
      p.Expect(content.has_value() &&
                   Json::parse(*content, nullptr, false).is_object(),
               who + ": " + args[1] + ": " + why + " (no JSON job)");
    }
  }
  p.Expect(HasArg(args, "--wait"), who + ": no --wait");
  std::optional<std::string> coordinator = Flag(args, "--coordinator", &p, who);
  p.Expect(coordinator.has_value(), who + ": no --coordinator");
  std::optional<Pod> cpod = PodOf(objects.Find("Deployment", kCoordinator));
  const Json* coord = cpod ? cpod->Container("coordinator") : nullptr;
  p.Expect(coord != nullptr, "no coordinator Deployment to submit to");
  if (coordinator && coord) {
    Problems ignored;
    const std::vector<std::string> cargs = ExpandedArgs(*coord);
    const int grpc = PortOf(Flag(cargs, "--listen", &ignored, "").value_or(""));
    CheckServiceAddress(objects, who + " --coordinator", *coordinator, *cpod,
                        *coord, grpc, &p);
  }
  CheckMountedFlag(objects, *pod, c, args, "--tls-ca", secrets.ca, "ca.crt",
                   &p);
  CheckMountedFlag(objects, *pod, c, args, "--token-file", secrets.token,
                   "token", &p);
  p.Expect(!Flag(args, "--tls-key", &p, who).has_value(),
           who + ": the submit Job needs no private key");
}

Problems CheckSubmitJob(const Json& job, const Objects& objects,
                        const SecretFiles& secrets) {
  Problems p;
  try {
    CheckSubmitJobInto(job, objects, secrets, p);
  } catch (const Json::exception& e) {
    p.Add(std::string("a field of an unexpected type: ") + e.what());
  }
  return p;
}

// --- The fixture ---

class ManifestsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // kubectl caches under $HOME; never read a developer's kubeconfig.
    const char* tmp = std::getenv("TEST_TMPDIR");
    setenv("HOME", tmp ? tmp : "/tmp", 1);
    unsetenv("KUBECONFIG");
    const char* path = std::getenv("PATH");
    setenv("PATH",
           (std::string(path ? path : "") + ":/usr/local/bin:/usr/bin:/bin")
               .c_str(),
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
    const std::vector<std::string> argv = {
        kBash, *prepared_ + "/make-secrets.sh", "--namespace", kNamespace};
    RunResult r = RunProcess(argv, NewTempDir("log"), kTimeoutS);
    if (!Succeeded(r)) *setup_error_ = Describe(argv, r);
  }

  static void TearDownTestSuite() {
    delete kubectl_;
    delete prepared_;
    delete setup_error_;
  }

  void SetUp() override { ASSERT_TRUE(setup_error_->empty()) << *setup_error_; }

  // True when the test cannot run (then GTEST_SKIP from the caller).
  static bool NoKubectl() { return kubectl_->empty(); }
  static std::string NoKubectlMessage() {
    return std::getenv("LOCKSTEP_KUBECTL")
               ? std::string("LOCKSTEP_KUBECTL=") +
                     std::getenv("LOCKSTEP_KUBECTL") + " is not executable"
               : "kubectl not found: scripts/install_deps.sh installs "
                 "kubernetes-client";
  }

  // deploy/k8s from the runfiles (manifests and the script only) into a
  // new folder.
  static std::string CopyManifests(const std::string& name) {
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
        fs::permissions(dst / rel, fs::perms::owner_write,
                        fs::perm_options::add);
      }
    }
    fs::copy_file(src + "/make-secrets.sh", dst + "/make-secrets.sh");
    return dst;
  }

  // A copy of the prepared tree (with its secrets) to edit.
  static std::string CopyPrepared(const std::string& name) {
    const std::string dst = NewTempDir(name);
    fs::copy(
        *prepared_, dst,
        fs::copy_options::recursive | fs::copy_options::overwrite_existing);
    return dst;
  }

  static SecretFiles ReadSecrets(const std::string& tree) {
    const std::string d = tree + "/base/secrets/";
    return {ReadFileOrEmpty(d + "ca.crt"),
            ReadFileOrEmpty(d + "ca.key"),
            ReadFileOrEmpty(d + "coordinator.crt"),
            ReadFileOrEmpty(d + "coordinator.key"),
            ReadFileOrEmpty(d + "worker.crt"),
            ReadFileOrEmpty(d + "worker.key"),
            ReadFileOrEmpty(d + "token")};
  }

  // YAML file -> objects, through kubectl's decoder (see the top).
  static std::vector<Json> YamlToObjects(const std::string& yaml_path,
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

  // `kubectl kustomize DIR` as objects.
  static std::vector<Json> Render(const std::string& dir, std::string* error) {
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

  static Json ExampleJob(const std::string& file) {
    return Json::parse(ReadFileOrEmpty(Runfile("examples/" + file)), nullptr,
                       false);
  }

  // Renders overlay `flavor` of `tree` and runs the deployment checks.
  static Problems RenderAndCheck(const std::string& tree, Flavor flavor,
                                 std::string* error) {
    std::vector<Json> objects = Render(
        tree + (flavor == Flavor::kGpu ? "/overlays/gpu" : "/overlays/cpu"),
        error);
    if (!error->empty()) return {};
    return CheckDeployment(
        Objects(std::move(objects)), flavor, ReadSecrets(tree),
        ExampleJob("mnist_cnn_multiworker.json"), ExampleJob("default.json"));
  }

  static std::string* kubectl_;
  static std::string* prepared_;
  static std::string* setup_error_;
};

std::string* ManifestsTest::kubectl_ = nullptr;
std::string* ManifestsTest::prepared_ = nullptr;
std::string* ManifestsTest::setup_error_ = nullptr;

std::string OpenSsl(const std::vector<std::string>& args, bool* ok) {
  std::vector<std::string> argv = {kOpenSsl};
  argv.insert(argv.end(), args.begin(), args.end());
  RunResult r = RunProcess(argv, NewTempDir("log"), kTimeoutS);
  *ok = Succeeded(r);
  return Describe(argv, r);
}

// make-secrets.sh: certificates that verify against the CA for the names the
// pods dial, with the usages lockstep needs; a token; private files.
TEST_F(ManifestsTest, MakeSecretsWritesUsableCertificates) {
  const std::string d = *prepared_ + "/base/secrets/";
  const std::string ns = kNamespace;
  struct Case {
    std::string cert, purpose, host;
    bool valid;
  };
  const std::string coord = kCoordinator, worker = kWorker;
  const std::vector<Case> cases = {
      {"coordinator.crt", "sslserver", coord, true},
      {"coordinator.crt", "sslserver", coord + "." + ns, true},
      {"coordinator.crt", "sslserver", coord + "." + ns + ".svc", true},
      {"coordinator.crt", "sslserver", coord + "." + ns + ".svc.cluster.local",
       true},
      {"coordinator.crt", "sslserver", "localhost", true},  // port-forward
      {"coordinator.crt", "sslserver", coord + ".other.svc", false},
      {"worker.crt", "sslserver",
       worker + "-0." + worker + "." + ns + ".svc.cluster.local", true},
      {"worker.crt", "sslserver",
       worker + "-17." + worker + "." + ns + ".svc.cluster.local", true},
      {"worker.crt", "sslclient", "", true},  // presented to the coordinator
      {"worker.crt", "sslserver",
       worker + "-0." + worker + ".other.svc.cluster.local", false},
      {"worker.crt", "sslserver",
       "a.b." + worker + "." + ns + ".svc.cluster.local", false},
      {"worker.crt", "sslserver", coord, false},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {"verify", "-CAfile", d + "ca.crt",
                                     "-purpose", c.purpose};
    if (!c.host.empty()) {
      args.push_back("-verify_hostname");
      args.push_back(c.host);
    }
    args.push_back(d + c.cert);
    bool ok = false;
    const std::string what = OpenSsl(args, &ok);
    EXPECT_EQ(ok, c.valid) << what;
  }
  const std::string token = ReadFileOrEmpty(d + "token");
  EXPECT_EQ(token.size(), 65u) << "64 hex digits and a newline: " << token;
  for (const char* f : {"ca.key", "coordinator.key", "worker.key", "token"}) {
    struct stat st;
    ASSERT_EQ(stat((d + f).c_str(), &st), 0) << f;
    EXPECT_EQ(st.st_mode & 0777, 0600u) << f;
  }
  // Never overwrites without --force.
  const std::string before = ReadFileOrEmpty(d + "ca.crt");
  RunResult again =
      RunProcess({kBash, *prepared_ + "/make-secrets.sh", "--namespace", ns},
                 NewTempDir("log"), kTimeoutS);
  EXPECT_TRUE(again.exit.exited && again.exit.exit_code == 1)
      << again.out << again.err;
  EXPECT_NE(again.err.find("--force"), std::string::npos) << again.err;
  EXPECT_EQ(ReadFileOrEmpty(d + "ca.crt"), before);
}

TEST_F(ManifestsTest, CpuOverlay) {
  if (NoKubectl()) GTEST_SKIP() << NoKubectlMessage();
  std::string error;
  Problems p = RenderAndCheck(*prepared_, Flavor::kCpu, &error);
  ASSERT_TRUE(error.empty()) << error;
  EXPECT_TRUE(p.list().empty()) << "overlays/cpu:\n" << p.Joined();
}

TEST_F(ManifestsTest, GpuOverlay) {
  if (NoKubectl()) GTEST_SKIP() << NoKubectlMessage();
  std::string error;
  Problems p = RenderAndCheck(*prepared_, Flavor::kGpu, &error);
  ASSERT_TRUE(error.empty()) << error;
  EXPECT_TRUE(p.list().empty()) << "overlays/gpu:\n" << p.Joined();
}

TEST_F(ManifestsTest, SubmitJobExampleFitsTheDeployment) {
  if (NoKubectl()) GTEST_SKIP() << NoKubectlMessage();
  std::string error;
  std::vector<Json> objects = Render(*prepared_ + "/overlays/cpu", &error);
  ASSERT_TRUE(error.empty()) << error;
  std::vector<Json> job =
      YamlToObjects(*prepared_ + "/examples/submit-job.yaml", &error);
  ASSERT_TRUE(error.empty()) << error;
  ASSERT_EQ(job.size(), 1u);
  const Objects deployment(std::move(objects));
  const SecretFiles secrets = ReadSecrets(*prepared_);
  Problems p = CheckSubmitJob(job[0], deployment, secrets);
  EXPECT_TRUE(p.list().empty()) << p.Joined();

  // And these checks can fail: a wrong port, a wrong ConfigMap.
  Json wrong_port = job[0];
  for (Json& a :
       wrong_port["spec"]["template"]["spec"]["containers"][0]["args"]) {
    if (a == "lockstep-coordinator:7070") a = "lockstep-coordinator:7071";
  }
  EXPECT_TRUE(CheckSubmitJob(wrong_port, deployment, secrets)
                  .Mentions("has no port 7071"));
  Json wrong_map = job[0];
  for (Json& v : wrong_map["spec"]["template"]["spec"]["volumes"]) {
    if (v.contains("configMap")) v["configMap"]["name"] = "lockstep-jobs";
  }
  EXPECT_TRUE(CheckSubmitJob(wrong_map, deployment, secrets)
                  .Mentions("ConfigMap \"lockstep-jobs\", which is not "
                            "rendered"));
}

// The dataset loader pod writes where the workers read: the shared claim.
TEST_F(ManifestsTest, DatasetLoaderExampleMountsTheClaim) {
  if (NoKubectl()) GTEST_SKIP() << NoKubectlMessage();
  std::string error;
  std::vector<Json> objects = Render(*prepared_ + "/overlays/cpu", &error);
  ASSERT_TRUE(error.empty()) << error;
  std::vector<Json> pods =
      YamlToObjects(*prepared_ + "/examples/dataset-loader.yaml", &error);
  ASSERT_TRUE(error.empty()) << error;
  ASSERT_EQ(pods.size(), 1u);
  ASSERT_EQ(Str(Get(pods[0], {"kind"})), "Pod");
  Pod pod;
  pod.owner = "Pod (examples/dataset-loader.yaml)";
  pod.spec = &pods[0]["spec"];
  Problems p;
  const Objects deployment(std::move(objects));
  CheckPodHardening(pod, &p);
  CheckVolumeSources(deployment, pod, &p);
  bool mounts_claim = false;
  for (const Json& v : Get(*pod.spec, {"volumes"})) {
    if (Str(Get(v, {"persistentVolumeClaim", "claimName"})) == kStorageClaim)
      mounts_claim = true;
  }
  EXPECT_TRUE(mounts_claim) << "the loader does not mount " << kStorageClaim;
  EXPECT_TRUE(p.list().empty()) << p.Joined();
}

// Without make-secrets.sh's files the base does not render (rather than
// rendering empty Secrets).
TEST_F(ManifestsTest, RenderingNeedsTheSecretsFiles) {
  if (NoKubectl()) GTEST_SKIP() << NoKubectlMessage();
  const std::string tree = CopyManifests("nosecrets");
  std::string error;
  Render(tree + "/overlays/cpu", &error);
  EXPECT_NE(error.find("secrets"), std::string::npos)
      << "rendering without base/secrets/ should fail naming it: " << error;
}

// The checks can fail: each broken copy of a manifest is caught, by the
// check that names what broke.
TEST_F(ManifestsTest, BrokenManifestsAreCaught) {
  if (NoKubectl()) GTEST_SKIP() << NoKubectlMessage();
  struct Breakage {
    std::string file, from, to;
    Flavor flavor;
    std::string expected_problem;
  };
  const std::vector<Breakage> breakages = {
      {"base/worker-service.yaml", "publishNotReadyAddresses: true",
       "publishNotReadyAddresses: false", Flavor::kCpu,
       "publishNotReadyAddresses"},
      {"base/worker-service.yaml", "  clusterIP: None\n", "", Flavor::kCpu,
       "headless"},
      {"base/coordinator-deployment.yaml", "mountPath: /var/lib/lockstep",
       "mountPath: /var/lib/elsewhere", Flavor::kCpu, "--storage"},
      {"base/coordinator-deployment.yaml", "type: Recreate",
       "type: RollingUpdate", Flavor::kCpu, "Recreate"},
      {"base/coordinator-service.yaml", "targetPort: grpc", "targetPort: 7071",
       Flavor::kCpu, "--coordinator: lockstep-coordinator:7070: Service"},
      {"base/coordinator-service.yaml", "port: 7070", "port: 7000",
       Flavor::kGpu, "has no port 7070"},
      {"base/worker-statefulset.yaml", "service: liveness", "service: \"\"",
       Flavor::kCpu, "livenessProbe asks for service"},
      {"base/worker-statefulset.yaml", "port: 7081", "port: 7080", Flavor::kGpu,
       "is not the --health-listen port"},
      {"base/worker-statefulset.yaml", "secretName: lockstep-worker-tls",
       "secretName: lockstep-coordinator-tls", Flavor::kCpu,
       "is not make-secrets.sh's worker.crt"},
      {"base/worker-statefulset.yaml", ".lockstep-worker.$(POD_NAMESPACE)",
       ".lockstep-workers.$(POD_NAMESPACE)", Flavor::kCpu, "--advertise"},
      {"base/worker-pdb.yaml", "app.kubernetes.io/component: worker\n",
       "app.kubernetes.io/component: coordinator\n", Flavor::kCpu,
       "PodDisruptionBudget lockstep-worker"},
      {"base/coordinator-deployment.yaml", "readOnlyRootFilesystem: true",
       "readOnlyRootFilesystem: false", Flavor::kCpu, "readOnlyRootFilesystem"},
      {"base/storage-pvc.yaml", "ReadWriteMany", "ReadWriteOnce", Flavor::kCpu,
       "ReadWriteMany"},
      {"overlays/gpu/worker-gpu.yaml", "            nvidia.com/gpu: 1\n", "",
       Flavor::kGpu, "limits.nvidia.com/gpu"},
      {"overlays/gpu/worker-gpu.yaml", "value: cuda:0", "value: cpu:1",
       Flavor::kGpu, "--devices"},
      {"overlays/cpu/worker-cpu.yaml", "value: \"4\"", "value: \"16\"",
       Flavor::kCpu, "--threads"},
      {"base/jobs/job.json", "/data/datasets/mnist/train-images",
       "/elsewhere/mnist/train-images", Flavor::kCpu, "data.train_images"},
  };
  int i = 0;
  for (const Breakage& b : breakages) {
    SCOPED_TRACE(b.file + ": " + b.from + " -> " + b.to);
    const std::string tree = CopyPrepared("broken" + std::to_string(i++));
    const std::string path = tree + "/" + b.file;
    std::string text = ReadFileOrEmpty(path);
    size_t at = text.find(b.from);
    ASSERT_NE(at, std::string::npos) << b.from << " is not in " << b.file;
    // Every occurrence (both liveness and startup probes, say).
    for (; at != std::string::npos; at = text.find(b.from, at + b.to.size())) {
      text.replace(at, b.from.size(), b.to);
    }
    WriteStringToFile(path, text);
    std::string error;
    Problems p = RenderAndCheck(tree, b.flavor, &error);
    if (!error.empty()) {
      ADD_FAILURE() << error;
      continue;
    }
    EXPECT_TRUE(p.Mentions(b.expected_problem))
        << "expected a problem mentioning \"" << b.expected_problem
        << "\", got:\n"
        << p.Joined();
  }
}

}  // namespace
}  // namespace testing
}  // namespace lockstep
