// CRC32C (Castagnoli), as used by TFRecord/TensorBoard event files and the
// per-tensor checksums of checkpoints. SSE4.2 when the CPU has it, else a
// slicing-by-8 table.
#ifndef LOCKSTEP_BASE_CRC32C_H_
#define LOCKSTEP_BASE_CRC32C_H_

#include <cstddef>
#include <cstdint>

namespace lockstep {

// CRC32C of data[0, n).
uint32_t Crc32c(const void* data, size_t n);
// CRC32C of A+B given crc = Crc32c(A) and B = data[0, n).
uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t n);

// TFRecord's mask: CRCs of data that itself holds CRCs are weak, so records
// store a rotated and offset value.
inline uint32_t MaskCrc32c(uint32_t crc) {
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}
inline uint32_t UnmaskCrc32c(uint32_t masked) {
  uint32_t rot = masked - 0xa282ead8u;
  return (rot >> 17) | (rot << 15);
}

namespace crc32c_internal {
// The two implementations, exposed so tests can check they agree.
uint32_t ExtendPortable(uint32_t crc, const void* data, size_t n);
uint32_t ExtendSse42(uint32_t crc, const void* data, size_t n);
bool HaveSse42();
}  // namespace crc32c_internal

}  // namespace lockstep

#endif  // LOCKSTEP_BASE_CRC32C_H_
