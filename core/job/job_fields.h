// Every field a job file may hold, as the reference (docs/job-file.md)
// names them: `lockstep check --fields` prints this list and the docs test
// checks the reference against it both ways.
#ifndef LOCKSTEP_CORE_JOB_JOB_FIELDS_H_
#define LOCKSTEP_CORE_JOB_JOB_FIELDS_H_

#include <string>
#include <vector>

namespace lockstep {

// Sorted, one entry per field:
//   "optimizer.learning_rate", "cluster.workers.min", "model.inputs[].name"
//       a field of a fixed object, by its dotted path ("[]": any element);
//   "layer dense: units"    a field of one layer type (model.layers[i]) or
//                           of a preset model of that type;
//   "data csv: train_path"  a field of one data format.
// The lists are those the parser checks objects against, and the layer and
// data format registries.
std::vector<std::string> JobFieldNames();

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_JOB_JOB_FIELDS_H_
