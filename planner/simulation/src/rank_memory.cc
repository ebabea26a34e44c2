#include "rank_memory.h"

#include <limits>
#include <vector>

#include "pipeplan/model/plan_util.h"
#include "pipeplan/model/stage_mb_table.h"
#include "pipeplan/simulation/memory_tracker.h"

namespace pipeplan {
namespace {

// When each stage's input gradient, sent to another rank, landed there (the end of the RECV_B
// that took it), by the sending stage; never, where nothing took it.
StageMbTable<double> CollectGradientLandings(const std::vector<RankProgram>& programs,
                                             const std::vector<RankTimeline>& ranks,
                                             const Topology& topology) {
  StageMbTable<double> landed(topology.num_stages(), topology.microbatches,
                              std::numeric_limits<double>::infinity());
  for (size_t r = 0; r < programs.size(); ++r) {
    const std::vector<Action>& actions = programs[r].actions;
    for (size_t i = 0; i < actions.size(); ++i) {
      const Action& a = actions[i];
      const StageId sender(a.stage.value + 1);
      if (a.kind != ActionKind::kRecvBackward || !landed.Contains(sender, a.microbatch)) continue;
      landed.At(sender, a.microbatch) = ranks[r].actions[i].end;
    }
  }
  return landed;
}

// A receive's message, allocated where the rank posts the receive: after the compute before
// it, which may be well before its consumer (the comm order that no rendezvous can deadlock
// puts some receives early). Its consumer counts it from its own start.
struct PostedReceive {
  ActionKind kind;  // RECV_F or RECV_B
  StageId stage;
  MicrobatchId microbatch;
  double bytes;

  bool ConsumedBy(const Action& part) const {
    if (part.stage != stage || part.microbatch != microbatch) return false;
    if (kind == ActionKind::kRecvForward) return part.kind == ActionKind::kForward;
    return part.kind == ActionKind::kBackward || part.kind == ActionKind::kBackwardInput;
  }
};

// The rank's memory over the step: what its compute holds (RankMemoryTracker), the messages
// of receives posted ahead of their consumers, less each gradient it sent from the first op
// that starts once the gradient landed, where the runtime frees a buffer whose send completed
// (OpExecutor::SendCompleted); `holds_to_step_end` (torch's runtime, which clears its stages'
// state when the step ends): never within the step.
void TrackMemory(const RankProgram& program, const MemoryChangeTable& changes,
                 const StageMbTable<double>& gradient_landed, double static_memory,
                 bool holds_to_step_end, RankTimeline& out) {
  out.memory.reserve(3 * program.actions.size() + 1);
  RankMemoryTracker tracker(changes);
  out.memory.push_back({0.0, static_memory});
  struct Sent {
    double landed;
    double bytes;
  };
  std::vector<Sent> sent;
  std::vector<PostedReceive> posted;
  for (size_t i = 0; i < program.actions.size(); ++i) {
    const Action& action = program.actions[i];
    const ActionTiming& t = out.actions[i];
    if (action.kind == ActionKind::kSendBackward && !holds_to_step_end &&
        gradient_landed.Contains(action.stage, action.microbatch)) {
      sent.push_back(
          {gradient_landed.At(action.stage, action.microbatch), changes.Retained(action.stage)});
    }
    if (action.kind == ActionKind::kRecvForward || action.kind == ActionKind::kRecvBackward) {
      const double bytes = changes.ReceivedMessage(action.kind, action.stage);
      if (bytes > 0) {
        posted.push_back({action.kind, action.stage, action.microbatch, bytes});
        tracker.Hold(bytes);
        out.memory.push_back({t.start, static_memory + tracker.held()});
      }
    }
    if (!IsCompute(action.kind)) continue;
    std::erase_if(sent, [&](const Sent& s) {
      if (s.landed > t.start) return false;
      tracker.Release(s.bytes);
      return true;
    });
    for (const Action* part : ComputeParts(action)) {
      std::erase_if(posted, [&](const PostedReceive& p) {
        if (!p.ConsumedBy(*part)) return false;
        tracker.Release(p.bytes);
        return true;
      });
    }
    tracker.Start(action);
    out.memory.push_back({t.start, static_memory + tracker.held()});
    if (tracker.top() > tracker.held()) {
      out.memory.push_back({(t.start + t.end) / 2, static_memory + tracker.top()});
    }
    tracker.End(action);
    out.memory.push_back({t.end, static_memory + tracker.held()});
  }
  out.peak_activation_memory = tracker.peak();
  out.peak_memory = static_memory + tracker.peak();
  out.memory_unit = changes.memory().unit;
}

}  // namespace

void TrackRankMemory(const std::vector<RankProgram>& programs, const MemoryModel& memory,
                     const Topology& topology, bool holds_to_step_end,
                     std::vector<RankTimeline>& ranks) {
  const MemoryChangeTable changes(memory, topology);
  const StageMbTable<double> landed = CollectGradientLandings(programs, ranks, topology);
  const StageMap map(topology);
  for (size_t r = 0; r < programs.size(); ++r) {
    TrackMemory(programs[r], changes, landed, memory.StaticOf(RankId(static_cast<int>(r)), map),
                holds_to_step_end, ranks[r]);
  }
}

}  // namespace pipeplan
