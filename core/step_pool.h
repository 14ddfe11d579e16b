// Runs one function on N lanes (the caller is lane 0) and waits for all:
// the per-step fork/join for local replicas, with persistent threads so a
// step costs two condition-variable handoffs, not thread creation.
#ifndef LOCKSTEP_CORE_STEP_POOL_H_
#define LOCKSTEP_CORE_STEP_POOL_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "base/first_exception.h"

namespace lockstep {

class StepPool {
 public:
  explicit StepPool(int lanes);  // lanes >= 1
  ~StepPool();                   // joins the threads
  StepPool(const StepPool&) = delete;
  StepPool& operator=(const StepPool&) = delete;

  int lanes() const { return lanes_; }
  // Calls fn(lane) for lane in [0, lanes) concurrently; blocks until all
  // return. An exception a lane throws (std::bad_alloc) is rethrown here,
  // on the caller's thread, once every lane has returned: the first one
  // thrown, the others dropped. Not reentrant.
  void Run(const std::function<void(int lane)>& fn);

 private:
  void Loop(int lane);

  const int lanes_;
  std::mutex mu_;
  std::condition_variable start_cv_, done_cv_;
  const std::function<void(int)>* fn_ = nullptr;
  int64_t generation_ = 0;
  int pending_ = 0;
  bool shutdown_ = false;
  FirstException thrown_;  // what the step's lanes threw
  std::vector<std::thread> threads_;
};

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_STEP_POOL_H_
