// Pod-level checks and the submit-Job check of the deploy/k8s manifest
// tests (see manifests_checks.h).
#include "deploy/k8s/manifests_checks.h"

#include <algorithm>
#include <optional>

namespace lockstep {
namespace testing {
namespace k8s {

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

namespace {

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
  std::optional<Pod> cpod = PodOf(objects.Find("StatefulSet", kCoordinator));
  const Json* coord = cpod ? cpod->Container("coordinator") : nullptr;
  p.Expect(coord != nullptr, "no coordinator StatefulSet to submit to");
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

}  // namespace

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

}  // namespace k8s
}  // namespace testing
}  // namespace lockstep
