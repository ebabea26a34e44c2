// The request flags' mapping of the planner's field names to the flags a user typed.
#include "pipeplan/app/request_flags.h"

#include <string>

#include "gtest/gtest.h"

namespace pipeplan::app {
namespace {

RequestFlags FromFlags() { return RequestFlags{}; }

RequestFlags FromFile() {
  RequestFlags flags;
  flags.request_file = "request.json";
  return flags;
}

TEST(InFlagTerms, NamesTheFlagsOfARequestGivenAsFlags) {
  EXPECT_EQ(InFlagTerms("zbv supports topology.stages_per_rank <= 2, got 3", FromFlags()),
            "zbv supports --stages-per-rank <= 2, got 3");
  EXPECT_EQ(InFlagTerms("options.post_validation and options.microbatch_group_size", FromFlags()),
            "--post-validation and --microbatch-group-size");
  EXPECT_EQ(InFlagTerms("no order in 5 s (raise time_limit_s)", FromFlags()),
            "no order in 5 s (raise --time-limit)");
  // At the end of a sentence too.
  EXPECT_EQ(InFlagTerms("check memory.limit.", FromFlags()), "check --memory-limit.");
}

TEST(InFlagTerms, KeepsTheFieldsOfARequestFile) {
  const std::string message = "zbv supports topology.stages_per_rank <= 2, got 3";
  EXPECT_EQ(InFlagTerms(message, FromFile()), message);
}

TEST(InFlagTerms, ReplacesWholeNamesOnly) {
  // A longer path, a longer field and a field of another message stay as they are.
  for (const std::string message :
       {"2 rank programs (request.topology.ranks), got 3", "topology.ranks_total is 4",
        "memory.limit_bytes", "old_time_limit_s"}) {
    EXPECT_EQ(InFlagTerms(message, FromFlags()), message);
  }
}

TEST(InFlagTerms, KeepsTheStatusCode) {
  const Status mapped = InFlagTerms(DeadlineExceeded("raise time_limit_s"), FromFlags());
  EXPECT_EQ(mapped.code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(mapped.message(), "raise --time-limit");
  EXPECT_TRUE(InFlagTerms(Status::Ok(), FromFlags()).ok());
}

}  // namespace
}  // namespace pipeplan::app
