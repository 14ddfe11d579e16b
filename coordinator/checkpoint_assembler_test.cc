// Checkpoint commits from worker slices: two ranks' slices make one
// verified checkpoint; a damaged tensor, a duplicate rank, a contradicting
// header, a stale generation or a tensor whose shape claims more than its
// payload (gigabytes, or past int64) is refused and commits nothing.
#include "coordinator/checkpoint_assembler.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/file_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rpc/tensor_wire.h"

namespace lockstep {
namespace {

using lockstep::v1::CheckpointSlice;
using ::testing::HasSubstr;

class AssemblerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = JoinPath(
        ::testing::TempDir(),
        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    store_ = std::make_shared<CheckpointStore>(dir_, 3);
    for (int i = 0; i < 3; ++i) {
      Tensor t({2, 2});
      for (int k = 0; k < 4; ++k) t.data()[k] = i * 10 + k;
      tensors_.push_back(t);
    }
  }
  // Rank r's slice at `step`: model tensors m0, m1 and optimizer tensor o0
  // (index 2), those with index % 2 == r.
  std::vector<CheckpointSlice> Slice(int rank, int64_t step,
                                     int64_t generation = 1) {
    std::vector<CheckpointSlice> out;
    const char* names[] = {"m0", "m1", "o0"};
    for (int i = rank; i < 3; i += 2) {
      CheckpointSlice m;
      m.set_job("j");
      m.set_generation(generation);
      m.set_step(step);
      m.set_rank(rank);
      m.set_world_size(2);
      m.set_model_tensors(2);
      m.set_optimizer_tensors(1);
      m.set_seed(5);
      m.set_optimizer_iterations(step);
      TensorToWire(names[i], i == 2, tensors_[i], m.mutable_tensor());
      out.push_back(m);
    }
    return out;
  }

  // Rank r's slice with the optimizer state sharded: model tensor m{r}
  // and, of the optimizer tensor o0 (2x2, the values of tensors_[2]), the
  // part [begin, begin + size).
  std::vector<CheckpointSlice> ShardedSlice(int rank, int64_t begin,
                                            int64_t size, int64_t step = 10) {
    std::vector<CheckpointSlice> out = Slice(rank, step);
    out.resize(1);  // m0 or m1: the model tensors i % 2 == rank
    if (rank == 0) {
      TensorToWire("m0", false, tensors_[0], out[0].mutable_tensor());
    }
    CheckpointSlice part = out[0];
    Tensor piece({size});
    for (int64_t k = 0; k < size; ++k) {
      piece.data()[k] = tensors_[2].data()[begin + k];
    }
    TensorToWire("o0", true, piece, part.mutable_tensor());
    part.mutable_tensor()->set_offset(begin);
    part.mutable_tensor()->add_whole_shape(2);
    part.mutable_tensor()->add_whole_shape(2);
    out.push_back(part);
    for (CheckpointSlice& m : out) m.set_sharded_optimizer(true);
    return out;
  }

