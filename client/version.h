// The release version, printed by `lockstep version`.
#ifndef LOCKSTEP_CLIENT_VERSION_H_
#define LOCKSTEP_CLIENT_VERSION_H_

namespace lockstep {
inline constexpr char kVersion[] = "0.1.0";
}  // namespace lockstep

#endif  // LOCKSTEP_CLIENT_VERSION_H_
