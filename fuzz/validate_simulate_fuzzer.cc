// Fuzz target: the validator and the simulator on parsed plans, as 'pipeplan simulate' runs
// them (format from the content, as for a file with another extension). ValidateStructure is
// documented as enough to simulate safely, so the simulator also runs on plans that pass it
// but fail the dry run; a plan that passes ValidatePlan and whose cost and memory models fit
// its stages must simulate without error. The model of torch's runtime runs on the same plans:
// it may refuse one (a hang, a dual placement), never crash.
#include <cstddef>
#include <cstdint>

#include "fuzz_support.h"
#include "pipeplan/checks/validator.h"
#include "pipeplan/formats/proto_io.h"
#include "pipeplan/formats/torch_csv.h"
#include "pipeplan/model/cost_model.h"
#include "pipeplan/model/memory_model.h"
#include "pipeplan/reports/chrome_trace.h"
#include "pipeplan/simulation/simulator.h"
#include "pipeplan/simulation/torch_runtime.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pipeplan;
  const std::string_view text = fuzz::AsText(data, size);
  const StatusOr<Plan> plan = ParsePlan(text, DetectProtoFormat("", text));
  if (!plan.ok() || !ValidateStructure(*plan).ok()) return 0;
  const StatusOr<Timeline> timeline = Simulate(*plan);
  for (const TorchLists lists : {TorchLists::kPlanTransfers, TorchLists::kTorchLowering}) {
    (void)SimulateOnTorchRuntime(*plan, lists, plan->request.costs, plan->request.memory);
  }
  const int stages = plan->request.topology.num_stages();
  if (!ValidatePlan(*plan).ok() || !ValidateCostModel(plan->request.costs, stages).ok() ||
      !ValidateMemoryModel(plan->request.memory, stages).ok() ||
      !ValidateStaticByRank(plan->request.memory, plan->request.topology.ranks).ok()) {
    return 0;
  }
  PIPEPLAN_FUZZ_CHECK(timeline.ok());
  // What 'simulate' and 'export' go on to write from a valid plan.
  (void)ExportChromeTrace(*plan, *timeline);
  (void)ExportTorchCsv(*plan, TorchCsvFormat::kComputeComms);
  return 0;
}