  std::string dir_;
  std::shared_ptr<CheckpointStore> store_;
  std::vector<Tensor> tensors_;
};

TEST_F(AssemblerTest, ShardedOptimizerPartsMakeTheWholeTensor) {
  CheckpointAssembler a(store_);
  ASSERT_TRUE(a.Add(ShardedSlice(1, 3, 1)).ok());
  absl::StatusOr<CommitInfo> done = a.Add(ShardedSlice(0, 0, 3));
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_TRUE(done->committed);
  absl::StatusOr<LoadedCheckpoint> loaded = store_->LoadLatest(nullptr);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_EQ(loaded->optimizer.size(), 1u);
  EXPECT_EQ(loaded->optimizer[0].first, "o0");
  EXPECT_EQ(loaded->optimizer[0].second.shape(), (Shape{2, 2}));
  for (int k = 0; k < 4; ++k) {
    EXPECT_EQ(loaded->optimizer[0].second.data()[k], tensors_[2].data()[k]);
  }
}

TEST_F(AssemblerTest, ShardedPartsThatOverlapLeaveAGapOrLieAreRefused) {
  struct Case {
    int64_t b0, n0, b1, n1;
    const char* error;
  };
  for (const Case& c : std::vector<Case>{
           {0, 3, 2, 2,
            "checkpoint step 10: the parts of optimizer state o0 overlap at "
            "element 2"},
           {0, 2, 3, 1,
            "checkpoint step 10: the parts of optimizer state o0 leave a gap "
            "at element 2"},
           {0, 1, 1, 1,
            "checkpoint step 10: the parts of optimizer state o0 end at "
            "element 2 of 4"}}) {
    CheckpointAssembler a(store_);
    ASSERT_TRUE(a.Add(ShardedSlice(1, c.b1, c.n1)).ok());
    absl::StatusOr<CommitInfo> done = a.Add(ShardedSlice(0, c.b0, c.n0));
    EXPECT_EQ(done.status().message(), c.error);
  }
  EXPECT_TRUE(store_->ListSteps().empty());
  CheckpointAssembler a(store_);
  // A part past its tensor's end, a whole optimizer tensor in a sharded
  // slice, a part in an unsharded one, a shape too large to hold.
  std::vector<CheckpointSlice> past = ShardedSlice(0, 3, 2 - 1);
  past[1].mutable_tensor()->set_offset(4);
  EXPECT_THAT(a.Add(past).status().message(),
              HasSubstr("tensor o0: part [4, 5) outside its shape [2, 2]"));
  std::vector<CheckpointSlice> whole = ShardedSlice(0, 0, 4);
  whole[1].mutable_tensor()->clear_whole_shape();
  TensorToWire("o0", true, tensors_[2], whole[1].mutable_tensor());
  EXPECT_THAT(a.Add(whole).status().message(),
              HasSubstr("optimizer tensor o0 is whole, but the state is "
                        "sharded (parts expected)"));
  std::vector<CheckpointSlice> part = ShardedSlice(0, 0, 1, /*step=*/11);
  for (CheckpointSlice& m : part) m.set_sharded_optimizer(false);
  EXPECT_THAT(a.Add(part).status().message(),
              HasSubstr("tensor o0 comes in a part, but only sharded "
                        "optimizer state does"));
  std::vector<CheckpointSlice> huge = ShardedSlice(0, 0, 1, /*step=*/12);
  huge[1].mutable_tensor()->add_whole_shape(int64_t{1} << 40);
  EXPECT_THAT(a.Add(huge).status().message(),
              HasSubstr("tensor o0: bad shape [2, 2, 1099511627776]"));
  EXPECT_TRUE(store_->ListSteps().empty());
}

TEST_F(AssemblerTest, TwoSlicesCommitOneCheckpoint) {
  CheckpointAssembler a(store_);
  absl::StatusOr<CommitInfo> first = a.Add(Slice(1, 10));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_FALSE(first->committed);
  EXPECT_TRUE(store_->ListSteps().empty());
  absl::StatusOr<CommitInfo> second = a.Add(Slice(0, 10));
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_TRUE(second->committed);
  EXPECT_EQ(second->bytes, 3 * 4 * 4);
  absl::StatusOr<LoadedCheckpoint> loaded = store_->LoadLatest(nullptr);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->state.step, 10);
  EXPECT_EQ(loaded->state.optimizer_iterations, 10);
  ASSERT_EQ(loaded->model.size(), 2u);
  ASSERT_EQ(loaded->optimizer.size(), 1u);
  EXPECT_EQ(loaded->model[1].first, "m1");
  EXPECT_EQ(loaded->model[1].second.data()[3], 13.0f);
  EXPECT_EQ(loaded->optimizer[0].second.data()[0], 20.0f);
}

TEST_F(AssemblerTest, DamagedTensorIsRefusedAndNothingCommits) {
  CheckpointAssembler a(store_);
  std::vector<CheckpointSlice> bad = Slice(0, 10);
  (*bad[0].mutable_tensor()->mutable_data())[5] ^= 0x20;
  absl::StatusOr<CommitInfo> r = a.Add(bad);
  EXPECT_TRUE(absl::IsDataLoss(r.status())) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr("tensor m0: CRC32C"));
  ASSERT_TRUE(a.Add(Slice(1, 10)).ok());
  EXPECT_TRUE(store_->ListSteps().empty());
}

