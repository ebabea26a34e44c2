// How a command of pipeplan or pipeplan-torch parses its flags, runs, and reports errors. Exit
// codes: 0 success, 1 invalid input (any Status from the library or a file), 2 usage error (the
// command line itself is wrong).
#pragma once

#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "pipeplan/app/flags.h"
#include "pipeplan/model/status.h"

namespace pipeplan::app {

inline constexpr int kExitOk = 0;
inline constexpr int kExitInvalidInput = 1;
inline constexpr int kExitUsage = 2;

// Prints "pipeplan <command>: error: <message>" and a pointer to --help; returns 2.
int ReportUsageError(std::string_view command, const Status& status);
// Prints "pipeplan <command>: error: <message>"; returns 1.
int ReportInputError(std::string_view command, const Status& status);
// Prints "note: <message>" to stderr.
void PrintNote(std::string_view message);

// Makes std::cerr write whole lines: processes that share one stderr (the ranks a launcher
// starts) then never interleave inside a line, as pipe writes up to 4 KiB are atomic. Call first
// in main.
void WriteStderrByLines();

// Flushes standard output: it is buffered, so a full disk or a closed descriptor shows only
// here. An error names standard output and the system's reason; a reader that closed the pipe
// early (`| head`) has what it wanted, so EPIPE is no error.
Status FlushStandardOutput();

// A process that talks to peers over sockets must not die of SIGPIPE when a peer is gone: with
// it ignored, the write fails with EPIPE and the caller reports which peer. Call first in main.
void IgnoreBrokenPipes();

// Whether the words contain -h/--help before any "--".
bool WantsHelp(const std::vector<std::string>& args);

// One subcommand: its flags, its help text, and two phases. `parse` turns the flags into the
// command's options and may only fail with usage errors (exit 2); `execute` does the work and
// any error it returns is an input error (exit 1).
template <typename Options>
struct CommandSpec {
  std::string_view name;
  std::string_view help;
  std::vector<FlagSpec> flags;
  StatusOr<Options> (*parse)(const Flags& flags);
  Status (*execute)(const Options& options);
};

// Prints a help text to stdout, with "@STRATEGIES@" replaced by the catalogue (one line per
// strategy: name, V range, summary; then auto).
void PrintHelp(std::string_view help);

template <typename Options>
int RunCommand(const CommandSpec<Options>& spec, const std::vector<std::string>& args) {
  if (WantsHelp(args)) {
    PrintHelp(spec.help);
    const Status flushed = FlushStandardOutput();
    return flushed.ok() ? kExitOk : ReportInputError(spec.name, flushed);
  }
  StatusOr<Flags> flags = Flags::Parse(args, spec.flags);
  if (!flags.ok()) return ReportUsageError(spec.name, flags.status());
  StatusOr<Options> options = spec.parse(*flags);
  if (!options.ok()) return ReportUsageError(spec.name, options.status());
  const Status status = spec.execute(*options);
  if (!status.ok()) return ReportInputError(spec.name, status);
  if (const Status flushed = FlushStandardOutput(); !flushed.ok()) {
    return ReportInputError(spec.name, flushed);
  }
  return kExitOk;
}

}  // namespace pipeplan::app
