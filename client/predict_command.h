// `lockstep predict JOB.json --text "the [MASK] said ..."`: fill-mask with a
// text job's trained model.
#ifndef LOCKSTEP_CLIENT_PREDICT_COMMAND_H_
#define LOCKSTEP_CLIENT_PREDICT_COMMAND_H_

#include <string>
#include <vector>

namespace lockstep {

extern const char kPredictUsage[];

// Runs the verb; returns the process exit status (0 done, 1 failed, 2 bad
// usage, a bad job or query, or no checkpoint).
int RunPredictCommand(const std::vector<std::string>& args);

}  // namespace lockstep

#endif  // LOCKSTEP_CLIENT_PREDICT_COMMAND_H_