TEST_F(AssemblerTest, DuplicateRankAndContradictionsAreRefused) {
  CheckpointAssembler a(store_);
  ASSERT_TRUE(a.Add(Slice(0, 10)).ok());
  absl::StatusOr<CommitInfo> again = a.Add(Slice(0, 10));
  EXPECT_TRUE(absl::IsInvalidArgument(again.status()));
  EXPECT_THAT(again.status().message(), HasSubstr("already sent"));
  std::vector<CheckpointSlice> odd = Slice(1, 10);
  odd[0].set_world_size(3);
  odd[0].set_rank(1);
  absl::StatusOr<CommitInfo> r = a.Add(odd);
  EXPECT_TRUE(absl::IsInvalidArgument(r.status()));
  EXPECT_THAT(r.status().message(), HasSubstr("contradicts"));
  std::vector<CheckpointSlice> missing = Slice(1, 10);
  missing.front().clear_tensor();
  missing.push_back(missing.front());  // two messages, no tensors
  r = a.Add(missing);
  EXPECT_THAT(r.status().message(), HasSubstr("owes 1"));
  EXPECT_TRUE(store_->ListSteps().empty());
}

TEST_F(AssemblerTest, StaleGenerationIsRefused) {
  CheckpointAssembler a(store_);
  ASSERT_TRUE(a.Add(Slice(0, 10, 2)).ok());
  absl::StatusOr<CommitInfo> r = a.Add(Slice(1, 10, 1));
  EXPECT_TRUE(absl::IsFailedPrecondition(r.status()));
  EXPECT_THAT(r.status().message(), HasSubstr("stale generation"));
}

TEST_F(AssemblerTest, DuplicateTensorNamesAreRefusedOnceAllSlicesArrive) {
  CheckpointAssembler a(store_);
  ASSERT_TRUE(a.Add(Slice(0, 10)).ok());
  std::vector<CheckpointSlice> same = Slice(1, 10);
  same[0].mutable_tensor()->set_name("m0");  // rank 0 sent an m0 already
  absl::StatusOr<CommitInfo> r = a.Add(same);
  EXPECT_TRUE(absl::IsInvalidArgument(r.status())) << r.status();
  EXPECT_THAT(r.status().message(),
              HasSubstr("checkpoint step 10: 1 model and 1 optimizer tensors "
                        "arrived, 2 and 1 expected (duplicate names?)"));
  EXPECT_TRUE(store_->ListSteps().empty());
  // The step was forgotten: its slices may come again.
  ASSERT_TRUE(a.Add(Slice(0, 10)).ok());
  absl::StatusOr<CommitInfo> again = a.Add(Slice(1, 10));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->committed);
}

TEST_F(AssemblerTest, TensorCountsWhoseSumOverflowsAnIntAreRefused) {
  CheckpointAssembler a(store_);
  std::vector<CheckpointSlice> bad = Slice(0, 10);
  bad[0].set_model_tensors(INT32_MAX);
  bad[0].set_optimizer_tensors(INT32_MAX);
  absl::StatusOr<CommitInfo> r = a.Add(bad);
  EXPECT_TRUE(absl::IsInvalidArgument(r.status())) << r.status();
  EXPECT_THAT(r.status().message(),
              HasSubstr("2 tensors, but rank 0 of 2 owes 2147483647 of the "
                        "4294967294"));
  EXPECT_TRUE(store_->ListSteps().empty());
}

