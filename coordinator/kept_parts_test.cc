// PlanKeptParts: which survivor sends which part of a sharded job's state
// kept in memory (sharded optimizer state with copies), and why the parts
// sometimes do not make the whole state.
#include "coordinator/kept_parts.h"

#include <vector>

#include "gtest/gtest.h"

namespace lockstep {
namespace {

TEST(KeptPartsTest, TheOwnerSendsItsPartAndTheNextRankALostOnes) {
  // Rank 1 of 3 was lost: its part is rank 2's copy. The survivors are
  // ranks 0 and 1 of the next generation (old ranks 2 and 0).
  absl::StatusOr<KeptPartsPlan> plan =
      PlanKeptParts({{0, 40, 2, 3}, {1, 40, 0, 3}});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->step, 40);
  EXPECT_EQ(plan->donors, (std::vector<int>{1, 0, 0}));
  // Two workers, one lost: the survivor holds both parts.
  plan = PlanKeptParts({{0, 7, 1, 2}});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->donors, (std::vector<int>{0, 0}));
  // Nobody lost (an elastic grow): every rank sends its own.
  plan = PlanKeptParts({{2, 9, 0, 3}, {0, 9, 1, 3}, {1, 9, 2, 3}});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->donors, (std::vector<int>{2, 0, 1}));
}

TEST(KeptPartsTest, AWorkerStoppedAtTheBarrierOffersBothSteps) {
  // Old rank 0 made step 41's update; rank 1 failed at the barrier before
  // it and kept 40 and 41: 41 is every survivor's.
  absl::StatusOr<KeptPartsPlan> plan =
      PlanKeptParts({{0, 41, 0, 3}, {1, 40, 1, 3, 41}});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->step, 41);
  EXPECT_EQ(plan->donors, (std::vector<int>{0, 1, 0}));
  // No worker made it: 40, though one offers 41 too.
  plan = PlanKeptParts({{0, 40, 0, 3}, {1, 40, 1, 3, 41}});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->step, 40);
}

TEST(KeptPartsTest, WhyThePartsDoNotMakeTheWholeStateIsNamed) {
  // Ranks 1 and 2 of 4 lost: rank 1's part went with both its holders.
  absl::StatusOr<KeptPartsPlan> plan =
      PlanKeptParts({{0, 40, 0, 4}, {1, 40, 3, 4}});
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(plan.status().message(),
            "the part of rank 1 was lost with ranks 1 and 2, which kept it");
  plan = PlanKeptParts({{0, 41, 0, 3}, {1, 40, 1, 3}, {2, 41, 2, 3}});
  EXPECT_EQ(plan.status().message(),
            "no step is kept by every worker: rank 1 kept step 40; ranks 0, "
            "2 kept step 41");
  plan = PlanKeptParts({{0, 40, 0, 3}, {1, 40, 1, 2}});
  EXPECT_EQ(plan.status().message(),
            "the kept parts are of worlds of 3 and 2 ranks");
  EXPECT_EQ(PlanKeptParts({}).status().message(), "no worker kept its part");
}

}  // namespace
}  // namespace lockstep
