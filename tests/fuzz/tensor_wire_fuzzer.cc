// A tensor a peer sends (TensorData: checkpoint slices to the coordinator,
// checkpoint fetches to a worker): any bytes that parse as a TensorData
// give a tensor or a refusal with a message (InvalidArgument or DataLoss, as
// rpc/tensor_wire.h documents), never a crash, a read past the payload or an
// allocation the payload does not pay for (a shape that claims gigabytes or
// overflows int64). An accepted tensor has the sent shape and bytes, and
// TensorToWire then TensorFromWire gives the same shape, bytes and CRC.
#include <cstdint>
#include <cstring>
#include <string>

#include "absl/status/statusor.h"
#include "core/tensor.h"
#include "google/protobuf/stubs/logging.h"
#include "proto/cluster.pb.h"
#include "rpc/tensor_wire.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

// Invalid UTF-8 in a string field fails the parse, and protobuf logs each
// such failure: the lines would bury libFuzzer's report. Set before the
// first input, in libFuzzer and in the replay alike.
const bool kQuietProtobuf = [] {
  google::protobuf::SetLogHandler(nullptr);
  return true;
}();

// n bytes equal; an empty tensor's data() may be null, which memcmp must
// not see.
bool SameBytes(const void* a, const void* b, size_t n) {
  return n == 0 || std::memcmp(a, b, n) == 0;
}

// Same shape, and the same bytes (compared as bytes: NaNs must survive too).
bool SameTensor(const lockstep::Tensor& a, const lockstep::Tensor& b) {
  return a.shape() == b.shape() && a.size() == b.size() &&
         SameBytes(a.data(), b.data(), sizeof(float) * a.size());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace lockstep;
  v1::TensorData wire;
  // Bytes that are not a TensorData never reach TensorFromWire: gRPC
  // refuses the message first.
  if (!wire.ParseFromArray(data, static_cast<int>(size))) return 0;
  absl::StatusOr<Tensor> t = TensorFromWire(wire);
  fuzz::CheckRefusal(t.status());
  if (!t.ok()) {
    FUZZ_CHECK(absl::IsInvalidArgument(t.status()) ||
               absl::IsDataLoss(t.status()));
    return 0;
  }
  // Accepted: exactly the sent shape, and the payload is the values.
  FUZZ_CHECK(t->shape().size() == static_cast<size_t>(wire.shape_size()));
  for (int i = 0; i < wire.shape_size(); ++i) {
    FUZZ_CHECK(t->shape()[i] == wire.shape(i));
  }
  FUZZ_CHECK(t->size() == NumElements(t->shape()));
  FUZZ_CHECK(sizeof(float) * static_cast<size_t>(t->size()) ==
             wire.data().size());
  FUZZ_CHECK(SameBytes(t->data(), wire.data().data(), wire.data().size()));

  // The sender's side of the same tensor carries it back unchanged.
  v1::TensorData again;
  TensorToWire(wire.name(), wire.optimizer(), *t, &again);
  FUZZ_CHECK(again.name() == wire.name());
  FUZZ_CHECK(again.optimizer() == wire.optimizer());
  FUZZ_CHECK(again.data() == wire.data());
  FUZZ_CHECK(again.crc32c() == wire.crc32c());
  absl::StatusOr<Tensor> back = TensorFromWire(again);
  FUZZ_CHECK(back.ok());
  FUZZ_CHECK(SameTensor(*back, *t));
  return 0;
}