TEST_F(AssemblerTest, ATensorWhoseShapeOverflowsIsRefusedNotAllocated) {
  CheckpointAssembler a(store_);
  std::vector<CheckpointSlice> bad = Slice(0, 10);
  // 2^62 floats are 2^64 bytes: a wrapped count of 0 would match the empty
  // payload (whose CRC32C is 0) and then size the allocation.
  lockstep::v1::TensorData* t = bad[0].mutable_tensor();
  t->clear_shape();
  t->add_shape(int64_t{1} << 62);
  t->clear_data();
  t->set_crc32c(0);
  absl::StatusOr<CommitInfo> r = a.Add(bad);
  EXPECT_TRUE(absl::IsInvalidArgument(r.status())) << r.status();
  EXPECT_THAT(r.status().message(),
              HasSubstr("tensor m0: shape [4611686018427387904] has more than "
                        "2305843009213693951 elements"));
  EXPECT_TRUE(store_->ListSteps().empty());
}

// What a peer's TensorData may claim: refused with a message before the
// tensor is allocated.
TEST(TensorFromWireTest, HostileShapesAreRefusedBeforeAllocating) {
  lockstep::v1::TensorData d;
  d.set_name("w");
  // 2^34 floats (64 GiB) claimed, 8 bytes sent.
  d.add_shape(int64_t{1} << 34);
  d.set_data(std::string(8, '\0'));
  absl::StatusOr<Tensor> t = TensorFromWire(d);
  EXPECT_TRUE(absl::IsDataLoss(t.status())) << t.status();
  EXPECT_THAT(t.status().message(),
              HasSubstr("tensor w: 8 bytes for shape [17179869184] "
                        "(68719476736 expected)"));
  // Dimensions whose product overflows int64, with or without a zero.
  for (const Shape& shape :
       {Shape{int64_t{1} << 32, int64_t{1} << 32},
        Shape{int64_t{1} << 62}, Shape{int64_t{1} << 40, int64_t{1} << 40, 0},
        Shape{0, INT64_MAX, INT64_MAX}}) {
    d.clear_shape();
    for (int64_t dim : shape) d.add_shape(dim);
    d.clear_data();
    d.set_crc32c(0);
    t = TensorFromWire(d);
    EXPECT_TRUE(absl::IsInvalidArgument(t.status()))
        << ShapeToString(shape) << ": " << t.status();
    EXPECT_THAT(t.status().message(),
                HasSubstr("tensor w: shape " + ShapeToString(shape) +
                          " has more than 2305843009213693951 elements"));
  }
  // A zero-element shape with a large dimension still loads.
  d.clear_shape();
  d.add_shape(0);
  d.add_shape(int64_t{1} << 60);
  t = TensorFromWire(d);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->size(), 0);
}

}  // namespace
}  // namespace lockstep

namespace lockstep {
namespace {

// A rank that never sends its slice (or a peer inventing new steps) cannot
// make the coordinator hold more than kMaxPendingCheckpointSteps steps: a
// new step drops the oldest waiting one, and an older one is refused.
TEST_F(AssemblerTest, AtMostFourIncompleteStepsAreKept) {
  CheckpointAssembler a(store_);
  for (int64_t step = 10; step <= 60; step += 10) {
    absl::StatusOr<CommitInfo> r = a.Add(Slice(0, step));
    ASSERT_TRUE(r.ok()) << step << ": " << r.status();
    EXPECT_FALSE(r->committed);
  }
  // Steps 10 and 20 were dropped: rank 1's slice of step 20 is the oldest
  // now and older than every step kept (30-60), so it is refused.
  absl::StatusOr<CommitInfo> late = a.Add(Slice(1, 20));
  EXPECT_TRUE(absl::IsResourceExhausted(late.status())) << late.status();
  EXPECT_THAT(late.status().message(),
              HasSubstr("checkpoint slice of rank 1 for step 20 (generation "
                        "1): 4 newer checkpoint steps wait for their other "
                        "slices (the oldest is step 30); this older one is "
                        "not kept"));
  // A kept step still commits.
  absl::StatusOr<CommitInfo> r = a.Add(Slice(1, 40));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->committed);
  ASSERT_EQ(store_->ListSteps(), std::vector<std::string>{"step-00000040"});
  // The commit dropped the older steps: 50 and 60 remain, and new steps
  // fit again.
  r = a.Add(Slice(0, 70));
  ASSERT_TRUE(r.ok()) << r.status();
  r = a.Add(Slice(1, 60));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->committed);
}

}  // namespace
}  // namespace lockstep
