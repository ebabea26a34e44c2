#include "diff_report.h"

#include "pipeplan/app/format.h"
#include "pipeplan/reports/html_report.h"

namespace pipeplan::cli {
namespace {

std::string Signed(double value) { return (value >= 0 ? "+" : "") + app::FormatCompact(value); }

std::string SignedPercent(double fraction) {
  return (fraction >= 0 ? "+" : "") + app::FormatPercent(fraction);
}

std::string ErrorOf(double expected, double actual) {
  return expected > 0 ? SignedPercent(actual / expected - 1) : "-";
}

}  // namespace

std::string RenderDiffText(const Plan& plan, const TimelineDiff& diff, const DiffLabels& labels) {
  const std::string& e = labels.expected;
  const std::string& a = labels.actual;
  std::string out;
  app::TextTable step({"step time", e, a, "error"}, {true, false, false, false});
  step.AddRow({"makespan", app::FormatCompact(diff.step_expected),
               app::FormatCompact(diff.step_actual), SignedPercent(diff.relative_error)});
  out += step.Render() + "\n";

  app::TextTable ranks({"rank", "busy " + e, "busy " + a, "idle " + e, "idle " + a});
  for (const RankDiff& rank : diff.ranks) {
    ranks.AddRow({std::to_string(rank.rank.value), app::FormatCompact(rank.busy_expected),
                  app::FormatCompact(rank.busy_actual), app::FormatCompact(rank.idle_expected),
                  app::FormatCompact(rank.idle_actual)});
  }
  out += ranks.Render() + "\n";
  if (diff.memory_in_bytes) {
    app::TextTable memory({"rank", "peak memory " + e, "peak memory " + a, "error"});
    for (const RankDiff& rank : diff.ranks) {
      memory.AddRow({std::to_string(rank.rank.value), app::FormatBytes(rank.peak_memory_expected),
                     app::FormatBytes(rank.peak_memory_actual),
                     ErrorOf(rank.peak_memory_expected, rank.peak_memory_actual)});
    }
    out += memory.Render() + "\n";
  }

  app::TextTable kinds({"kind", "count", "mean duration " + e, "mean duration " + a, "error",
                        "mean start error", "mean |start error|"},
                       {true, false, false, false, false, false, false});
  for (const KindDiff& kind : diff.kinds) {
    kinds.AddRow({std::string(KindToken(kind.kind)), std::to_string(kind.count),
                  app::FormatCompact(kind.mean_duration_expected),
                  app::FormatCompact(kind.mean_duration_actual),
                  ErrorOf(kind.mean_duration_expected, kind.mean_duration_actual),
                  Signed(kind.mean_start_error), app::FormatCompact(kind.mean_abs_start_error)});
  }
  out += kinds.Render();
  out += "mean |start error| over all compute actions: " +
         app::FormatCompact(diff.mean_abs_start_error) + "\n";
  if (diff.worst_start) {
    const OpStartError& w = *diff.worst_start;
    const Action& action = plan.programs[w.rank.value].actions[w.action_index];
    out += "furthest off: rank " + std::to_string(w.rank.value) + ", action " +
           std::to_string(w.action_index) + " (" + ToString(action) + "): starts at " +
           app::FormatCompact(w.actual) + " " + a + ", " + app::FormatCompact(w.expected) + " " +
           e + " (" + Signed(w.actual - w.expected) + ")\n";
  }
  return out;
}

std::string RenderDiffHtml(const Plan& plan, const Timeline& expected, const Timeline& actual,
                           const TimelineDiff& diff, const DiffLabels& labels,
                           const std::string& subtitle) {
  ReportOptions options;
  options.title = "pipeplan: " + labels.expected + " vs " + labels.actual;
  options.subtitle = subtitle + "; step time " + app::FormatCompact(diff.step_expected) + " " +
                     labels.expected + ", " + app::FormatCompact(diff.step_actual) + " " +
                     labels.actual + " (" + SignedPercent(diff.relative_error) +
                     "); mean |start error| " + app::FormatCompact(diff.mean_abs_start_error);
  options.shared_time_axis = true;
  options.memory_curves = true;
  return RenderHtmlReport(
      {ReportEntry{labels.expected, plan, expected}, ReportEntry{labels.actual, plan, actual}},
      options);
}

}  // namespace pipeplan::cli
