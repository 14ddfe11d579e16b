// Checkpoint slices a worker uploads (Coordinator.UploadCheckpoint), as the
// coordinator's CheckpointAssembler::Add takes them, on a fresh assembler
// over a scratch CheckpointStore: every upload is accepted or refused with a
// message, never a crash or an allocation its payload does not pay for; an
// accepted upload carried exactly the tensors its rank owes; a commit holds
// exactly the step's tensors as they were sent (read back and verified by
// CheckpointStore::LoadStep). And per message, CheckpointStateToSlice
// writes back exactly the state fields CheckpointStateFromSlice read.
//
// Input: records in protobuf's delimited form, each a varint32 length and
// that many bytes of a serialized CheckpointSlice. A zero-length record
// ends one upload stream (one Add), as does the end of the input. A record
// that runs past the end or does not parse ends the input: the stream so
// far is still added, as the server's Read loop hands over what it read
// before a message it could not parse.
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/checkpoint_assembler.h"
#include "core/checkpoint/checkpoint.h"
#include "core/tensor.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/stubs/logging.h"
#include "proto/cluster.pb.h"
#include "rpc/checkpoint_wire.h"
#include "rpc/tensor_wire.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

using lockstep::Tensor;
using lockstep::v1::CheckpointSlice;

// Invalid UTF-8 in a string field fails the parse, and protobuf logs each
// such failure: the lines would bury libFuzzer's report. Set before the
// first input, in libFuzzer and in the replay alike.
const bool kQuietProtobuf = [] {
  google::protobuf::SetLogHandler(nullptr);
  return true;
}();

// Bounds one input's work (each record may be one Add, and a commit writes
// and fsyncs files).
constexpr int kMaxRecords = 64;

// A tensor the harness saw accepted: (generation, step, optimizer, name).
using TensorKey = std::tuple<int64_t, int64_t, bool, std::string>;

// Same shape and bytes (NaNs included); an empty tensor's data() may be
// null, which memcmp must not see.
bool SameTensor(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.size() == b.size() &&
         (a.size() == 0 ||
          std::memcmp(a.data(), b.data(), sizeof(float) * a.size()) == 0);
}

// The message's bytes with map entries (the artifacts) in key order.
std::string Deterministic(const CheckpointSlice& m) {
  std::string out;
  google::protobuf::io::StringOutputStream stream(&out);
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.SetSerializationDeterministic(true);
  m.SerializeToCodedStream(&coded);
  coded.Trim();
  return out;
}

// CheckpointStateFromSlice reads the state fields and CheckpointStateToSlice
// writes the same ones back: the message, with those cleared and then
// rewritten from the state, is the message again.
void CheckStateRoundTrip(const CheckpointSlice& m) {
  CheckpointSlice rewritten = m;
  rewritten.clear_step();
  rewritten.clear_generation();
  rewritten.clear_epoch();
  rewritten.clear_step_in_epoch();
  rewritten.clear_seed();
  rewritten.clear_optimizer_iterations();
  rewritten.clear_loss_scale();
  rewritten.clear_loss_scale_good_steps();
  rewritten.clear_loss_scale_skipped_steps();
  rewritten.clear_job_json();
  rewritten.clear_train_loss();
  rewritten.clear_artifacts();
  lockstep::CheckpointStateToSlice(lockstep::CheckpointStateFromSlice(m),
                                   &rewritten);
  FUZZ_CHECK(Deterministic(rewritten) == Deterministic(m));
}

// Reads the input's records into upload streams; see the header comment.
std::vector<std::vector<CheckpointSlice>> ReadStreams(const uint8_t* data,
                                                      size_t size) {
  std::vector<std::vector<CheckpointSlice>> streams(1);
  google::protobuf::io::CodedInputStream in(data, static_cast<int>(size));
  for (int records = 0; records < kMaxRecords && in.BytesUntilLimit() > 0;
       ++records) {
    uint32_t length = 0;
    if (!in.ReadVarint32(&length)) break;
    if (length == 0) {
      streams.emplace_back();
      continue;
    }
    if (length > static_cast<uint32_t>(in.BytesUntilLimit())) break;
    const auto limit = in.PushLimit(static_cast<int>(length));
    CheckpointSlice m;
    const bool parsed =
        m.ParseFromCodedStream(&in) && in.ConsumedEntireMessage();
    in.PopLimit(limit);
    if (!parsed) break;
    CheckStateRoundTrip(m);
    streams.back().push_back(std::move(m));
  }
  // A trailing empty stream is only the end of the last one.
  if (streams.size() > 1 && streams.back().empty()) streams.pop_back();
  return streams;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace lockstep;
  const std::vector<std::vector<CheckpointSlice>> streams =
      ReadStreams(data, size);

  // A fresh store per input: commits of one input never meet another's.
  const std::string dir = fuzz::ScratchDir() + "/fuzz_" +
                          std::to_string(static_cast<long>(getpid())) +
                          "_checkpoints";
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  auto store = std::make_shared<CheckpointStore>(dir, /*keep=*/2);
  CheckpointAssembler assembler(store);
  // The last accepted value of each tensor, as the assembler keeps them.
  std::map<TensorKey, Tensor> accepted;

  for (const std::vector<CheckpointSlice>& stream : streams) {
    absl::StatusOr<CommitInfo> info = assembler.Add(stream);
    fuzz::CheckRefusal(info.status());
    if (!info.ok()) continue;
    const CheckpointSlice& head = stream.front();

    // Accepted: this rank's share of the tensors, each one verified.
    const int64_t world = head.world_size();
    FUZZ_CHECK(world >= 1 && head.rank() >= 0 && head.rank() < world);
    const int64_t total =
        int64_t{head.model_tensors()} + int64_t{head.optimizer_tensors()};
    const int64_t owed = total / world + (head.rank() < total % world ? 1 : 0);
    int64_t carried = 0;
    for (const CheckpointSlice& m : stream) {
      if (!m.has_tensor()) continue;
      ++carried;
      absl::StatusOr<Tensor> t = TensorFromWire(m.tensor());
      FUZZ_CHECK(t.ok());
      accepted[TensorKey{head.generation(), head.step(), m.tensor().optimizer(),
                         m.tensor().name()}] = *std::move(t);
    }
    FUZZ_CHECK(carried == owed);
    if (!info->committed) {
      FUZZ_CHECK(info->path.empty());
      continue;
    }

    // Committed: the step folder loads back, verified, with the counts the
    // header promised and the tensors as they were sent.
    absl::StatusOr<LoadedCheckpoint> loaded =
        store->LoadStep(CheckpointFolderName(head.step()));
    FUZZ_CHECK(loaded.ok());
    FUZZ_CHECK(loaded->state.step == head.step());
    FUZZ_CHECK(loaded->state.generation == head.generation());
    FUZZ_CHECK(static_cast<int64_t>(loaded->model.size()) ==
               head.model_tensors());
    FUZZ_CHECK(static_cast<int64_t>(loaded->optimizer.size()) ==
               head.optimizer_tensors());
    for (int part = 0; part < 2; ++part) {
      for (const auto& [name, tensor] :
           part == 0 ? loaded->model : loaded->optimizer) {
        auto it = accepted.find(
            TensorKey{head.generation(), head.step(), part == 1, name});
        FUZZ_CHECK(it != accepted.end());
        FUZZ_CHECK(SameTensor(tensor, it->second));
      }
    }
  }
  std::filesystem::remove_all(dir, ec);
  return 0;
}
