// Reading a rendered workload's pod template for the deploy/k8s manifest
// tests: containers, volumes, args with $(VAR) expanded, flags, ports, and
// the Secret or ConfigMap key behind a mounted file.
#ifndef LOCKSTEP_DEPLOY_K8S_MANIFESTS_POD_H_
#define LOCKSTEP_DEPLOY_K8S_MANIFESTS_POD_H_

#include <optional>
#include <string>
#include <vector>

#include "deploy/k8s/manifests_test_util.h"

namespace lockstep {
namespace testing {
namespace k8s {

// A workload's pod template with the helpers the checks need.
struct Pod {
  std::string owner;             // "StatefulSet lockstep-coordinator"
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

// What a file path in a container is: the object (Secret or ConfigMap) and
// key behind the volume mounted over it.
struct MountedFile {
  std::string kind, name, key;
  bool read_only = false;
};

std::optional<Pod> PodOf(const Json* workload);

// Every key=value of `selector` is among `labels` (a non-empty selector).
bool SelectorMatches(const Json& selector, const Json& labels);

// The container's args with $(VAR) expanded as the kubelet does: a `value`
// env var by its value, a downward-API one as <fieldRef:PATH>; unknown
// references stay as they are.
std::vector<std::string> ExpandedArgs(const Json& container);

// The value of --flag (as "--flag V" or "--flag=V"); nullopt when absent.
// A flag given twice is a problem.
std::optional<std::string> Flag(const std::vector<std::string>& args,
                                const std::string& flag, Problems* problems,
                                const std::string& who);

bool HasArg(const std::vector<std::string>& args, const std::string& arg);

// "HOST:PORT" -> PORT (0 when malformed).
int PortOf(const std::string& host_port);

std::string HostOf(const std::string& host_port);

// The container port a Service targetPort (name or number) reaches; 0 when
// none.
int ResolveContainerPort(const Json& container, const Json& target);

bool HasContainerPort(const Json& container, int port);

std::optional<MountedFile> ResolveFile(const Pod& pod, const Json& container,
                                       const std::string& path,
                                       std::string* why);

// The content of a mounted file from the rendered objects.
std::optional<std::string> FileContent(const Objects& objects,
                                       const MountedFile& f, std::string* why);

}  // namespace k8s
}  // namespace testing
}  // namespace lockstep

#endif  // LOCKSTEP_DEPLOY_K8S_MANIFESTS_POD_H_
