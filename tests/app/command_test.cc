// The process-wide pieces of a command: its standard output's errors and broken pipes.
#include "pipeplan/app/command.h"

#include <unistd.h>

#include <cerrno>
#include <csignal>

#include "gtest/gtest.h"

namespace pipeplan::app {
namespace {

// A rank writing to a peer that is gone gets EPIPE to report, not SIGPIPE to die of.
TEST(IgnoreBrokenPipes, AWriteToAClosedPipeFailsWithEpipe) {
  IgnoreBrokenPipes();
  int ends[2];
  ASSERT_EQ(::pipe(ends), 0);
  ::close(ends[0]);
  errno = 0;
  EXPECT_EQ(::write(ends[1], "x", 1), -1);
  EXPECT_EQ(errno, EPIPE);
  ::close(ends[1]);
  EXPECT_EQ(std::signal(SIGPIPE, SIG_DFL), SIG_IGN);
}

}  // namespace
}  // namespace pipeplan::app
