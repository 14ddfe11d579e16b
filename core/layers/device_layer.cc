// The device implementation table.
#include "core/layers/device_layer.h"

#include <map>

namespace lockstep {
namespace {

std::map<std::string, DeviceLayer, std::less<>>& Table() {
  static auto* t = new std::map<std::string, DeviceLayer, std::less<>>();
  return *t;
}

}  // namespace

bool RegisterDeviceLayer(const std::string& type, DeviceLayer impl) {
  Table()[type] = std::move(impl);
  return true;
}

const DeviceLayer* FindDeviceLayer(absl::string_view type) {
  auto it = Table().find(type);
  return it == Table().end() ? nullptr : &it->second;
}

}  // namespace lockstep
