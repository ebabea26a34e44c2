// The Python entry point: registers torch.ops.pipeplan.plan with the dispatcher, so a training
// script plans without any Python dependency beyond torch:
//
//   torch.ops.load_library("<build>/torch_ext/libpipeplan_torch_ops.so")
//   actions, metrics_json, notes = torch.ops.pipeplan.plan("zbv", 4, 8, forward=1.0)
//
// The only LibTorch translation unit of the library (each costs ~30 s to compile); the work
// is in plan_op.cc.
#include <torch/library.h>

#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "pipeplan/torch_ext/plan_op.h"

namespace pipeplan::torch_ext {
namespace {

using PlanOpOutput =
    std::tuple<std::vector<std::vector<std::string>>, std::string, std::vector<std::string>>;

// The schema's argument order; torch checks the types against it when the library loads.
// The dispatcher passes a schema's str by value.
// NOLINTBEGIN(performance-unnecessary-value-param)
PlanOpOutput Plan(std::string strategy, int64_t ranks, int64_t microbatches,
                  std::optional<int64_t> stages_per_rank,
                  std::optional<int64_t> microbatch_group_size, std::optional<double> forward,
                  std::optional<double> backward, std::optional<double> backward_input,
                  std::optional<double> backward_weight, std::optional<double> overlap,
                  std::optional<double> comm, std::optional<double> receive_overhead,
                  std::optional<std::string> costs_file, std::optional<double> memory_limit,
                  bool post_validation, std::string format, std::string runtime) {
  // NOLINTEND(performance-unnecessary-value-param)
  const StatusOr<TorchCsvFormat> csv_format = ParseTorchCsvFormat(format);
  TORCH_CHECK(csv_format.ok(), "pipeplan::plan: ", csv_format.status().message());
  const PlanOpRequest request = {.strategy = std::move(strategy),
                                 .ranks = ranks,
                                 .microbatches = microbatches,
                                 .stages_per_rank = stages_per_rank,
                                 .microbatch_group_size = microbatch_group_size,
                                 .forward = forward,
                                 .backward = backward,
                                 .backward_input = backward_input,
                                 .backward_weight = backward_weight,
                                 .overlap = overlap,
                                 .comm = comm,
                                 .receive_overhead = receive_overhead,
                                 .costs_file = std::move(costs_file),
                                 .memory_limit = memory_limit,
                                 .post_validation = post_validation,
                                 .runtime = std::move(runtime),
                                 .format = *csv_format};
  StatusOr<PlanOpResult> result = RunPlanOp(request);
  // Raised in Python as RuntimeError with this message.
  TORCH_CHECK(result.ok(), "pipeplan::plan: ", result.status().message());
  return {std::move(result->actions), std::move(result->metrics_json), std::move(result->notes)};
}

}  // namespace
}  // namespace pipeplan::torch_ext

TORCH_LIBRARY(pipeplan, m) {
  m.def(
      "plan(str strategy, int ranks, int microbatches, *, int? stages_per_rank=None, "
      "int? microbatch_group_size=None, float? forward=None, float? backward=None, "
      "float? backward_input=None, float? backward_weight=None, float? overlap=None, "
      "float? comm=None, float? receive_overhead=None, str? costs_file=None, "
      "float? memory_limit=None, "
      "bool post_validation=False, str format=\"torch-csv\", str runtime=\"torch\") "
      "-> (str[][] actions, str metrics_json, str[] notes)",
      &pipeplan::torch_ext::Plan);
}
