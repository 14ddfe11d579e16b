// The coordinator's HTTP side (`lockstep coordinator --http`): Prometheus
// /metrics, the dashboard page at /, and the JSON it polls at /api/state.
// Everything is computed from Coordinator::Ops() at request time.
#ifndef LOCKSTEP_COORDINATOR_OPS_ENDPOINTS_H_
#define LOCKSTEP_COORDINATOR_OPS_ENDPOINTS_H_

#include <map>
#include <string>

#include "coordinator/coordinator.h"
#include "nlohmann/json.hpp"
#include "rpc/http_server.h"

namespace lockstep {

// The text exposition format (version 0.0.4) of `view`.
std::string CoordinatorMetricsText(const Coordinator::OpsView& view,
                                   bool ready);

// {"jobs": [...], "workers": [...], "not_serving": "..."}: each job's
// state, progress, figures, last events and curves; each worker's
// identity, job, rank, heartbeat age; and why this coordinator does not
// serve ("" when it does; a standby's names the leader), which the page
// shows above its empty tables.
nlohmann::json DashboardState(const Coordinator::OpsView& view);

// "/", "/api/state", "/metrics" over `coordinator` (not owned).
std::map<std::string, HttpHandler> CoordinatorRoutes(
    const Coordinator* coordinator);

}  // namespace lockstep

#endif  // LOCKSTEP_COORDINATOR_OPS_ENDPOINTS_H_
