// PyTorch pipelining CSV (torch.distributed.pipelining's _dump_csv/_load_csv): one row per
// rank, no header, tokens "<stage><KIND><mb>". Export and import in both of torch's formats;
// import is strict and keeps only the compute order (comm insertion adds our own transfers).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pipeplan/model/plan.h"

namespace pipeplan {

enum class TorchCsvFormat : uint8_t {
  kComputeOnly,   // F, B, I, W, OVERLAP_F_B
  kComputeComms,  // plus SEND_F/RECV_F/SEND_B/RECV_B and REDUCE_GRAD after each stage's
                  // last backward; no SEND/RECV between stages on the same rank
};

struct TorchCsvExport {
  std::string csv;
  std::vector<std::string> notes;  // what torch's grammar cannot express and was left out
};

// Fails for a plan torch's grammar cannot express: a dual-placement plan (dualpipe) runs two
// model copies, but torch's CSV has one model copy per stage index, so torch would read
// another schedule (and its own checks refuse it).
StatusOr<TorchCsvExport> ExportTorchCsv(const Plan& plan, TorchCsvFormat format);

// Every rank's cells (one row per rank, in rank order) as ExportTorchCsv writes them, for a
// runtime that loads the actions in memory. A dual-placement plan is spelled as
// pipeplan.torch.schedule runs it, which torch's own loaders cannot: stage ids are the plan's
// (copy B's stage P + j), and copy B's microbatch k is the batch's microbatch M/2 + k, the part
// of the batch its first stage reads.
std::vector<std::vector<std::string>> TorchActionRows(const Plan& plan, TorchCsvFormat format);

// The cells of each row (one per rank, in rank order) of a CSV ExportTorchCsv wrote: its rows
// end with "\r\n" and its tokens hold no ','.
std::vector<std::vector<std::string>> TorchCsvRows(std::string_view csv);

struct TorchCsvImport {
  Topology topology;  // P = rows, V = stages / P, M given or inferred, placement inferred
  ComputeOrder order;
  std::vector<std::string> notes;  // what was read but dropped (torch's own transfers)
};

// Strict: every non-empty cell must be a whole token of `format`, microbatches in range,
// legacy "BW" tokens rejected. kComputeOnly takes compute tokens only. kComputeComms also
// takes SEND_F/RECV_F/SEND_B/RECV_B (with a microbatch) and REDUCE_GRAD/UNSHARD/RESHARD
// (without), as torch's runtime dumps them: they must name a stage of their row's rank and
// are dropped, with a note. Errors name the row (rank) and column.
// Positions read "rank R, cell C": R is the 0-based row (the rank), C the 0-based index of the
// cell in its row, empty cells included.
StatusOr<TorchCsvImport> ImportTorchCsv(std::string_view csv, TorchCsvFormat format,
                                        std::optional<int> microbatches);

// One token of torch's action grammar, strictly as import reads cells: a compute action or
// overlap cell, or a transfer (SEND_F/RECV_F/SEND_B/RECV_B with a microbatch; peer unset).
// Bookkeeping tokens (REDUCE_GRAD, UNSHARD, RESHARD: no microbatch) give nullopt.
StatusOr<std::optional<Action>> ParseTorchActionToken(std::string_view token);

// Whether `content` reads like a torch pipelining CSV (either format): its first non-empty line
// is comma-separated and its first non-empty cell an action token such as "0F0" or "1SEND_F2".
// For telling such a file apart from a pipeplan file given in its place.
bool LooksLikeTorchCsv(std::string_view content);

}  // namespace pipeplan
