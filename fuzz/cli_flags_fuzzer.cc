// Fuzz target: the command line of 'pipeplan plan' and 'pipeplan compare' (one word per input
// line): flag parsing, the request and cost flags, then, when they name no file, planning and
// simulating the request (bounded in size).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_support.h"
#include "pipeplan/app/flags.h"
#include "pipeplan/app/request_flags.h"

namespace {

using namespace pipeplan;

// One word per line; a final line break does not start another (empty) word.
std::vector<std::string> Words(std::string_view text) {
  std::vector<std::string> words;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    words.emplace_back(text.substr(0, end));
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return words;
}

// The flags 'pipeplan plan' declares (plan_command.cc); compare takes a subset of them.
std::vector<app::FlagSpec> PlanFlagSpecs() {
  std::vector<app::FlagSpec> specs = {
      {"strategy"}, {"request"}, {"output", app::FlagKind::kValue, 'o'}};
  for (const app::FlagSpec& spec : app::TopologyFlagSpecs()) specs.push_back(spec);
  for (const app::FlagSpec& spec : app::CostFlagSpecs()) specs.push_back(spec);
  return specs;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<app::FlagSpec> kSpecs = PlanFlagSpecs();
  const StatusOr<app::Flags> flags = app::Flags::Parse(Words(fuzz::AsText(data, size)), kSpecs);
  if (!flags.ok()) return 0;
  for (const app::StrategyFlag strategy :
       {app::StrategyFlag::kRequired, app::StrategyFlag::kNone}) {
    const StatusOr<app::RequestFlags> parsed = app::ParseRequestFlags(*flags, strategy);
    // Files are the other targets' inputs; a fuzz target reads none.
    if (!parsed.ok() || parsed->request_file || parsed->costs.costs_file) continue;
    const StatusOr<PlanRequest> request = app::LoadRequest(*parsed);
    // A limit in bytes needs a memory model in bytes, which only a cost file brings; nothing
    // else is left to fail without files.
    if (parsed->memory_limit_in_bytes) {
      PIPEPLAN_FUZZ_CHECK(!request.ok() && request.status().code() == StatusCode::kInvalidArgument);
      continue;
    }
    PIPEPLAN_FUZZ_CHECK_OK(request.status());
    if (strategy == app::StrategyFlag::kRequired) fuzz::PlanAndSimulate(*request);
  }
  return 0;
}
