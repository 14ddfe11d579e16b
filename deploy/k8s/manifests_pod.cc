// Pod template helpers of the deploy/k8s manifest tests (see manifests_pod.h).
#include "deploy/k8s/manifests_pod.h"

#include <cstdlib>
#include <map>

namespace lockstep {
namespace testing {
namespace k8s {

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

int PortOf(const std::string& host_port) {
  const size_t colon = host_port.rfind(':');
  if (colon == std::string::npos) return 0;
  return std::atoi(host_port.c_str() + colon + 1);
}

std::string HostOf(const std::string& host_port) {
  return host_port.substr(0, host_port.rfind(':'));
}

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

}  // namespace k8s
}  // namespace testing
}  // namespace lockstep
