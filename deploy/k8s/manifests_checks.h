// The checks of the deploy/k8s manifest tests: each adds to Problems what a
// rendered overlay (or an example) gets wrong, in words.
#ifndef LOCKSTEP_DEPLOY_K8S_MANIFESTS_CHECKS_H_
#define LOCKSTEP_DEPLOY_K8S_MANIFESTS_CHECKS_H_

#include <string>
#include <vector>

#include "deploy/k8s/manifests_pod.h"
#include "deploy/k8s/manifests_test_util.h"

namespace lockstep {
namespace testing {
namespace k8s {

// Non-root, read-only root, no privilege escalation, no capabilities, /tmp
// writable, resources set.
void CheckPodHardening(const Pod& pod, Problems* p);

// Every Secret, ConfigMap and claim a pod's volumes name is rendered.
void CheckVolumeSources(const Objects& objects, const Pod& pod, Problems* p);

// The gRPC health probes: native grpc probes on the plaintext health port,
// "liveness" for liveness (and startup), "" (ready) for readiness.
void CheckProbes(const std::string& who, const Json& container, int health_port,
                 Problems* p);

// A listening flag (0.0.0.0:PORT, PORT a containerPort); returns PORT.
int CheckListenFlag(const std::string& who,
                    const std::vector<std::string>& args, const Json& container,
                    const std::string& flag, Problems* p);

// The Prometheus scrape annotations name the --http port.
void CheckScrape(const Pod& pod, int http_port, Problems* p);

// A TLS/token flag names a file mounted from the Secret holding `expected`.
void CheckMountedFlag(const Objects& objects, const Pod& pod,
                      const Json& container,
                      const std::vector<std::string>& args,
                      const std::string& flag, const std::string& expected,
                      const std::string& expected_name, Problems* p);

// host:port of a Service reaches `pod`'s container port `want_port`.
void CheckServiceAddress(const Objects& objects, const std::string& who,
                         const std::string& address, const Pod& pod,
                         const Json& container, int want_port, Problems* p);

// Everything but the submit Job, for one overlay (in
// manifests_deployment_check.cc). A field of an unexpected type (value() on
// a list, say) is a problem too.
Problems CheckDeployment(const Objects& objects, Flavor flavor,
                         const SecretFiles& secrets, const Json& job_example,
                         const Json& synthetic_example);

// The example submit Job against the deployment's objects; a field of an
// unexpected type is a problem too.
Problems CheckSubmitJob(const Json& job, const Objects& objects,
                        const SecretFiles& secrets);

}  // namespace k8s
}  // namespace testing
}  // namespace lockstep

#endif  // LOCKSTEP_DEPLOY_K8S_MANIFESTS_CHECKS_H_
