// CheckDeployment: everything but the submit Job for one rendered overlay
// (objects, coordinator, workers, Secrets), for the deploy/k8s tests.
#include <cstdlib>
#include <optional>
#include <utility>

#include "deploy/k8s/manifests_checks.h"

namespace lockstep {
namespace testing {
namespace k8s {

namespace {

// overlays/ha: a 3-member etcd StatefulSet behind its headless Service,
// hardened, its members naming each other, and the coordinators' --etcd
// naming every member's client port.
void CheckEtcd(const Objects& objects, const std::optional<Pod>& cpod,
               const Json* coord, Problems* p) {
  const Json* sts = objects.Find("StatefulSet", kEtcd);
  std::optional<Pod> epod = PodOf(sts);
  const Json* etcd = epod ? epod->Container("etcd") : nullptr;
  if (!p->Expect(etcd != nullptr,
                 "StatefulSet lockstep-etcd: no container "
                 "etcd")) {
    return;
  }
  const std::string who = epod->owner;
  const Json& replicas = Get(*sts, {"spec", "replicas"});
  p->Expect(replicas == Json(3), who + ": replicas " + Str(replicas) +
                                     " is not 3 (one member down keeps the "
                                     "quorum)");
  const std::string service = Str(Get(*sts, {"spec", "serviceName"}));
  const Json* headless = objects.Find("Service", service);
  if (p->Expect(headless != nullptr,
                who + ": serviceName \"" + service + "\" is no Service")) {
    p->Expect(Str(Get(*headless, {"spec", "clusterIP"})) == "None",
              "Service " + service + " is not headless (clusterIP None)");
    p->Expect(
        Get(*headless, {"spec", "publishNotReadyAddresses"}) == Json(true),
        "Service " + service +
            ": publishNotReadyAddresses is not true (members find each "
            "other before they are ready)");
    p->Expect(
        SelectorMatches(Get(*headless, {"spec", "selector"}), *epod->labels),
        "Service " + service + " does not select the etcd members");
  }
  p->Expect(SelectorMatches(Get(*sts, {"spec", "selector", "matchLabels"}),
                            *epod->labels),
            who + ": selector does not match its pod template's labels");
  p->Expect(Str(Get(*sts, {"spec", "podManagementPolicy"})) == "Parallel",
            who +
                ": podManagementPolicy is not Parallel (the members must "
                "start together to form the cluster)");
  const Json& vct = Get(*sts, {"spec", "volumeClaimTemplates"});
  p->Expect(vct.is_array() && vct.size() == 1,
            who + ": no volumeClaimTemplates (each member's data)");
  CheckPodHardening(*epod, p);
  const std::vector<std::string> args = ExpandedArgs(*etcd);
  std::string members, endpoints;
  const int n = replicas.is_number() ? replicas.get<int>() : 0;
  for (int i = 0; i < n; ++i) {
    const std::string host = std::string(kEtcd) + "-" + std::to_string(i) +
                             "." + service +
                             ".<fieldRef:metadata.namespace>.svc.cluster."
                             "local";
    members += (i ? "," : "") + std::string(kEtcd) + "-" + std::to_string(i) +
               "=http://" + host + ":2380";
    endpoints += (i ? "," : "") + std::string("http://") + host + ":2379";
  }
  p->Expect(Flag(args, "--initial-cluster", p, who) == members,
            who + ": --initial-cluster is not \"" + members + "\"");
  p->Expect(ResolveContainerPort(*etcd, Json(2379)) != 0 &&
                ResolveContainerPort(*etcd, Json(2380)) != 0,
            who + ": ports 2379 and 2380 are not container ports");
  if (cpod && coord) {
    const std::vector<std::string> cargs = ExpandedArgs(*coord);
    p->Expect(Flag(cargs, "--etcd", p, cpod->owner) == endpoints,
              cpod->owner + ": --etcd is not every etcd member (\"" +
                  endpoints + "\")");
  }
}

// Everything but the submit Job, for one overlay.
void CheckDeploymentInto(const Objects& objects, Flavor flavor,
                         const SecretFiles& secrets, const Json& job_example,
                         const Json& synthetic_example, Problems& p) {
  // Present, and nothing that `kubectl apply -k` would re-create each time.
  std::vector<std::pair<std::string, std::string>> expected = {
      {"StatefulSet", kCoordinator},
      {"Service", kCoordinator},
      {"Service", kCoordinatorPods},
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
  if (flavor == Flavor::kHa) {
    expected.push_back({"StatefulSet", kEtcd});
    expected.push_back({"Service", kEtcd});
  }
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
  const Json* deploy = objects.Find("StatefulSet", kCoordinator);
  std::optional<Pod> cpod = PodOf(deploy);
  const Json* coord = cpod ? cpod->Container("coordinator") : nullptr;
  int coord_grpc_port = 0;
  if (p.Expect(coord != nullptr,
               "StatefulSet lockstep-coordinator: no container coordinator")) {
    const std::string who = cpod->owner;
    const std::vector<std::string> args = ExpandedArgs(*coord);
    const int want_replicas = flavor == Flavor::kHa ? 3 : 1;
    p.Expect(Get(*deploy, {"spec", "replicas"}) == Json(want_replicas),
             who + ": replicas is not " + std::to_string(want_replicas));
    const bool etcd = HasArg(args, "--etcd");
    const Json& replicas = Get(*deploy, {"spec", "replicas"});
    p.Expect(etcd || !replicas.is_number() || replicas.get<int>() <= 1,
             who + ": " + Str(replicas) +
                 " coordinators without --etcd (they would share the "
                 "journal)");
    p.Expect(Str(Get(*deploy, {"spec", "podManagementPolicy"})) == "Parallel",
             who +
                 ": podManagementPolicy is not Parallel (a standby, never "
                 "ready, would hold the next pod back)");
    const std::string update =
        Str(Get(*deploy, {"spec", "updateStrategy", "type"}));
    p.Expect(flavor == Flavor::kHa ? update == "OnDelete"
                                   : update == "RollingUpdate",
             who + ": updateStrategy " + update +
                 (flavor == Flavor::kHa
                      ? " is not OnDelete (a rolling update waits for "
                        "each standby to become ready, which it never does)"
                      : " is not RollingUpdate"));
    const std::string governing = Str(Get(*deploy, {"spec", "serviceName"}));
    const Json* headless = objects.Find("Service", governing);
    if (p.Expect(headless != nullptr,
                 who + ": serviceName \"" + governing + "\" is no Service")) {
      p.Expect(Str(Get(*headless, {"spec", "clusterIP"})) == "None",
               "Service " + governing + " is not headless (clusterIP None)");
      p.Expect(
          SelectorMatches(Get(*headless, {"spec", "selector"}), *cpod->labels),
          "Service " + governing + " does not select the coordinators");
    }
    if (flavor == Flavor::kHa) {
      // The Service follows the leader by readiness: a quick probe.
      const Json& period = Get(*coord, {"readinessProbe", "periodSeconds"});
      p.Expect(period.is_number() && period.get<int>() <= 2,
               who + ": readinessProbe.periodSeconds " + Str(period) +
                   " is over 2 (the Service follows a new leader that late)");
      const std::string want_advertise =
          "<fieldRef:metadata.name>." + governing +
          ".<fieldRef:metadata.namespace>.svc.cluster.local:7070";
      p.Expect(Flag(args, "--advertise", &p, who) == want_advertise,
               who + ": --advertise is not \"" + want_advertise + "\"");
    }
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
  if (flavor == Flavor::kHa) CheckEtcd(objects, cpod, coord, &p);
  if (flavor != Flavor::kGpu) {
    for (const Json& o : objects.all()) {
      p.Expect(o.dump().find("nvidia.com/gpu") == std::string::npos,
               Str(Get(o, {"kind"})) + " " + Str(Get(o, {"metadata", "name"})) +
                   " mentions nvidia.com/gpu in the cpu overlay");
    }
  }
}

}  // namespace

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

}  // namespace k8s
}  // namespace testing
}  // namespace lockstep
