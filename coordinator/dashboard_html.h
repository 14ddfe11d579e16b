// The dashboard page (coordinator/dashboard.html), compiled in by a genrule.
#ifndef LOCKSTEP_COORDINATOR_DASHBOARD_HTML_H_
#define LOCKSTEP_COORDINATOR_DASHBOARD_HTML_H_

namespace lockstep {

extern const char kDashboardHtml[];

}  // namespace lockstep

#endif  // LOCKSTEP_COORDINATOR_DASHBOARD_HTML_H_
