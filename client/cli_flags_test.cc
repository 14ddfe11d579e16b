// Flag parsing: values, booleans, positionals and the errors for typos.
#include "client/cli_flags.h"

#include "gtest/gtest.h"

namespace lockstep {
namespace {

TEST(CliFlagsTest, ParsesValuesBooleansAndPositionals) {
  auto f =
      ParseFlags({"job.json", "--storage", "/s", "--threads=2", "--no-resume"},
                 {"storage", "threads"}, {"no-resume"});
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->positional, std::vector<std::string>{"job.json"});
  EXPECT_EQ(f->Get("storage", ""), "/s");
  EXPECT_EQ(*f->GetInt("threads", 0), 2);
  EXPECT_TRUE(f->Has("no-resume"));
  EXPECT_EQ(*f->GetInt("missing", 7), 7);
}

TEST(CliFlagsTest, ErrorsNameTheFlag) {
  EXPECT_EQ(ParseFlags({"--storag", "x"}, {"storage", "data-dir"}, {"help"})
                .status()
                .message(),
            "unknown flag --storag (this command takes --data-dir, --help, "
            "--storage)");
  EXPECT_EQ(ParseFlags({"--x"}, {}, {}).status().message(),
            "unknown flag --x (this command takes no flags)");
  EXPECT_EQ(ParseFlags({"--storage"}, {"storage"}, {}).status().message(),
            "--storage needs a value");
  EXPECT_EQ(ParseFlags({"--no-resume=1"}, {}, {"no-resume"}).status().message(),
            "--no-resume takes no value");
  auto f = ParseFlags({"--threads", "two"}, {"threads"}, {});
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->GetInt("threads", 0).status().message(),
            "--threads: expected an integer, got \"two\"");
}

}  // namespace
}  // namespace lockstep
