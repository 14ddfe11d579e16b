#include "coordinator/straggler.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

using ::testing::HasSubstr;

// A rank whose link into it carries `ms_per_mib`, and who works
// `compute_ms` a step (10 MiB and 20 steps recently).
RankFigures Rank(const std::string& label, double ms_per_mib,
                 double compute_ms = 10) {
  RankFigures f;
  f.label = label;
  f.ring_bytes = 10 << 20;
  f.ring_seconds = 10 * ms_per_mib / 1e3;
  f.steps = 20;
  f.compute_seconds = 20 * compute_ms / 1e3;
  return f;
}

TEST(StragglerTest, NoneWhenTheRanksAreAlike) {
  EXPECT_EQ(FindStraggler({Rank("a", 1.0), Rank("b", 1.3), Rank("c", 0.9)})
                .rank,
            -1);
  // One rank alone has nothing to compare with.
  EXPECT_EQ(FindStraggler({Rank("a", 80)}).rank, -1);
}

// Rank 1's host is on a slow link: the links into it (0 -> 1) and out of
// it (1 -> 2) are slow, 2 -> 0 is not.
TEST(StragglerTest, TheRankAtBothEndsOfTheSlowLinksIsNamed) {
  const Straggler s = FindStraggler(
      {Rank("host1 on h1", 1.2), Rank("host2 on h2", 84.0),
       Rank("host3 on h3", 80.5)});
  EXPECT_EQ(s.rank, 1);
  EXPECT_EQ(s.cause, "link");
  EXPECT_EQ(s.subject, "rank 1");
  EXPECT_EQ(s.text,
            "rank 1 (host2 on h2): its ring links are slow (rank 0 -> rank 1 "
            "84.0 ms/MiB, rank 1 -> rank 2 80.5 ms/MiB, against 1.2 ms/MiB on "
            "the fastest link): its host's network holds the job back");
}

// The last rank's host: its links are 1 -> 2 and 2 -> 0; the text names
// the way in first, then the way out.
TEST(StragglerTest, TheLinkIntoTheNamedRankComesFirst) {
  const Straggler s =
      FindStraggler({Rank("a", 70.0), Rank("b", 1.0), Rank("c", 90.0)});
  EXPECT_EQ(s.rank, 2);
  EXPECT_THAT(s.text, HasSubstr("(rank 1 -> rank 2 90.0 ms/MiB, rank 2 -> "
                                "rank 0 70.0 ms/MiB, against 1.0 ms/MiB"));
}

TEST(StragglerTest, OneSlowLinkNamesBothItsEnds) {
  const Straggler s = FindStraggler(
      {Rank("a on h1", 1.0), Rank("b on h2", 1.1), Rank("c on h3", 40.0),
       Rank("d on h4", 0.9)});
  EXPECT_EQ(s.rank, 2);
  EXPECT_EQ(s.cause, "link");
  // Not "rank 2": when the link out of rank 2 is measured slow too, the
  // verdict sharpens to its host, a new subject (a new event).
  EXPECT_EQ(s.subject, "the link into rank 2");
  EXPECT_THAT(s.text, HasSubstr("the ring link rank 1 -> rank 2 40.0 ms/MiB "
                                "(against 0.9 ms/MiB on the fastest link): "
                                "the network between rank 1 (b on h2) and "
                                "rank 2 (c on h3)"));
}

// In a world of two a slow host slows both links alike: no straggler (the
// job is slow, not one rank), unless one direction alone is slow.
TEST(StragglerTest, AWorldOfTwoCanOnlyNameAOneWaySlowLink) {
  EXPECT_EQ(FindStraggler({Rank("a", 80), Rank("b", 84)}).rank, -1);
  const Straggler s = FindStraggler({Rank("a", 80), Rank("b", 1)});
  EXPECT_EQ(s.rank, 0);
  EXPECT_THAT(s.text, HasSubstr("rank 1 -> rank 0 80.0 ms/MiB"));
}

// Small absolute differences are noise, whatever the ratio.
TEST(StragglerTest, FloorsKeepNoiseOut) {
  EXPECT_EQ(FindStraggler({Rank("a", 0.1), Rank("b", 0.1), Rank("c", 1.5)})
                .rank,
            -1);
  EXPECT_EQ(FindStraggler({Rank("a", 1, 2), Rank("b", 1, 15)}).rank, -1);
}

TEST(StragglerTest, ARankThatWorksSlowerIsNamed) {
  const Straggler s = FindStraggler(
      {Rank("a on h1", 1, 40), Rank("b on h2", 1, 130), Rank("c", 1, 42)});
  EXPECT_EQ(s.rank, 1);
  EXPECT_EQ(s.cause, "compute");
  EXPECT_EQ(s.text,
            "rank 1 (b on h2): its own work takes 130.0 ms a step against "
            "40.0 ms on the fastest rank: every other rank waits for it");
}

TEST(StragglerTest, TooLittleDataNamesNobody) {
  RankFigures quiet = Rank("a", 80);
  quiet.ring_bytes = 1000;  // under kMinLinkBytes
  quiet.steps = 1;          // under kMinSteps
  EXPECT_EQ(FindStraggler({quiet, Rank("b", 1), Rank("c", 1)}).rank, -1);
}

}  // namespace
}  // namespace lockstep
