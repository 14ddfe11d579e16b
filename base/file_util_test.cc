// Path helpers: AbsolutePath joins a relative path to the working folder,
// JoinPath and Dirname as the job paths use them.
#include "base/file_util.h"

#include <unistd.h>

#include <string>

#include "gtest/gtest.h"

namespace lockstep {
namespace {

TEST(FileUtilTest, AbsolutePathJoinsTheWorkingFolder) {
  char buf[4096];
  ASSERT_NE(getcwd(buf, sizeof(buf)), nullptr);
  const std::string cwd(buf);
  EXPECT_EQ(*AbsolutePath("/data/x"), "/data/x");
  EXPECT_EQ(*AbsolutePath("d/job.json"), cwd + "/d/job.json");
  EXPECT_EQ(*AbsolutePath("./d"), cwd + "/d");
  EXPECT_EQ(*AbsolutePath("././d"), cwd + "/d");
  // Separators after a leading "." are not a root.
  EXPECT_EQ(*AbsolutePath(".//d"), cwd + "/d");
  EXPECT_EQ(*AbsolutePath("././/d"), cwd + "/d");
  EXPECT_EQ(*AbsolutePath("."), cwd);
  EXPECT_EQ(*AbsolutePath("./"), cwd);
  EXPECT_EQ(*AbsolutePath("../up"), cwd + "/../up");
}

TEST(FileUtilTest, JoinPathAndDirname) {
  EXPECT_EQ(JoinPath("a", "b"), "a/b");
  EXPECT_EQ(JoinPath("a/", "b"), "a/b");
  EXPECT_EQ(JoinPath("a", "/b"), "/b");
  EXPECT_EQ(JoinPath("", "b"), "b");
  EXPECT_EQ(Dirname("a/b/c"), "a/b");
  EXPECT_EQ(Dirname("c"), ".");
  EXPECT_EQ(Dirname("/c"), "/");
}

}  // namespace
}  // namespace lockstep
