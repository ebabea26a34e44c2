// A program of subcommands (pipeplan, pipeplan-torch): the first word names the command, which
// runs with the rest. What every such program answers alike is answered here: -h, --help and
// `help [COMMAND]`, --version, and a missing or unknown command (exit 2, naming every command
// there is). Errors of the program and its commands are reported under its name
// (ReportUsageError, ReportInputError).
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace pipeplan::app {

struct Subcommand {
  std::string_view name;
  std::string_view summary;  // one line, for the program's --help
  int (*run)(const std::vector<std::string>& args);
};

struct Program {
  std::string_view name;   // "pipeplan"
  std::string_view about;  // what the program does, printed under its usage line
  std::span<const Subcommand> commands;
  std::string_view epilogue;  // printed after the commands (exit codes, examples)
  std::string_view version;   // `NAME --version` prints "NAME VERSION"; empty: no such flag
};

// Runs the command `words` name; returns the exit code. Sets ProgramName().
int Dispatch(const Program& program, const std::vector<std::string>& words);

// The running program's name ("pipeplan" until Dispatch sets another).
std::string_view ProgramName();

}  // namespace pipeplan::app
