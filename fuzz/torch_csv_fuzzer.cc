// Fuzz target: 'pipeplan import --format torch-csv|torch-csv-comms', PyTorch pipelining CSV
// schedules in either of torch's formats. An import that succeeds is planned (comm
// insertion, validation), simulated, exported back to torch's compute-only CSV, and that CSV
// must import to the same topology and order.
#include <cstddef>
#include <cstdint>
#include <optional>

#include "fuzz_support.h"
#include "pipeplan/formats/torch_csv.h"
#include "pipeplan/planner/planner.h"
#include "pipeplan/simulation/simulator.h"

namespace {

using namespace pipeplan;

void ImportPlanAndExport(std::string_view csv, TorchCsvFormat format,
                         std::optional<int> microbatches) {
  const StatusOr<TorchCsvImport> imported = ImportTorchCsv(csv, format, microbatches);
  // No size bound: the order holds every action, so planning it is in proportion to the input.
  if (!imported.ok()) return;
  PlanRequest request;
  request.topology = imported->topology;
  request.strategy = "imported";
  const StatusOr<Plan> plan = BuildPlanFromOrder(request, imported->order);
  if (!plan.ok()) return;
  PIPEPLAN_FUZZ_CHECK_OK(Simulate(*plan).status());

  // An imported order is never dual-placed, so torch's grammar expresses it.
  const StatusOr<TorchCsvExport> exported = ExportTorchCsv(*plan, TorchCsvFormat::kComputeOnly);
  PIPEPLAN_FUZZ_CHECK_OK(exported.status());
  const StatusOr<TorchCsvImport> again =
      ImportTorchCsv(exported->csv, TorchCsvFormat::kComputeOnly, imported->topology.microbatches);
  PIPEPLAN_FUZZ_CHECK_OK(again.status());
  PIPEPLAN_FUZZ_CHECK(again->topology == imported->topology);
  PIPEPLAN_FUZZ_CHECK(again->order == imported->order);
  (void)ExportTorchCsv(*plan, TorchCsvFormat::kComputeComms);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view csv = fuzz::AsText(data, size);
  for (const TorchCsvFormat format :
       {TorchCsvFormat::kComputeOnly, TorchCsvFormat::kComputeComms}) {
    ImportPlanAndExport(csv, format, std::nullopt);  // microbatches from the largest id
    ImportPlanAndExport(csv, format, 4);             // as with --microbatches 4
  }
  return 0;
}
