// A small command-line flag parser for the pipeplan subcommands: each command declares the
// flags it knows; anything else is rejected. Accepts "--flag value", "--flag=value", boolean
// "--flag", one-letter aliases ("-o FILE") and "--" to end the flags. Every error it returns
// is a usage error (the caller exits with code 2).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pipeplan/model/status.h"

namespace pipeplan::app {

enum class FlagKind : uint8_t {
  kValue,  // takes one value: "--ranks 4" or "--ranks=4"
  kBool,   // present or absent: "--json"
};

struct FlagSpec {
  std::string_view name;  // without the leading "--"
  FlagKind kind = FlagKind::kValue;
  char short_name = '\0';  // optional one-letter alias ("-o")
};

class Flags {
 public:
  // Parses `args` (the words after the subcommand). Rejects unknown flags, a missing value,
  // a value given to a boolean flag and a flag given twice. "-h"/"--help" is always known.
  static StatusOr<Flags> Parse(const std::vector<std::string>& args,
                               const std::vector<FlagSpec>& specs);

  bool help() const { return help_; }
  bool Has(std::string_view name) const;
  bool GetBool(std::string_view name) const { return Has(name); }
  std::optional<std::string> GetString(std::string_view name) const;

  // Typed getters: nullopt when the flag is absent; an error when its value does not parse
  // or lies outside the stated range.
  StatusOr<std::optional<int>> GetInt(std::string_view name, int min_value) const;
  // Finite numbers >= 0 (durations, memory).
  StatusOr<std::optional<double>> GetNonNegativeDouble(std::string_view name) const;
  // Syntax only, for values checked later by whoever else may supply them typed.
  StatusOr<std::optional<int64_t>> GetInteger(std::string_view name) const;
  StatusOr<std::optional<double>> GetNumber(std::string_view name) const;  // finite

  // The same, for flags the command cannot do without ("missing required flag --ranks").
  StatusOr<int> RequireInt(std::string_view name, int min_value) const;
  StatusOr<std::string> RequireString(std::string_view name) const;

  // Words that are not flags, in order.
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  std::map<std::string, std::string, std::less<>> values_;  // bool flags map to ""
  std::vector<std::string> positional_;
  bool help_ = false;
};

// Checks the number of positional arguments; `what` names them ("a plan file").
Status ExpectPositional(const Flags& flags, size_t count, std::string_view what);

}  // namespace pipeplan::app
