// Reads torch.distributed.pipelining's compute-only CSV. Torch's own loader matches tokens with
// a prefix regex and so accepts "1F0x" as 1F0; we match whole tokens and say exactly which cell
// is wrong, since a silently misread schedule is worse than a rejected one.
#include "pipeplan/planner/torch_csv.h"

#include <algorithm>
#include <charconv>
#include <climits>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace pipeplan {
namespace {

constexpr std::string_view kOverlapSuffix = ")OVERLAP_F_B";
constexpr std::string_view kExpected =
    " (expected <stage><F|I|B|W><microbatch> such as 3F5, or an overlap cell such as "
    "(0F1;1B0)OVERLAP_F_B)";
constexpr std::string_view kComputeOnly = "; import expects torch's compute-only format";

// A parsed cell and where it came from, for error messages.
struct Cell {
  Action action;
  int rank;
  int index;  // 0-based, counting empty cells
};

std::string Where(int rank, int index) {
  return "rank " + std::to_string(rank) + ", cell " + std::to_string(index);
}

std::string Quoted(std::string_view text) { return "'" + std::string(text) + "'"; }

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsKindChar(char c) { return (c >= 'A' && c <= 'Z') || c == '_'; }

std::string_view Trim(std::string_view text) {
  const size_t first = text.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  const size_t last = text.find_last_not_of(" \t");
  return text.substr(first, last - first + 1);
}

// Rows end with "\n" or "\r\n"; a final line break does not start another row.
std::vector<std::string_view> SplitRows(std::string_view csv) {
  std::vector<std::string_view> rows;
  while (!csv.empty()) {
    const size_t end = csv.find('\n');
    std::string_view row = csv.substr(0, end);
    if (row.ends_with('\r')) row.remove_suffix(1);
    rows.push_back(row);
    if (end == std::string_view::npos) break;
    csv.remove_prefix(end + 1);
  }
  return rows;
}

std::vector<std::string_view> SplitCells(std::string_view row) {
  std::vector<std::string_view> cells;
  while (true) {
    const size_t end = row.find(',');
    cells.push_back(Trim(row.substr(0, end)));
    if (end == std::string_view::npos) return cells;
    row.remove_prefix(end + 1);
  }
}

// Reads the non-negative decimal at the front of `text`, consuming it. An empty result means
// no digits; `what` names the number in messages.
StatusOr<std::optional<int32_t>> TakeNumber(std::string_view* text, std::string_view token,
                                            std::string_view what) {
  if (text->starts_with('-')) {
    return InvalidArgument(Quoted(token) + " has a negative " + std::string(what));
  }
  size_t digits = 0;
  while (digits < text->size() && IsDigit((*text)[digits])) ++digits;
  if (digits == 0) return std::optional<int32_t>();
  int32_t value = 0;
  const auto result = std::from_chars(text->data(), text->data() + digits, value);
  if (result.ec == std::errc::result_out_of_range) {
    return InvalidArgument(Quoted(token) + " has a " + std::string(what) +
                           " too large for a 32-bit integer");
  }
  text->remove_prefix(digits);
  return std::optional<int32_t>(value);
}

Status NotAToken(std::string_view token) {
  return InvalidArgument(Quoted(token) + " is not a compute action" + std::string(kExpected));
}

// Tokens torch knows but that have no place in a compute-only schedule.
Status CheckComputeKind(std::string_view kind, std::string_view token, int32_t stage,
                        std::optional<int32_t> microbatch) {
  // Torch's interim grammar (F|BW|B|W) wrote the full backward as BW and the input half as B.
  if (kind == "BW") {
    const std::string microbatch_text = microbatch ? std::to_string(*microbatch) : "";
    return InvalidArgument(Quoted(token) + " is torch's legacy full-backward token; use " +
                           Quoted(std::to_string(stage) + "B" + microbatch_text));
  }
  if (kind == "REDUCE_GRAD") {
    return InvalidArgument(Quoted(token) + " is a gradient-reduction action" +
                           std::string(kComputeOnly));
  }
  if (kind == "SEND_F" || kind == "RECV_F" || kind == "SEND_B" || kind == "RECV_B") {
    return InvalidArgument(Quoted(token) + " is a communication action" +
                           std::string(kComputeOnly));
  }
  if (kind == "F" || kind == "B" || kind == "I" || kind == "W") return Status::Ok();
  return NotAToken(token);
}

// "<stage><KIND><microbatch>", nothing before or after.
StatusOr<Action> ParseSimpleToken(std::string_view token) {
  std::string_view rest = token;
  PIPEPLAN_ASSIGN_OR_RETURN(const std::optional<int32_t> stage, TakeNumber(&rest, token, "stage"));
  if (!stage.has_value()) return NotAToken(token);
  size_t kind_length = 0;
  while (kind_length < rest.size() && IsKindChar(rest[kind_length])) ++kind_length;
  const std::string_view kind = rest.substr(0, kind_length);
  rest.remove_prefix(kind_length);
  PIPEPLAN_ASSIGN_OR_RETURN(const std::optional<int32_t> microbatch,
                            TakeNumber(&rest, token, "microbatch"));
  if (kind.empty() || !rest.empty()) return NotAToken(token);
  PIPEPLAN_RETURN_IF_ERROR(CheckComputeKind(kind, token, *stage, microbatch));
  if (!microbatch.has_value()) {
    return InvalidArgument(Quoted(token) + " has no microbatch");
  }
  return MakeCompute(*KindFromToken(kind), StageId(*stage), MicrobatchId(*microbatch));
}

// "(<forward>;<backward>)OVERLAP_F_B", as torch's _Action.__repr__ writes an overlap cell.
StatusOr<Action> ParseOverlapToken(std::string_view token) {
  if (!token.ends_with(kOverlapSuffix)) return NotAToken(token);
  const std::string_view inner = token.substr(1, token.size() - 1 - kOverlapSuffix.size());
  const size_t separator = inner.find(';');
  if (separator == std::string_view::npos || inner.find(';', separator + 1) != inner.npos) {
    return InvalidArgument(Quoted(token) +
                           " must hold exactly two actions, a forward and a backward");
  }
  PIPEPLAN_ASSIGN_OR_RETURN(const Action forward, ParseSimpleToken(inner.substr(0, separator)));
  PIPEPLAN_ASSIGN_OR_RETURN(const Action backward, ParseSimpleToken(inner.substr(separator + 1)));
  if (forward.kind != ActionKind::kForward || backward.kind == ActionKind::kForward) {
    return InvalidArgument(Quoted(token) + " must hold a forward, then a backward (B, I or W)");
  }
  return MakeOverlap(forward, backward);
}

StatusOr<Action> ParseToken(std::string_view token) {
  if (token.starts_with('(')) return ParseOverlapToken(token);
  return ParseSimpleToken(token);
}

Status CheckMicrobatches(const Action& action, std::optional<int> microbatches) {
  if (!microbatches.has_value()) return Status::Ok();
  for (const Action& sub : action.sub_actions) {
    PIPEPLAN_RETURN_IF_ERROR(CheckMicrobatches(sub, microbatches));
  }
  if (action.microbatch.value < *microbatches) return Status::Ok();
  return InvalidArgument("microbatch " + std::to_string(action.microbatch.value) +
                         " out of range 0.." + std::to_string(*microbatches - 1));
}

// The plain actions of a cell: itself, or the halves of an overlap cell.
std::span<const Action> Leaves(const Action& action) {
  if (action.sub_actions.empty()) return {&action, 1};
  return action.sub_actions;
}

StatusOr<std::vector<Cell>> ParseCells(const std::vector<std::string_view>& rows,
                                       std::optional<int> microbatches) {
  std::vector<Cell> cells;
  for (int rank = 0; rank < static_cast<int>(rows.size()); ++rank) {
    const std::vector<std::string_view> texts = SplitCells(rows[rank]);
    for (int index = 0; index < static_cast<int>(texts.size()); ++index) {
      if (texts[index].empty()) continue;  // an idle slot in torch's dump
      StatusOr<Action> action = ParseToken(texts[index]);
      Status status = action.ok() ? CheckMicrobatches(*action, microbatches) : action.status();
      if (!status.ok()) return status.WithContext(Where(rank, index));
      cells.push_back({.action = std::move(action).value(), .rank = rank, .index = index});
    }
  }
  return cells;
}

// The rank each stage sits on (-1 where a stage never appears); a stage on two ranks is an error.
StatusOr<std::vector<int>> StageOwners(const std::vector<Cell>& cells, int num_stages) {
  std::vector<int> owner(num_stages, -1);
  for (const Cell& cell : cells) {
    for (const Action& leaf : Leaves(cell.action)) {
      int& rank = owner[leaf.stage.value];
      if (rank == -1) rank = cell.rank;
      if (rank == cell.rank) continue;
      return InvalidArgument(Where(cell.rank, cell.index) + ": stage " +
                             std::to_string(leaf.stage.value) + " already appears on rank " +
                             std::to_string(rank));
    }
  }
  return owner;
}

// The first stage whose rank differs from what `placement` says, as a message fragment.
std::optional<std::string> PlacementMismatch(const std::vector<int>& owner, Topology topology,
                                             Placement placement) {
  topology.placement = placement;
  const StageMap map(topology);
  for (int stage = 0; stage < static_cast<int>(owner.size()); ++stage) {
    const int expected = map.RankOf(StageId(stage)).value;
    if (owner[stage] == -1 || owner[stage] == expected) continue;
    return "stage " + std::to_string(stage) + " is on rank " + std::to_string(owner[stage]) +
           " but " + std::string(PlacementName(placement)) + " placement puts it on rank " +
           std::to_string(expected);
  }
  return std::nullopt;
}

StatusOr<Placement> InferPlacement(const std::vector<int>& owner, const Topology& topology) {
  const std::optional<std::string> loop = PlacementMismatch(owner, topology, Placement::kLoop);
  if (!loop.has_value()) return Placement::kLoop;
  const std::optional<std::string> v_shape = PlacementMismatch(owner, topology, Placement::kVShape);
  if (!v_shape.has_value()) return Placement::kVShape;
  return InvalidArgument("cannot infer placement: " + *loop + "; " + *v_shape);
}

// Counts are the largest id + 1, which overflows int only for ids of INT_MAX; the saturated
// count is still far past what ValidateTopology accepts.
int SaturateToInt(int64_t count) { return static_cast<int>(std::min<int64_t>(count, INT_MAX)); }

StatusOr<Topology> InferTopology(const std::vector<Cell>& cells, int num_rows,
                                 std::optional<int> microbatches) {
  int max_stage = 0;
  int max_microbatch = 0;
  for (const Cell& cell : cells) {
    for (const Action& leaf : Leaves(cell.action)) {
      max_stage = std::max(max_stage, leaf.stage.value);
      max_microbatch = std::max(max_microbatch, leaf.microbatch.value);
    }
  }
  const int64_t num_stages = static_cast<int64_t>(max_stage) + 1;
  if (num_stages % num_rows != 0) {
    return InvalidArgument(std::to_string(num_stages) + " stages (0.." + std::to_string(max_stage) +
                           ") do not divide evenly over " + std::to_string(num_rows) +
                           " ranks (rows)");
  }
  Topology topology;
  topology.ranks = num_rows;
  topology.stages_per_rank = SaturateToInt(num_stages / num_rows);
  topology.microbatches =
      microbatches.value_or(SaturateToInt(static_cast<int64_t>(max_microbatch) + 1));
  // Bounds first: StageMap allocates P * V entries.
  PIPEPLAN_RETURN_IF_ERROR(ValidateTopology(topology).WithContext("inferred topology"));
  PIPEPLAN_ASSIGN_OR_RETURN(const std::vector<int> owner,
                            StageOwners(cells, topology.num_stages()));
  PIPEPLAN_ASSIGN_OR_RETURN(topology.placement, InferPlacement(owner, topology));
  return topology;
}

}  // namespace

StatusOr<TorchCsvImport> ImportTorchCsv(std::string_view csv, std::optional<int> microbatches) {
  if (microbatches.has_value() && *microbatches < 1) {
    return InvalidArgument("microbatches must be >= 1, got " + std::to_string(*microbatches));
  }
  if (csv.empty()) return InvalidArgument("empty input: expected one row per rank");
  const std::vector<std::string_view> rows = SplitRows(csv);
  PIPEPLAN_ASSIGN_OR_RETURN(const std::vector<Cell> cells, ParseCells(rows, microbatches));
  if (cells.empty()) {
    return InvalidArgument("no actions in " + std::to_string(rows.size()) +
                           " row(s): every cell is empty");
  }
  TorchCsvImport result;
  PIPEPLAN_ASSIGN_OR_RETURN(result.topology,
                            InferTopology(cells, static_cast<int>(rows.size()), microbatches));
  result.order.resize(rows.size());
  for (const Cell& cell : cells) result.order[cell.rank].push_back(cell.action);
  return result;
}

}  // namespace pipeplan
