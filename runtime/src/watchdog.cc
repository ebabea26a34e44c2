#include "pipeplan/runtime/watchdog.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <utility>

namespace pipeplan::runtime {
namespace {

std::string Seconds(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g s", seconds);
  return text;
}

std::string StageMb(StageId stage, const Action& comm) {
  return "stage " + std::to_string(stage.value) + " microbatch " +
         std::to_string(comm.microbatch.value);
}

bool IsActive(const ProgressSnapshot& state) {
  return state.activity != Activity::kIdle && state.activity != Activity::kDone;
}

bool IsStalled(const ProgressSnapshot& state, double timeout_seconds, TimePoint now) {
  return IsActive(state) && SecondsBetween(state.since, now) >= timeout_seconds;
}

// The comm action a stalled rank waits on, if it waits on one.
const Action* WaitedComm(const WatchedRank& rank, const ProgressSnapshot& state) {
  if (state.activity != Activity::kWaiting && state.activity != Activity::kFinishing) {
    return nullptr;
  }
  if (state.waited_index >= rank.program->actions.size()) return nullptr;
  return &rank.program->actions[state.waited_index];
}

std::string DescribeStall(const WatchedRank& rank, const ProgressSnapshot& state, TimePoint now) {
  const RankId id = rank.program->rank;
  const std::string stuck_for = Seconds(SecondsBetween(state.since, now));
  const auto& actions = rank.program->actions;
  if (const Action* comm = WaitedComm(rank, state)) {
    const std::string where = state.activity == Activity::kWaiting
                                  ? Where(id.value, state.action_index, actions[state.action_index])
                                  : "rank " + std::to_string(id.value) + ", end of step";
    return where + " waits for " + DescribeWait(*comm) + " (action " +
           std::to_string(state.waited_index) + "): nothing for " + stuck_for;
  }
  const std::string where = state.action_index < actions.size()
                                ? Where(id.value, state.action_index, actions[state.action_index])
                                : "rank " + std::to_string(id.value) + ", end of step";
  return where + " has been running for " + stuck_for;
}

}  // namespace

std::string DescribeWait(const Action& comm) {
  const std::string peer = "rank " + std::to_string(comm.peer.value);
  switch (comm.kind) {
    case ActionKind::kRecvForward:
      return "the activation of " + StageMb(StageId(comm.stage.value - 1), comm) + " from " + peer;
    case ActionKind::kRecvBackward:
      return "the gradient of " + StageMb(StageId(comm.stage.value + 1), comm) + " from " + peer;
    case ActionKind::kSendForward:
      return peer + " to take the activation of " + StageMb(comm.stage, comm);
    case ActionKind::kSendBackward:
      return peer + " to take the gradient of " + StageMb(comm.stage, comm);
    case ActionKind::kRecvPostValidation:
      return "the post-validation state from " + peer;
    case ActionKind::kSendPostValidation:
      return peer + " to take the post-validation state";
    case ActionKind::kForward:
    case ActionKind::kBackward:
    case ActionKind::kBackwardInput:
    case ActionKind::kBackwardWeight:
    case ActionKind::kOverlapFB:
    case ActionKind::kPostValidation:
      break;
  }
  return ToString(comm);
}

Status DiagnoseStall(const std::vector<WatchedRank>& ranks, double timeout_seconds, TimePoint now) {
  std::vector<ProgressSnapshot> states;
  states.reserve(ranks.size());
  for (const WatchedRank& rank : ranks) states.push_back(rank.progress->Read());

  // The first stalled rank (lowest index), then along "waits on a transfer with" to the rank
  // that holds everyone up: one inside the executor, or one waiting on a peer it cannot see.
  // The ranks further down the chain may have been stuck for less than the timeout.
  std::optional<size_t> start;
  for (size_t i = 0; i < ranks.size() && !start; ++i) {
    if (IsStalled(states[i], timeout_seconds, now)) start = i;
  }
  if (!start) return Status::Ok();

  // Follows "waits on a transfer with" from `from` while the peer is active and watched.
  auto chain_from = [&](size_t from) {
    std::vector<size_t> chain = {from};
    while (const Action* comm = WaitedComm(ranks[chain.back()], states[chain.back()])) {
      const auto next = std::find_if(ranks.begin(), ranks.end(), [&](const WatchedRank& r) {
        return r.program->rank == comm->peer;
      });
      if (next == ranks.end()) break;
      const auto next_index = static_cast<size_t>(next - ranks.begin());
      if (!IsActive(states[next_index])) break;
      if (std::find(chain.begin(), chain.end(), next_index) != chain.end()) break;  // a cycle
      chain.push_back(next_index);
    }
    return chain;
  };

  const size_t root = chain_from(*start).back();
  std::string message = "stalled: " + DescribeStall(ranks[root], states[root], now);
  // Then every rank held up by it, directly or through others, in rank order.
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i == root || !IsActive(states[i])) continue;
    const std::vector<size_t> chain = chain_from(i);
    if (std::find(chain.begin(), chain.end(), root) == chain.end()) continue;
    message += "; " + DescribeStall(ranks[i], states[i], now);
  }
  message += " (no progress for the " + Seconds(timeout_seconds) + " timeout)";
  return DeadlineExceeded(message);
}

Watchdog::Watchdog(std::vector<WatchedRank> ranks, double timeout_seconds,
                   std::function<void(const Status&)> on_stall)
    : ranks_(std::move(ranks)),
      timeout_seconds_(timeout_seconds),
      on_stall_(std::move(on_stall)),
      thread_([this](const std::stop_token& stop) { Loop(stop); }) {}

Watchdog::~Watchdog() {
  thread_.request_stop();
  wake_.notify_all();
}

void Watchdog::Loop(const std::stop_token& stop) {
  // A few polls per timeout keep the report within ~25% of it, at negligible cost.
  const double poll = std::clamp(timeout_seconds_ / 4, 0.001, 0.25);
  std::unique_lock lock(mutex_);
  while (!stop.stop_requested()) {
    wake_.wait_for(lock, stop, std::chrono::duration<double>(poll), [] { return false; });
    if (stop.stop_requested()) return;
    const Status stall = DiagnoseStall(ranks_, timeout_seconds_, Clock::now());
    if (!stall.ok()) {
      on_stall_(stall);
      return;
    }
  }
}

}  // namespace pipeplan::runtime
