// Reads torch.distributed.pipelining's CSV, compute-only or compute+comms. Torch's own loader
// matches tokens with a prefix regex and so accepts "1F0x" as 1F0; we match whole tokens and
// say exactly which cell is wrong, since a silently misread schedule is worse than a rejected
// one. Of a compute+comms file only the compute order is kept: torch's transfers are checked
// and dropped, and comm insertion adds ours (same pairs, our placement of the RECVs).
#include "pipeplan/formats/torch_csv.h"

#include <algorithm>
#include <cctype>
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

// Torch's actions that are not compute, which only its compute+comms format holds.
enum class NonComputeKind : uint8_t {
  kTransfer,     // SEND_F, RECV_F, SEND_B, RECV_B: carry a microbatch
  kBookkeeping,  // REDUCE_GRAD, UNSHARD, RESHARD: per stage, no microbatch
};

// A transfer or bookkeeping cell of a compute+comms file: checked, then dropped.
struct DroppedCell {
  NonComputeKind kind;
  int32_t stage;
  std::optional<int32_t> microbatch;
  int rank;
  int index;
};

struct ParsedCells {
  std::vector<Cell> cells;
  std::vector<DroppedCell> dropped;
};

// The pieces of "<stage><KIND><microbatch>"; the microbatch may be missing.
struct SimpleToken {
  int32_t stage;
  std::string_view kind;
  std::optional<int32_t> microbatch;
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

// "<stage><KIND><microbatch>" split into its pieces, nothing before or after.
StatusOr<SimpleToken> SplitSimpleToken(std::string_view token) {
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
  return SimpleToken{.stage = *stage, .kind = kind, .microbatch = microbatch};
}

// A compute token: "<stage><F|I|B|W><microbatch>".
StatusOr<Action> ParseSimpleToken(std::string_view token) {
  PIPEPLAN_ASSIGN_OR_RETURN(const SimpleToken parts, SplitSimpleToken(token));
  PIPEPLAN_RETURN_IF_ERROR(CheckComputeKind(parts.kind, token, parts.stage, parts.microbatch));
  if (!parts.microbatch.has_value()) {
    return InvalidArgument(Quoted(token) + " has no microbatch");
  }
  return MakeCompute(*KindFromToken(parts.kind), StageId(parts.stage),
                     MicrobatchId(*parts.microbatch));
}

std::optional<NonComputeKind> NonComputeKindOf(std::string_view kind) {
  if (kind == "SEND_F" || kind == "RECV_F" || kind == "SEND_B" || kind == "RECV_B") {
    return NonComputeKind::kTransfer;
  }
  if (kind == "REDUCE_GRAD" || kind == "UNSHARD" || kind == "RESHARD") {
    return NonComputeKind::kBookkeeping;
  }
  return std::nullopt;
}

// A transfer or bookkeeping token of the compute+comms format; nullopt for anything else
// (which then has to be a compute token).
StatusOr<std::optional<DroppedCell>> ParseDroppedToken(std::string_view token) {
  if (token.starts_with('(')) return std::optional<DroppedCell>();
  PIPEPLAN_ASSIGN_OR_RETURN(const SimpleToken parts, SplitSimpleToken(token));
  const std::optional<NonComputeKind> kind = NonComputeKindOf(parts.kind);
  if (!kind.has_value()) return std::optional<DroppedCell>();
  switch (*kind) {
    case NonComputeKind::kTransfer:
      if (!parts.microbatch.has_value()) {
        return InvalidArgument(Quoted(token) + " has no microbatch");
      }
      break;
    case NonComputeKind::kBookkeeping:
      if (parts.microbatch.has_value()) {
        return InvalidArgument(Quoted(token) + " must not have a microbatch (torch writes " +
                               Quoted(std::to_string(parts.stage) + std::string(parts.kind)) + ")");
      }
      break;
  }
  return std::optional<DroppedCell>(DroppedCell{
      .kind = *kind, .stage = parts.stage, .microbatch = parts.microbatch, .rank = 0, .index = 0});
}

Status OverlapHalvesError(std::string_view token) {
  return InvalidArgument(Quoted(token) + " must hold a forward, then a backward (B, I or W)");
}

// One half of an overlap cell: a compute token. A transfer or bookkeeping action there is
// wrong in either format.
StatusOr<Action> ParseOverlapHalf(std::string_view half, std::string_view token) {
  const StatusOr<SimpleToken> parts = SplitSimpleToken(half);
  if (parts.ok() && NonComputeKindOf(parts->kind).has_value()) return OverlapHalvesError(token);
  return ParseSimpleToken(half);
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
  PIPEPLAN_ASSIGN_OR_RETURN(const Action forward,
                            ParseOverlapHalf(inner.substr(0, separator), token));
  PIPEPLAN_ASSIGN_OR_RETURN(const Action backward,
                            ParseOverlapHalf(inner.substr(separator + 1), token));
  if (forward.kind != ActionKind::kForward || backward.kind == ActionKind::kForward) {
    return OverlapHalvesError(token);
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

// One non-empty cell: a compute action into `parsed->cells`, or (compute+comms format only) a
// transfer or bookkeeping action into `parsed->dropped`.
Status ParseCell(std::string_view text, TorchCsvFormat format, std::optional<int> microbatches,
                 int rank, int index, ParsedCells* parsed) {
  switch (format) {
    case TorchCsvFormat::kComputeOnly:
      break;
    case TorchCsvFormat::kComputeComms: {
      PIPEPLAN_ASSIGN_OR_RETURN(std::optional<DroppedCell> dropped, ParseDroppedToken(text));
      if (!dropped.has_value()) break;
      if (dropped->microbatch.has_value()) {
        PIPEPLAN_RETURN_IF_ERROR(
            CheckMicrobatches(MakeCompute(ActionKind::kForward, StageId(dropped->stage),
                                          MicrobatchId(*dropped->microbatch)),
                              microbatches));
      }
      dropped->rank = rank;
      dropped->index = index;
      parsed->dropped.push_back(*dropped);
      return Status::Ok();
    }
  }
  PIPEPLAN_ASSIGN_OR_RETURN(Action action, ParseToken(text));
  PIPEPLAN_RETURN_IF_ERROR(CheckMicrobatches(action, microbatches));
  parsed->cells.push_back({.action = std::move(action), .rank = rank, .index = index});
  return Status::Ok();
}

StatusOr<ParsedCells> ParseCells(const std::vector<std::string_view>& rows, TorchCsvFormat format,
                                 std::optional<int> microbatches) {
  ParsedCells parsed;
  for (int rank = 0; rank < static_cast<int>(rows.size()); ++rank) {
    const std::vector<std::string_view> texts = SplitCells(rows[rank]);
    for (int index = 0; index < static_cast<int>(texts.size()); ++index) {
      if (texts[index].empty()) continue;  // an idle slot in torch's dump
      Status status = ParseCell(texts[index], format, microbatches, rank, index, &parsed);
      if (!status.ok()) return status.WithContext(Where(rank, index));
    }
  }
  return parsed;
}

// Records that `stage` appears on `rank` at `where`; a stage on two ranks is an error.
Status ClaimStage(int32_t stage, int rank, const std::string& where, std::vector<int>* owner) {
  int& owner_rank = (*owner)[stage];
  if (owner_rank == -1) owner_rank = rank;
  if (owner_rank == rank) return Status::Ok();
  return InvalidArgument(where + ": stage " + std::to_string(stage) + " already appears on rank " +
                         std::to_string(owner_rank));
}

// The rank each stage sits on (-1 where a stage never appears). Torch's transfers and
// bookkeeping name a stage of their own rank, so they count like compute actions; they may
// only name stages some compute action uses.
StatusOr<std::vector<int>> StageOwners(const ParsedCells& parsed, int num_stages) {
  std::vector<int> owner(num_stages, -1);
  for (const Cell& cell : parsed.cells) {
    for (const Action& leaf : Leaves(cell.action)) {
      PIPEPLAN_RETURN_IF_ERROR(
          ClaimStage(leaf.stage.value, cell.rank, Where(cell.rank, cell.index), &owner));
    }
  }
  for (const DroppedCell& cell : parsed.dropped) {
    const std::string where = Where(cell.rank, cell.index);
    if (cell.stage >= num_stages) {
      return InvalidArgument(where + ": stage " + std::to_string(cell.stage) +
                             " is beyond the last stage of the compute actions (" +
                             std::to_string(num_stages - 1) + ")");
    }
    PIPEPLAN_RETURN_IF_ERROR(ClaimStage(cell.stage, cell.rank, where, &owner));
  }
  return owner;
}

// A dropped transfer's microbatch must exist too (checked early when M is given).
Status CheckDroppedMicrobatches(const std::vector<DroppedCell>& dropped, int microbatches) {
  for (const DroppedCell& cell : dropped) {
    if (!cell.microbatch.has_value() || *cell.microbatch < microbatches) continue;
    return InvalidArgument(Where(cell.rank, cell.index) + ": microbatch " +
                           std::to_string(*cell.microbatch) + " out of range 0.." +
                           std::to_string(microbatches - 1));
  }
  return Status::Ok();
}

// The note saying what of torch's was read and left to our comm insertion.
std::optional<std::string> DroppedNote(const std::vector<DroppedCell>& dropped) {
  int transfers = 0;
  int bookkeeping = 0;
  for (const DroppedCell& cell : dropped) {
    switch (cell.kind) {
      case NonComputeKind::kTransfer:
        ++transfers;
        break;
      case NonComputeKind::kBookkeeping:
        ++bookkeeping;
        break;
    }
  }
  if (dropped.empty()) return std::nullopt;
  return "dropped torch's " + std::to_string(transfers) +
         " transfers (SEND_F, RECV_F, SEND_B, RECV_B) and " + std::to_string(bookkeeping) +
         " bookkeeping actions (REDUCE_GRAD, UNSHARD, RESHARD): the plan gets its own transfers "
         "from comm insertion";
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

StatusOr<Topology> InferTopology(const ParsedCells& parsed, int num_rows,
                                 std::optional<int> microbatches) {
  int max_stage = 0;
  int max_microbatch = 0;
  for (const Cell& cell : parsed.cells) {
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
  PIPEPLAN_RETURN_IF_ERROR(CheckDroppedMicrobatches(parsed.dropped, topology.microbatches));
  PIPEPLAN_ASSIGN_OR_RETURN(const std::vector<int> owner,
                            StageOwners(parsed, topology.num_stages()));
  PIPEPLAN_ASSIGN_OR_RETURN(topology.placement, InferPlacement(owner, topology));
  return topology;
}

}  // namespace

StatusOr<std::optional<Action>> ParseTorchActionToken(std::string_view token) {
  PIPEPLAN_ASSIGN_OR_RETURN(const std::optional<DroppedCell> other, ParseDroppedToken(token));
  if (!other.has_value()) {
    PIPEPLAN_ASSIGN_OR_RETURN(const Action compute, ParseToken(token));
    return std::optional<Action>(compute);
  }
  if (other->kind == NonComputeKind::kBookkeeping) return std::optional<Action>();
  PIPEPLAN_ASSIGN_OR_RETURN(const SimpleToken parts, SplitSimpleToken(token));
  Action transfer;
  transfer.kind = *KindFromToken(parts.kind);
  transfer.stage = StageId(parts.stage);
  transfer.microbatch = MicrobatchId(*parts.microbatch);
  return std::optional<Action>(transfer);
}

StatusOr<TorchCsvImport> ImportTorchCsv(std::string_view csv, TorchCsvFormat format,
                                        std::optional<int> microbatches) {
  if (microbatches.has_value() && *microbatches < 1) {
    return InvalidArgument("microbatches must be >= 1, got " + std::to_string(*microbatches));
  }
  if (csv.empty()) return InvalidArgument("empty input: expected one row per rank");
  const std::vector<std::string_view> rows = SplitRows(csv);
  PIPEPLAN_ASSIGN_OR_RETURN(const ParsedCells parsed, ParseCells(rows, format, microbatches));
  if (parsed.cells.empty()) {
    const std::string what = parsed.dropped.empty() ? "every cell is empty" : "no compute action";
    return InvalidArgument("no actions in " + std::to_string(rows.size()) + " row(s): " + what);
  }
  TorchCsvImport result;
  PIPEPLAN_ASSIGN_OR_RETURN(result.topology,
                            InferTopology(parsed, static_cast<int>(rows.size()), microbatches));
  result.order.resize(rows.size());
  for (const Cell& cell : parsed.cells) result.order[cell.rank].push_back(cell.action);
  if (std::optional<std::string> note = DroppedNote(parsed.dropped)) {
    result.notes.push_back(*std::move(note));
  }
  return result;
}

bool LooksLikeTorchCsv(std::string_view content) {
  while (!content.empty()) {
    const size_t end = content.find('\n');
    std::string_view line = content.substr(0, end);
    content.remove_prefix(end == std::string_view::npos ? content.size() : end + 1);
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    if (line.find(',') == std::string_view::npos) return false;
    while (!line.empty() && line.front() == ',') line.remove_prefix(1);  // empty cells
    const std::string_view cell = line.substr(0, line.find(','));
    // Digits (the stage), then capitals and '_' (the action), then digits (the microbatch).
    size_t at = 0;
    const auto skip = [&](auto predicate) {
      const size_t from = at;
      while (at < cell.size() && predicate(static_cast<unsigned char>(cell[at]))) ++at;
      return at > from;
    };
    const bool stage = skip([](unsigned char c) { return std::isdigit(c) != 0; });
    const bool action = skip([](unsigned char c) { return std::isupper(c) != 0 || c == '_'; });
    skip([](unsigned char c) { return std::isdigit(c) != 0; });
    return stage && action && cell.substr(at).find_first_not_of(" \r") == std::string_view::npos;
  }
  return false;
}

}  // namespace pipeplan
