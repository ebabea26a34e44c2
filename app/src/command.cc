#include "pipeplan/app/command.h"

#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>

#include "pipeplan/app/dispatch.h"
#include "pipeplan/app/format.h"
#include "pipeplan/planner/plannable.h"
#include "pipeplan/planner/planner.h"
#include "pipeplan/strategies/strategy.h"

namespace pipeplan::app {
namespace {

// "pipeplan plan", or the program alone.
std::string Prefix(std::string_view command) {
  std::string prefix(ProgramName());
  return command.empty() ? prefix : prefix + " " + std::string(command);
}

// "2", ">=1" or "1..2" (max 0: no upper bound).
std::string StagesRange(int min, int max) {
  std::string range = std::to_string(min);
  if (max == 0) return ">=" + range;
  if (max != min) range += ".." + std::to_string(max);
  return range;
}

// "  name  V  summary" for every strategy in catalogue order, the solver-made ones, then auto.
std::string StrategyTable() {
  TextTable table({"  name", "V", "summary"}, {true, true, true});
  for (const PlannableStrategy& strategy : PlannableStrategies()) {
    table.AddRow({"  " + std::string(strategy.name),
                  StagesRange(strategy.min_stages_per_rank, strategy.max_stages_per_rank),
                  std::string(strategy.summary)});
  }
  table.AddRow({"  " + std::string(kAutoStrategy), "any",
                "search: the fastest plan of the above that fits --memory-limit"});
  std::string text = table.Render();
  if (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

}  // namespace

int ReportUsageError(std::string_view command, const Status& status) {
  std::cerr << Prefix(command) << ": error: " << status.message() << "\n"
            << "run '" << Prefix(command) << " --help' for usage\n";
  return kExitUsage;
}

int ReportInputError(std::string_view command, const Status& status) {
  std::cerr << Prefix(command) << ": error: " << status.message() << "\n";
  return kExitInvalidInput;
}

void PrintNote(std::string_view message) { std::cerr << "note: " << message << "\n"; }

namespace {

// Whether standard output is a pipe whose reader has gone (poll reports an error on its
// write end), whenever the write that found out failed.
bool ReaderLeft() {
  struct stat info = {};
  if (::fstat(STDOUT_FILENO, &info) != 0 || !S_ISFIFO(info.st_mode)) return false;
  pollfd out = {.fd = STDOUT_FILENO, .events = 0, .revents = 0};
  return ::poll(&out, 1, 0) == 1 && (out.revents & POLLERR) != 0;
}

}  // namespace

Status FlushStandardOutput() {
  errno = 0;
  std::cout.flush();
  const bool failed = std::fflush(stdout) != 0 || std::ferror(stdout) != 0 || !std::cout;
  const int error = errno;
  if (!failed || error == EPIPE || ReaderLeft()) return Status::Ok();
  return InvalidArgument(std::string("cannot write to standard output") +
                         (error != 0 ? std::string(": ") + std::strerror(error) : ""));
}

void IgnoreBrokenPipes() { std::signal(SIGPIPE, SIG_IGN); }

void WriteStderrByLines() {
  // std::cerr writes through stdio's stderr; without unitbuf a line reaches the pipe at its '\n'.
  std::setvbuf(stderr, nullptr, _IOLBF, BUFSIZ);
  std::cerr.unsetf(std::ios_base::unitbuf);
}

void PrintHelp(std::string_view help) {
  constexpr std::string_view kMarker = "@STRATEGIES@";
  const size_t at = help.find(kMarker);
  if (at == std::string_view::npos) {
    std::cout << help;
    return;
  }
  std::cout << help.substr(0, at) << StrategyTable() << help.substr(at + kMarker.size());
}

bool WantsHelp(const std::vector<std::string>& args) {
  for (const std::string& word : args) {
    if (word == "--") return false;
    if (word == "-h" || word == "--help") return true;
  }
  return false;
}

}  // namespace pipeplan::app
