// Writes a plan in torch.distributed.pipelining's CSV form, byte for byte what its _dump_csv
// (csv.writer, default dialect) would write: one row per rank, cells joined by ',', rows ended
// by "\r\n". Our tokens never contain ',', '"' or a line break, so no cell needs quoting.
#include "pipeplan/formats/torch_csv.h"

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pipeplan/model/topology.h"

namespace pipeplan {
namespace {

constexpr std::string_view kRowEnd = "\r\n";  // csv.writer's default lineterminator

// What torch's grammar cannot express and was dropped; one note per kind.
struct LeftOut {
  bool post_validation = false;
  bool send_post_validation = false;
  bool recv_post_validation = false;
  bool rollback = false;
};

std::vector<std::string> Notes(const LeftOut& left_out) {
  std::vector<std::string> notes;
  const auto no_such_action = [&notes](std::string_view what) {
    notes.push_back(std::string(what) + " left out: torch's CSV grammar has no such action");
  };
  if (left_out.post_validation) no_such_action("post-validation actions");
  if (left_out.send_post_validation) no_such_action("SEND_PV actions");
  if (left_out.recv_post_validation) no_such_action("RECV_PV actions");
  if (left_out.rollback) {
    notes.emplace_back(
        "rollback flags left out: torch's CSV grammar cannot mark a RECV_F for rollback");
  }
  return notes;
}

// The stage whose gradient `action` completes for one microbatch (B, or W of an I/W split,
// possibly as the backward half of an overlap cell); torch reduces a stage's gradients after
// the last of these.
std::optional<StageId> GradientStage(const Action& action) {
  switch (action.kind) {
    case ActionKind::kBackward:
    case ActionKind::kBackwardWeight:
      return action.stage;
    case ActionKind::kOverlapFB:
      for (const Action& sub : action.sub_actions) {
        if (const std::optional<StageId> stage = GradientStage(sub)) return stage;
      }
      return std::nullopt;
    case ActionKind::kForward:
    case ActionKind::kBackwardInput:
    case ActionKind::kSendForward:
    case ActionKind::kRecvForward:
    case ActionKind::kSendBackward:
    case ActionKind::kRecvBackward:
    case ActionKind::kPostValidation:
    case ActionKind::kSendPostValidation:
    case ActionKind::kRecvPostValidation:
      return std::nullopt;
  }
  return std::nullopt;
}

// For each action index, the stage whose REDUCE_GRAD follows it, if any.
std::vector<std::optional<StageId>> ReduceGradAfter(const std::vector<Action>& actions) {
  std::map<StageId, size_t> last_backward;
  for (size_t i = 0; i < actions.size(); ++i) {
    if (const std::optional<StageId> stage = GradientStage(actions[i])) last_backward[*stage] = i;
  }
  std::vector<std::optional<StageId>> reduce_after(actions.size());
  for (const auto& [stage, index] : last_backward) reduce_after[index] = stage;
  return reduce_after;
}

std::vector<std::string> ComputeOnlyCells(const RankProgram& program, LeftOut* left_out) {
  std::vector<std::string> cells;
  for (const Action& action : program.actions) {
    if (IsCompute(action.kind)) {
      cells.push_back(ToString(action));
    } else if (action.kind == ActionKind::kPostValidation) {
      left_out->post_validation = true;
    }
  }
  return cells;
}

std::vector<std::string> ComputeCommsCells(const RankProgram& program, LeftOut* left_out) {
  const std::vector<std::optional<StageId>> reduce_after = ReduceGradAfter(program.actions);
  std::vector<std::string> cells;
  for (size_t i = 0; i < program.actions.size(); ++i) {
    const Action& action = program.actions[i];
    switch (action.kind) {
      case ActionKind::kPostValidation:
        left_out->post_validation = true;
        continue;
      case ActionKind::kSendPostValidation:
        left_out->send_post_validation = true;
        continue;
      case ActionKind::kRecvPostValidation:
        left_out->recv_post_validation = true;
        continue;
      case ActionKind::kRecvForward:
        left_out->rollback = left_out->rollback || action.rollback;
        break;
      case ActionKind::kForward:
      case ActionKind::kBackward:
      case ActionKind::kBackwardInput:
      case ActionKind::kBackwardWeight:
      case ActionKind::kOverlapFB:
      case ActionKind::kSendForward:
      case ActionKind::kSendBackward:
      case ActionKind::kRecvBackward:
        break;
    }
    cells.push_back(ToString(action));
    if (reduce_after[i].has_value()) {
      cells.push_back(std::to_string(reduce_after[i]->value) + "REDUCE_GRAD");
    }
  }
  return cells;
}

void AppendRow(const std::vector<std::string>& cells, std::string* csv) {
  for (size_t i = 0; i < cells.size(); ++i) {
    if (i > 0) *csv += ',';
    *csv += cells[i];
  }
  *csv += kRowEnd;
}

// Copy B's microbatches of a dual-placement plan renumbered as the batch's
// (StageMap::BatchMicrobatchOf); every other action keeps its number.
void NumberByBatch(const StageMap& stages, Action* action) {
  action->microbatch = MicrobatchId{stages.BatchMicrobatchOf(action->stage, action->microbatch)};
  for (Action& sub : action->sub_actions) NumberByBatch(stages, &sub);
}

// Every rank's cells, in rank order; what the grammar cannot express goes to `left_out`.
std::vector<std::vector<std::string>> Cells(const Plan& plan, TorchCsvFormat format,
                                            LeftOut* left_out) {
  std::vector<std::vector<std::string>> rows;
  for (const RankProgram& program : plan.programs) {
    switch (format) {
      case TorchCsvFormat::kComputeOnly:
        rows.push_back(ComputeOnlyCells(program, left_out));
        break;
      case TorchCsvFormat::kComputeComms:
        rows.push_back(ComputeCommsCells(program, left_out));
        break;
    }
  }
  return rows;
}

}  // namespace

StatusOr<TorchCsvExport> ExportTorchCsv(const Plan& plan, TorchCsvFormat format) {
  if (plan.request.topology.placement == Placement::kDual) {
    return FailedPrecondition(
        "torch's CSV cannot express a dual-placement plan (" + plan.request.strategy +
        "): rank r runs stage r of one model copy and stage P-1-r of another, but torch's "
        "grammar has one model copy per stage index and would read a different schedule; "
        "dualpipe-v, the single-copy V-shape variant, can be exported (torch runs it as "
        "ScheduleDualPipeV), and pipeplan.torch.schedule runs a dualpipe plan in Python");
  }
  TorchCsvExport out;
  LeftOut left_out;
  for (const std::vector<std::string>& cells : Cells(plan, format, &left_out)) {
    AppendRow(cells, &out.csv);
  }
  out.notes = Notes(left_out);
  return out;
}

std::vector<std::vector<std::string>> TorchActionRows(const Plan& plan, TorchCsvFormat format) {
  LeftOut left_out;
  if (plan.request.topology.placement != Placement::kDual) {
    return Cells(plan, format, &left_out);
  }
  const StageMap stages(plan.request.topology);
  Plan by_batch = plan;
  for (RankProgram& program : by_batch.programs) {
    for (Action& action : program.actions) NumberByBatch(stages, &action);
  }
  return Cells(by_batch, format, &left_out);
}

std::vector<std::vector<std::string>> TorchCsvRows(std::string_view csv) {
  std::vector<std::vector<std::string>> rows;
  while (!csv.empty()) {
    const size_t end = csv.find(kRowEnd);
    std::string_view row = csv.substr(0, end);
    std::vector<std::string>& cells = rows.emplace_back();
    while (!row.empty()) {
      const size_t comma = row.find(',');
      cells.emplace_back(row.substr(0, comma));
      row.remove_prefix(comma == std::string_view::npos ? row.size() : comma + 1);
    }
    csv.remove_prefix(end == std::string_view::npos ? csv.size() : end + kRowEnd.size());
  }
  return rows;
}

}  // namespace pipeplan
