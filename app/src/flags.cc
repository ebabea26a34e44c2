#include "pipeplan/app/flags.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <system_error>

namespace pipeplan::app {
namespace {

std::string Dashed(std::string_view name) { return "--" + std::string(name); }

const FlagSpec* FindLong(const std::vector<FlagSpec>& specs, std::string_view name) {
  for (const FlagSpec& spec : specs) {
    if (spec.name == name) return &spec;
  }
  return nullptr;
}

const FlagSpec* FindShort(const std::vector<FlagSpec>& specs, char letter) {
  for (const FlagSpec& spec : specs) {
    if (spec.short_name != '\0' && spec.short_name == letter) return &spec;
  }
  return nullptr;
}

}  // namespace

StatusOr<Flags> Flags::Parse(const std::vector<std::string>& args,
                             const std::vector<FlagSpec>& specs) {
  Flags flags;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& word = args[i];
    if (word == "--") {
      flags.positional_.insert(flags.positional_.end(), args.begin() + static_cast<long>(i) + 1,
                               args.end());
      break;
    }
    if (word == "-h" || word == "--help") {
      flags.help_ = true;
      continue;
    }
    const bool is_long = word.size() > 2 && word.starts_with("--");
    const bool is_short = !is_long && word.size() == 2 && word[0] == '-' &&
                          std::isalpha(static_cast<unsigned char>(word[1]));
    if (!is_long && !is_short) {
      if (word.size() > 1 && word[0] == '-' && !std::isdigit(static_cast<unsigned char>(word[1])) &&
          word[1] != '.') {
        return InvalidArgument("unknown flag '" + word + "'");
      }
      flags.positional_.push_back(word);  // also "-" and negative numbers
      continue;
    }

    std::optional<std::string> inline_value;
    const FlagSpec* spec = nullptr;
    if (is_long) {
      std::string_view name = std::string_view(word).substr(2);
      if (const size_t eq = name.find('='); eq != std::string_view::npos) {
        inline_value = std::string(name.substr(eq + 1));
        name = name.substr(0, eq);
      }
      spec = FindLong(specs, name);
      if (spec == nullptr) return InvalidArgument("unknown flag '--" + std::string(name) + "'");
    } else {
      spec = FindShort(specs, word[1]);
      if (spec == nullptr) return InvalidArgument("unknown flag '" + word + "'");
    }

    const std::string key(spec->name);
    if (flags.values_.contains(key)) {
      return InvalidArgument(Dashed(key) + " given more than once");
    }
    switch (spec->kind) {
      case FlagKind::kBool:
        if (inline_value.has_value()) return InvalidArgument(Dashed(key) + " takes no value");
        flags.values_[key] = "";
        break;
      case FlagKind::kValue:
        if (inline_value.has_value()) {
          flags.values_[key] = *inline_value;
        } else if (i + 1 < args.size() && !args[i + 1].starts_with("--")) {
          flags.values_[key] = args[++i];
        } else {
          return InvalidArgument("missing value for " + Dashed(key));
        }
        break;
    }
  }
  return flags;
}

bool Flags::Has(std::string_view name) const { return values_.find(name) != values_.end(); }

std::optional<std::string> Flags::GetString(std::string_view name) const {
  const auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

StatusOr<std::optional<int64_t>> Flags::GetInteger(std::string_view name) const {
  const std::optional<std::string> text = GetString(name);
  if (!text.has_value()) return std::optional<int64_t>();
  int64_t value = 0;
  const char* begin = text->data();
  const char* end = begin + text->size();
  const auto [ptr, ec] = std::from_chars(begin, end, value);
  if (ec == std::errc::result_out_of_range) {
    return InvalidArgument(Dashed(name) + ": integer out of range: '" + *text + "'");
  }
  if (ec != std::errc() || ptr != end || text->empty()) {
    return InvalidArgument(Dashed(name) + ": expected an integer, got '" + *text + "'");
  }
  return std::optional<int64_t>(value);
}

StatusOr<std::optional<int>> Flags::GetInt(std::string_view name, int min_value) const {
  PIPEPLAN_ASSIGN_OR_RETURN(const std::optional<int64_t> value, GetInteger(name));
  if (!value.has_value()) return std::optional<int>();
  if (*value < std::numeric_limits<int>::min() || *value > std::numeric_limits<int>::max()) {
    return InvalidArgument(Dashed(name) + ": integer out of range: '" + *GetString(name) + "'");
  }
  if (*value < min_value) {
    return InvalidArgument(Dashed(name) + " must be >= " + std::to_string(min_value) + ", got " +
                           *GetString(name));
  }
  return std::optional<int>(static_cast<int>(*value));
}

StatusOr<std::optional<double>> Flags::GetNumber(std::string_view name) const {
  const std::optional<std::string> text = GetString(name);
  if (!text.has_value()) return std::optional<double>();
  double value = 0;
  const char* begin = text->data();
  const char* end = begin + text->size();
  // A leading '+' is accepted by strtod but not by from_chars; allow it for convenience.
  if (begin != end && *begin == '+') ++begin;
  const auto [ptr, ec] = std::from_chars(begin, end, value);
  if (ec != std::errc() || ptr != end || text->empty() || !std::isfinite(value)) {
    return InvalidArgument(Dashed(name) + ": expected a number, got '" + *text + "'");
  }
  return std::optional<double>(value);
}

StatusOr<std::optional<double>> Flags::GetNonNegativeDouble(std::string_view name) const {
  PIPEPLAN_ASSIGN_OR_RETURN(const std::optional<double> value, GetNumber(name));
  if (value.has_value() && *value < 0) {
    return InvalidArgument(Dashed(name) + " must be >= 0, got " + *GetString(name));
  }
  return value;
}

StatusOr<int> Flags::RequireInt(std::string_view name, int min_value) const {
  PIPEPLAN_ASSIGN_OR_RETURN(const std::optional<int> value, GetInt(name, min_value));
  if (!value.has_value()) return InvalidArgument("missing required flag " + Dashed(name));
  return *value;
}

StatusOr<std::string> Flags::RequireString(std::string_view name) const {
  std::optional<std::string> value = GetString(name);
  if (!value.has_value()) return InvalidArgument("missing required flag " + Dashed(name));
  return *std::move(value);
}

Status ExpectPositional(const Flags& flags, size_t count, std::string_view what) {
  const size_t given = flags.positional().size();
  if (given < count) return InvalidArgument("missing " + std::string(what));
  if (given > count) {
    return InvalidArgument("unexpected argument '" + flags.positional()[count] + "'");
  }
  return Status::Ok();
}

}  // namespace pipeplan::app
