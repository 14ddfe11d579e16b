#include "core/loss/loss.h"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <utility>

namespace lockstep {
namespace {

std::map<std::string, std::unique_ptr<Loss>, std::less<>>& Registry() {
  static auto* r =
      new std::map<std::string, std::unique_ptr<Loss>, std::less<>>;
  return *r;
}

std::vector<std::string>& Order() {
  static auto* names = new std::vector<std::string>;
  return *names;
}

}  // namespace

bool RegisterLoss(Loss loss) {
  const std::string name = loss.name;
  if (!Registry()
           .emplace(name, std::make_unique<Loss>(std::move(loss)))
           .second) {
    return false;
  }
  Order().push_back(name);
  return true;
}

const Loss* FindLoss(absl::string_view name) {
  auto it = Registry().find(name);
  return it == Registry().end() ? nullptr : it->second.get();
}

std::vector<const Loss*> Losses() {
  std::vector<const Loss*> losses;
  for (const std::string& name : Order()) {
    losses.push_back(Registry().find(name)->second.get());
  }
  return losses;
}

const Loss& LossNamed(absl::string_view name) {
  const Loss* loss = FindLoss(name);
  if (loss == nullptr) {
    std::fprintf(stderr, "no loss named \"%.*s\" is registered\n",
                 static_cast<int>(name.size()), name.data());
    std::abort();
  }
  return *loss;
}

bool FusesOutputActivation(const Loss& loss, bool output_softmax,
                           bool output_sigmoid) {
  switch (loss.fused) {
    case FusedActivation::kSoftmax:
      return output_softmax;
    case FusedActivation::kSigmoid:
      return output_sigmoid;
    case FusedActivation::kNone:
      break;
  }
  return false;
}

}  // namespace lockstep
