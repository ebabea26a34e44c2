#include "pipeplan/app/dispatch.h"

#include <algorithm>
#include <iostream>

#include "pipeplan/app/command.h"
#include "pipeplan/model/status.h"

namespace pipeplan::app {
namespace {

std::string_view program_name = "pipeplan";

void PrintUsage(const Program& program, std::ostream& out) {
  size_t width = 0;
  for (const Subcommand& command : program.commands) {
    width = std::max(width, command.name.size());
  }
  out << "usage: " << program.name << " <command> [options]\n\n"
      << program.about << "\nCommands:\n";
  for (const Subcommand& command : program.commands) {
    out << "  " << command.name << std::string(width + 1 - command.name.size(), ' ')
        << command.summary << "\n";
  }
  out << "\nRun '" << program.name << " <command> --help' for the options of a command.\n"
      << program.epilogue;
}

// "a, b or c"
std::string CommandList(const Program& program) {
  std::string out;
  for (size_t i = 0; i < program.commands.size(); ++i) {
    if (i > 0) out += i + 1 == program.commands.size() ? " or " : ", ";
    out += program.commands[i].name;
  }
  return out;
}

const Subcommand* Find(const Program& program, std::string_view name) {
  for (const Subcommand& command : program.commands) {
    if (command.name == name) return &command;
  }
  return nullptr;
}

}  // namespace

std::string_view ProgramName() { return program_name; }

int Dispatch(const Program& program, const std::vector<std::string>& words) {
  program_name = program.name;
  if (words.empty()) {
    std::cerr << program.name << ": error: missing command\n";
    PrintUsage(program, std::cerr);
    return kExitUsage;
  }
  const std::string& first = words.front();
  if (first == "-h" || first == "--help" || first == "help") {
    if (first == "help" && words.size() > 1) {
      if (const Subcommand* command = Find(program, words[1])) return command->run({"--help"});
    }
    PrintUsage(program, std::cout);
    const Status flushed = FlushStandardOutput();
    return flushed.ok() ? kExitOk : ReportInputError("", flushed);
  }
  if (!program.version.empty() && (first == "--version" || first == "version")) {
    std::cout << program.name << " " << program.version << "\n";
    const Status flushed = FlushStandardOutput();
    return flushed.ok() ? kExitOk : ReportInputError("", flushed);
  }
  if (const Subcommand* command = Find(program, first)) {
    return command->run({words.begin() + 1, words.end()});
  }
  const std::string what = first.starts_with("-") ? "unknown option '" : "unknown command '";
  return ReportUsageError(
      "", InvalidArgument(what + first + "' (expected " + CommandList(program) + ")"));
}

}  // namespace pipeplan::app
