#include "profile_table.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "pipeplan/app/format.h"

namespace pipeplan::cli {
namespace {

// A compute kind's column: its stats in a profile and its figure in a cost model.
struct KindColumn {
  const char* name;
  DurationStats StageProfile::*stats;
  double StageCosts::*cost;
};

constexpr KindColumn kOverlap = {"overlap", &StageProfile::overlap, &StageCosts::overlap};
constexpr KindColumn kKinds[] = {
    {"F", &StageProfile::forward, &StageCosts::forward},
    {"B", &StageProfile::backward, &StageCosts::backward},
    {"I", &StageProfile::backward_input, &StageCosts::backward_input},
    {"W", &StageProfile::backward_weight, &StageCosts::backward_weight},
    kOverlap,
};

bool MeasuredOnAnyStage(const Profile& profile, const KindColumn& kind) {
  return std::any_of(profile.stages.begin(), profile.stages.end(),
                     [&](const StageProfile& stage) { return (stage.*kind.stats).samples > 0; });
}

bool MissingOnAnyStage(const Profile& profile, const KindColumn& kind) {
  return std::any_of(profile.stages.begin(), profile.stages.end(),
                     [&](const StageProfile& stage) { return (stage.*kind.stats).samples == 0; });
}

// " (0.4%)": p90 - p10 as a share of the median.
std::string Spread(const DurationStats& stats) {
  if (stats.median <= 0) return "";
  return " (" + app::FormatPercent((stats.p90 - stats.p10) / stats.median) + ")";
}

std::string InUnit(double seconds, TimeUnit unit) {
  return app::FormatCompact(seconds / SecondsPer(unit));
}

std::string BoundaryName(size_t boundary) {
  return std::to_string(boundary) + "-" + std::to_string(boundary + 1);
}

bool BoundaryMeasured(const BoundaryProfile& boundary) {
  return boundary.transfer.samples > 0 || boundary.latency > 0 || boundary.bandwidth > 0;
}

bool OverheadMeasured(const BoundaryProfile& boundary) {
  return boundary.receive_overhead.samples > 0;
}

std::string RenderTransfers(const Profile& profile, TimeUnit unit) {
  app::TextTable table({"boundary", "clean transfers", "late receives", "median", "p10", "p90",
                        "receive overhead: mean (of n)"});
  for (size_t b = 0; b < profile.boundaries.size(); ++b) {
    const BoundaryProfile& boundary = profile.boundaries[b];
    const DurationStats& t = boundary.transfer;
    const DurationStats& o = boundary.receive_overhead;
    const bool measured = t.samples > 0;
    table.AddRow(
        {BoundaryName(b), std::to_string(t.samples), std::to_string(boundary.late_receives),
         measured ? InUnit(t.median, unit) : "-", measured ? InUnit(t.p10, unit) : "-",
         measured ? InUnit(t.p90, unit) : "-",
         o.samples > 0 ? InUnit(o.mean, unit) + " (of " + std::to_string(o.samples) + ")" : "-"});
  }
  return table.Render();
}

// A memory column: what one kind keeps or frees, and its transient.
struct MemoryColumn {
  const char* name;
  DurationStats StageMemoryProfile::*stats;
};
constexpr MemoryColumn kMemoryColumns[] = {
    {"F keeps", &StageMemoryProfile::kept_by_forward},
    {"B frees", &StageMemoryProfile::freed_by_backward},
    {"I frees", &StageMemoryProfile::freed_by_input},
    {"W frees", &StageMemoryProfile::freed_by_weight},
    {"F transient", &StageMemoryProfile::forward_transient},
    {"B transient", &StageMemoryProfile::backward_transient},
    {"I transient", &StageMemoryProfile::input_transient},
    {"W transient", &StageMemoryProfile::weight_transient},
    {"RECV_F allocates", &StageMemoryProfile::received_forward},
    {"RECV_B allocates", &StageMemoryProfile::received_backward},
};

// Which stages hold the data among their own bytes (the model's inputs, the loss's targets),
// which calibrate gives to a chain's first and last stage; empty where none told any.
std::string DataLine(const Profile& profile) {
  std::string line;
  for (size_t s = 0; s < profile.stages.size(); ++s) {
    const StageMemoryProfile& m = profile.stages[s].memory;
    const std::pair<const char*, double> data[] = {{"inputs", m.input_bytes},
                                                   {"targets", m.target_bytes}};
    for (const auto& [name, bytes] : data) {
      if (bytes <= 0) continue;
      line += std::string(line.empty() ? "of which data: " : ", ") + name + " " +
              app::FormatBytes(bytes) + " (stage " + std::to_string(s) + ")";
    }
  }
  return line.empty() ? line : line + "\n";
}

std::string RenderMemory(const Profile& profile) {
  std::vector<const MemoryColumn*> columns;
  std::vector<std::string> header = {"stage"};
  for (const MemoryColumn& column : kMemoryColumns) {
    const bool measured = std::any_of(
        profile.stages.begin(), profile.stages.end(),
        [&](const StageProfile& stage) { return (stage.memory.*column.stats).samples > 0; });
    if (!measured) continue;
    columns.push_back(&column);
    header.emplace_back(column.name);
  }
  std::string out;
  if (!columns.empty()) {
    app::TextTable table(header);
    for (size_t s = 0; s < profile.stages.size(); ++s) {
      std::vector<std::string> row = {std::to_string(s)};
      for (const MemoryColumn* column : columns) {
        const DurationStats& stats = profile.stages[s].memory.*column->stats;
        row.push_back(stats.samples > 0 ? app::FormatBytes(stats.median) : "-");
      }
      table.AddRow(std::move(row));
    }
    out += "memory in bytes: medians (transient: an op's peak above its start and end)\n\n" +
           table.Render();
  }
  if (!profile.static_bytes.empty()) {
    out += "static memory per rank (held when its first compute began):";
    for (size_t r = 0; r < profile.static_bytes.size(); ++r) {
      out += (r == 0 ? " " : ", ") + std::to_string(r) + ": " +
             app::FormatBytes(profile.static_bytes[r]);
    }
    out += "\n";
  }
  if (!profile.own_static_bytes.empty()) {
    out += "of which each stage's own (parameters, gradients, optimizer state, data):";
    for (size_t s = 0; s < profile.stages.size(); ++s) {
      out += (s == 0 ? " " : ", ") + std::to_string(s) + ": " +
             app::FormatBytes(profile.stages[s].memory.static_bytes);
    }
    out += "\n" + DataLine(profile);
  }
  return out;
}

}  // namespace

std::string RenderProfileTable(const Profile& profile, TimeUnit unit) {
  std::vector<const KindColumn*> kinds;
  std::vector<std::string> header = {"stage"};
  for (const KindColumn& kind : kKinds) {
    if (!MeasuredOnAnyStage(profile, kind)) continue;
    kinds.push_back(&kind);
    header.emplace_back(kind.name);
  }
  app::TextTable table(header);
  for (size_t s = 0; s < profile.stages.size(); ++s) {
    std::vector<std::string> row = {std::to_string(s)};
    for (const KindColumn* kind : kinds) {
      const DurationStats& stats = profile.stages[s].*kind->stats;
      row.push_back(stats.samples > 0 ? InUnit(stats.median, unit) + Spread(stats) : "-");
    }
    table.AddRow(std::move(row));
  }
  std::string out = "times in " + std::string(TimeUnitName(unit)) +
                    ": median (p90 - p10 as a share of the median); - = not measured\n\n" +
                    table.Render();
  if (!profile.boundaries.empty()) out += "\n" + RenderTransfers(profile, unit);
  if (const std::string memory = RenderMemory(profile); !memory.empty()) out += "\n" + memory;
  return out;
}

std::string RenderCalibrationTable(const Profile& profile, const CostModel& costs,
                                   const CalibrateOptions& options) {
  const bool has_overlap = MeasuredOnAnyStage(profile, kOverlap);
  std::vector<std::string> header = {"stage", "F", "B", "I", "W"};
  if (has_overlap) header.emplace_back("overlap");
  app::TextTable table(header);
  bool derived_backward = false;
  bool derived_split = false;
  // Uniform figures are every stage's alike: one row, "all".
  const auto rows = [&](size_t entries) {
    return options.uniform ? std::min<size_t>(1, entries) : entries;
  };
  for (size_t s = 0; s < rows(costs.stages.size()); ++s) {
    std::vector<std::string> row = {options.uniform ? "all" : std::to_string(s)};
    for (const KindColumn& kind : kKinds) {
      if (kind.stats == kOverlap.stats && !has_overlap) continue;
      const double cost = costs.stages[s].*kind.cost;
      const bool measured = options.uniform ? !MissingOnAnyStage(profile, kind)
                                            : (profile.stages[s].*kind.stats).samples > 0;
      if (measured) {
        row.push_back(app::FormatCompact(cost) +
                      (options.uniform ? "" : Spread(profile.stages[s].*kind.stats)));
      } else if (kind.stats == kOverlap.stats) {
        row.push_back(cost > 0 ? app::FormatCompact(cost) + "*" : "F+B");
      } else {
        row.push_back(app::FormatCompact(cost) + "*");
        derived_backward |= kind.stats == &StageProfile::backward;
        derived_split |= kind.stats == &StageProfile::backward_input;
      }
    }
    table.AddRow(std::move(row));
  }
  std::string out =
      "costs in " + std::string(TimeUnitName(options.unit)) +
      (options.uniform ? ", uniform: the mean over the stages"
                       : " per stage: the measured medians (p90 - p10 as a share of the median)") +
      "; * = derived\n\n" + table.Render();
  if (derived_backward) {
    out +=
        "* B not measured: B = I + W (assumed; plan, compare and auto say where a ranking\n"
        "  rests on it: calibrate a profile of a plan with full backwards, e.g. 1f1b, with this "
        "one)\n";
  }
  if (derived_split) {
    out += "* I and W not measured: I = " + app::FormatCompact(options.input_share) +
           " B (--input-share), W = B - I (assumed; a runtime's split backward can cost\n"
           "  more than B: calibrate a profile of a zero-bubble plan, e.g. zb-h1, with this one)\n";
  }
  if (has_overlap && MissingOnAnyStage(profile, kOverlap)) {
    out += options.uniform ? "* overlap: the mean over the stages that measured one\n"
                           : "F+B: no overlap cell measured; a cell costs F + B\n";
  }
  if (costs.memory.has_value()) {
    const MemoryModel& memory = *costs.memory;
    out += "memory in bytes: F keeps (I frees)";
    for (size_t s = 0; s < rows(memory.stages.size()); ++s) {
      out += std::string(s == 0 ? " " : ", ") + (options.uniform ? "all" : std::to_string(s)) +
             ": " + app::FormatBytes(memory.stages[s].activation) + " (" +
             app::FormatBytes(memory.stages[s].freed_by_input) + ")";
    }
    out +=
        "; static per rank " + app::FormatBytes(memory.static_per_rank) + " (the largest rank's)";
    if (std::any_of(memory.stages.begin(), memory.stages.end(),
                    [](const StageMemory& m) { return m.static_bytes > 0; })) {
      out += " besides its stages':";
      for (size_t s = 0; s < rows(memory.stages.size()); ++s) {
        out += std::string(s == 0 ? " " : ", ") + (options.uniform ? "each" : std::to_string(s)) +
               " " + app::FormatBytes(memory.stages[s].static_bytes);
      }
      if (options.uniform) {
        out += ", the first + " + app::FormatBytes(memory.first_stage_static) + ", the last + " +
               app::FormatBytes(memory.last_stage_static);
      }
    }
    // The data go with a chain's first and last stage, per microbatch they run.
    if (memory.first_stage_data_per_microbatch > 0 || memory.last_stage_data_per_microbatch > 0) {
      out += "; data per microbatch: the first stage " +
             app::FormatBytes(memory.first_stage_data_per_microbatch) + ", the last " +
             app::FormatBytes(memory.last_stage_data_per_microbatch);
    }
    out += "\n";
  }
  if (profile.boundaries.empty()) return out;

  app::TextTable boundaries({"boundary", "latency",
                             "bandwidth (bytes/" + std::string(TimeUnitName(options.unit)) + ")",
                             "receive overhead"});
  bool derived_boundary = false;
  bool derived_overhead = false;
  for (size_t b = 0; b < rows(costs.boundaries.size()); ++b) {
    const BoundaryCosts& c = costs.boundaries[b];
    const bool measured = options.uniform ? std::any_of(profile.boundaries.begin(),
                                                        profile.boundaries.end(), BoundaryMeasured)
                                          : BoundaryMeasured(profile.boundaries[b]);
    const bool overhead_measured =
        options.uniform
            ? std::any_of(profile.boundaries.begin(), profile.boundaries.end(), OverheadMeasured)
            : OverheadMeasured(profile.boundaries[b]);
    derived_boundary |= !measured;
    derived_overhead |= !overhead_measured;
    boundaries.AddRow({options.uniform ? "all" : BoundaryName(b),
                       app::FormatCompact(c.latency) + (measured ? "" : "*"),
                       c.bandwidth > 0 ? app::FormatCompact(c.bandwidth) : "infinite",
                       app::FormatCompact(c.receive_overhead) + (overhead_measured ? "" : "**")});
  }
  out += "\n" + boundaries.Render();
  if (derived_boundary) {
    out +=
        "* no clean transfer measured (a same-rank hand-off, or only late receives): the mean "
        "of the measured boundaries, 0 if none\n";
  }
  if (derived_overhead) {
    out +=
        "** no receive posted after its data landed: the mean of the measured boundaries, 0 if "
        "none\n";
  }
  return out;
}

}  // namespace pipeplan::cli
