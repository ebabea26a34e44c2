#include "run_report.h"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <string>
#include <utility>

#include "pipeplan/app/atomic_write.h"
#include "pipeplan/app/format.h"
#include "pipeplan/formats/proto_io.h"
#include "pipeplan/measurement/build_profile.h"
#include "pipeplan/reports/svg_steps.h"
#include "pipeplan/simulation/timeline_metrics.h"
#include "pipeplan/torch_ext/model_config.h"

namespace pipeplan::torch_ext {
namespace {

// Each rank's peak in the median step, as its allocator counted it (memory_meter.h).
void PrintMemory(const Timeline& step) {
  for (const RankTimeline& rank : step.ranks) {
    if (rank.memory_unit != MemoryUnit::kBytes) continue;
    std::cout << "memory: rank " << rank.rank.value << " peak "
              << app::FormatBytes(rank.peak_memory) << " (static "
              << app::FormatBytes(rank.peak_memory - rank.peak_activation_memory)
              << ", activations and transients " << app::FormatBytes(rank.peak_activation_memory)
              << ")\n";
  }
}

// "gradients: 2 of 4 steps clipped, 1 skipped (non-finite), ...": rank 0's records (every
// rank decides alike); with post-validation, what the verdicts undid over all ranks and the
// most each rank's undo copy held (`undo_bytes`, by rank: where this process knows them).
void PrintGradientSummary(const std::vector<std::vector<StepRecord>>& by_rank,
                          const std::vector<int64_t>& undo_bytes) {
  const std::vector<StepRecord>& records = by_rank.front();
  int clipped = 0;
  int skipped = 0;
  for (const StepRecord& r : records) {
    clipped += r.clipped ? 1 : 0;
    skipped += r.skipped ? 1 : 0;
  }
  std::cout << "gradients: " << clipped << " of " << records.size() << " steps clipped, " << skipped
            << " skipped (non-finite), by the global gradient norm over every rank\n";
  int rolled_back = 0;
  int replayed = 0;
  for (const std::vector<StepRecord>& rank : by_rank) {
    for (const StepRecord& r : rank) {
      rolled_back += r.rolled_back ? 1 : 0;
      replayed += r.replayed_forwards;
    }
  }
  if (rolled_back + replayed > 0) {
    std::cout << "post-validation: " << rolled_back << " speculative rank updates rolled back, "
              << replayed << " forwards replayed on the corrected weights\n";
  }
  if (std::any_of(undo_bytes.begin(), undo_bytes.end(), [](int64_t b) { return b > 0; })) {
    std::cout << "post-validation: undo copy of a speculative update (parameters and optimizer "
                 "state), by rank:";
    for (size_t r = 0; r < undo_bytes.size(); ++r) {
      std::cout << (r == 0 ? " " : ", ") << app::FormatBytes(static_cast<double>(undo_bytes[r]));
    }
    std::cout << "\n";
  }
}

// "split: ..." and one line per stage that measured I and W: I + W against B alone.
std::string SplitLines(const Profile& profile, const FullBackwards& full_backwards) {
  if (full_backwards.empty()) return "";
  std::string lines = "split: I + W of the steps against B timed alone after them (median of " +
                      std::to_string(kReferenceRepetitions) + " microbatches), by stage:\n";
  for (const auto& [stage, b] : full_backwards) {
    if (stage < 0 || stage >= static_cast<int>(profile.stages.size())) continue;
    const StageProfile& measured = profile.stages[stage];
    if (measured.backward_input.samples == 0 || measured.backward_weight.samples == 0) continue;
    const double i = measured.backward_input.median;
    const double w = measured.backward_weight.median;
    char line[200];
    std::snprintf(line, sizeof line,
                  "  stage %d: I %.3f ms + W %.3f ms = %.3f ms, B %.3f ms: (I + W) / B = %.3f\n",
                  stage, i * 1e3, w * 1e3, (i + w) * 1e3, b * 1e3, b > 0 ? (i + w) / b : 0.0);
    lines += line;
  }
  return lines;
}

}  // namespace

Status Report(const Plan& plan, const Options& o, const std::vector<Timeline>& steps,
              const std::vector<std::vector<StepRecord>>& records,
              const std::vector<int64_t>& undo_bytes, const FullBackwards& full_backwards,
              StepTimes times) {
  std::vector<double>& added = times.added;
  const Timeline& median = MedianStep(steps);
  std::vector<app::OutputFile> files;
  std::string split_lines;
  if (o.timeline) {
    PIPEPLAN_ASSIGN_OR_RETURN(
        std::string content,
        SerializeTimelineFile({median, plan, kMicroseconds}, DetectProtoFormat(*o.timeline, "")));
    files.push_back({*o.timeline, std::move(content)});
  }
  if (o.profile) {
    ProfileOptions options;
    options.seconds_per_unit = kMicroseconds;
    // The clock goes with the device: a GPU profile is in kernel time (CUDA events).
    const bool gpu = o.transport == TransportKind::kNccl || o.gpu >= 0;
    std::string device = gpu ? "cuda, CUDA-event times" : "cpu, host-clock times";
    if (o.serial) device += ", ranks as threads taking turns";
    options.source = std::string("pipeplan-torch ") + device + ", " +
                     Describe(o.model, plan.request.topology.num_stages());
    PIPEPLAN_ASSIGN_OR_RETURN(const Profile profile, BuildProfile(plan, steps, options));
    split_lines = SplitLines(profile, full_backwards);
    PIPEPLAN_ASSIGN_OR_RETURN(std::string content,
                              SerializeProfile(profile, DetectProtoFormat(*o.output, "")));
    files.push_back({*o.output, std::move(content)});
  }
  if (o.metrics) files.push_back({*o.metrics, StepMetricsJsonLines(records, o.warmup)});
  if (o.steps_svg) {
    PIPEPLAN_ASSIGN_OR_RETURN(
        std::string svg,
        RenderMeasuredStepsSvg(
            plan, steps, times.starts,
            {.name = o.plan_path, .first_step = o.warmup + 1, .step_barrier = o.step_barrier}));
    files.push_back({*o.steps_svg, std::move(svg)});
  }
  PIPEPLAN_RETURN_IF_ERROR(app::WriteFilesAtomic(files, /*create_parents=*/true));
  std::string how = TransportName(o.transport);
  if (o.device != "cpu") how += ", " + o.device;
  if (o.serial) how += ", one op at a time";
  char line[200];
  std::snprintf(line, sizeof line, "steps: %d warm-up + %d measured; median step %.2f ms (%s)\n",
                o.warmup, o.steps, median.metrics.makespan * kMicroseconds * 1e3, how.c_str());
  std::cout << line;
  if (!added.empty()) {
    std::sort(added.begin(), added.end());
    std::snprintf(line, sizeof line,
                  "no step barrier: each step adds a median %.2f ms to the run (%zu steps; the "
                  "median step above counts from its earliest rank's start)\n",
                  added[added.size() / 2] * kMicroseconds * 1e3, added.size());
    std::cout << line;
  }
  PrintMemory(median);
  std::cout << split_lines;
  if ((o.clip_grad_norm > 0 || o.inject_nonfinite) && !records.empty()) {
    PrintGradientSummary(records, undo_bytes);
  }
  for (const app::OutputFile& file : files) std::cout << "wrote " << file.path << "\n";
  return Status::Ok();
}

}  // namespace pipeplan::torch_ext
