// The release version: printed by `lockstep version`, sent at registration.
#ifndef LOCKSTEP_CORE_VERSION_H_
#define LOCKSTEP_CORE_VERSION_H_

namespace lockstep {
inline constexpr char kVersion[] = "0.1.0";
}  // namespace lockstep

#endif  // LOCKSTEP_CORE_VERSION_H_
