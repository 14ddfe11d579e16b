// What the coordinator's in-process tests share: a small 2-worker job and
// a worker's registration.
#ifndef LOCKSTEP_COORDINATOR_COORDINATOR_TEST_UTIL_H_
#define LOCKSTEP_COORDINATOR_COORDINATOR_TEST_UTIL_H_

#include <string>

#include "proto/cluster.pb.h"
#include "rpc/rpc_util.h"

namespace lockstep {
namespace testing {

// Job "j": a dense layer on 100 synthetic samples, 2 workers x 1 replica,
// batch 10 per replica, one epoch.
inline constexpr char kTwoWorkerJob[] = R"({
  "name": "j", "seed": 1,
  "model": {"input_shape": [4], "layers": [{"type": "dense", "units": 2}]},
  "data": {"format": "synthetic", "train_samples": 100, "test_samples": 10,
           "num_classes": 2},
  "batch_size_per_replica": 10, "epochs": 1,
  "cluster": {"workers": 2, "replicas_per_worker": 1}
})";

// A registration from `host` (pid 100, collective address host:1) with
// `replicas` CPU replicas, at this build's protocol version.
inline lockstep::v1::RegisterRequest TestRegistration(const std::string& host,
                                                      int replicas = 1) {
  lockstep::v1::RegisterRequest r;
  r.set_protocol_version(kProtocolVersion);
  r.set_host(host);
  r.set_pid(100);
  r.set_collective_address(host + ":1");
  r.set_replicas(replicas);
  return r;
}

}  // namespace testing
}  // namespace lockstep

#endif  // LOCKSTEP_COORDINATOR_COORDINATOR_TEST_UTIL_H_
