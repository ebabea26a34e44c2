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

bool NoProgressFor(const ProgressSnapshot& state, double timeout_seconds, TimePoint now) {
  return SecondsBetween(state.since, now) >= timeout_seconds;
}

// The comm action a rank waits on, if it waits on one.
const Action* WaitedComm(const WatchedRank& rank, const ProgressSnapshot& state) {
  if (state.activity != Activity::kWaiting && state.activity != Activity::kFinishing) {
    return nullptr;
  }
  if (state.waited_index >= rank.program->actions.size()) return nullptr;
  return &rank.program->actions[state.waited_index];
}

// "rank 1, action 7 (1F2)", or where in the step a rank is outside its actions.
std::string Position(const WatchedRank& rank, const ProgressSnapshot& state) {
  const RankId id = rank.program->rank;
  std::string name = "rank " + std::to_string(id.value);
  switch (state.activity) {
    case Activity::kBeginning:
      return name + ", start of step (the executor's BeginStep)";
    case Activity::kEnding:
      return name + ", end of step (the executor's EndStep)";
    case Activity::kFinishing:
      return name + ", end of step";
    case Activity::kExchanging:
      return name + ", end of step (the gradient-state exchange)";
    case Activity::kMirroring:
      return name + ", end of step (the sum of the two model copies' gradients)";
    case Activity::kRunning:
    case Activity::kWaiting:
      if (state.action_index < rank.program->actions.size()) {
        return Where(id.value, state.action_index, rank.program->actions[state.action_index]);
      }
      return name;
    case Activity::kIdle:
    case Activity::kDone:
      break;
  }
  return name;
}

std::string DescribeStall(const WatchedRank& rank, const ProgressSnapshot& state, TimePoint now) {
  const std::string stuck_for = Seconds(SecondsBetween(state.since, now));
  if (const Action* comm = WaitedComm(rank, state)) {
    return Position(rank, state) + " waits for " + DescribeWait(*comm) + " (action " +
           std::to_string(state.waited_index) + "): nothing for " + stuck_for;
  }
  if (state.activity == Activity::kExchanging) {
    return Position(rank, state) + " waits for every rank's gradient state: nothing for " +
           stuck_for;
  }
  if (state.activity == Activity::kMirroring) {
    return Position(rank, state) + " waits for the gradients of rank " +
           std::to_string(state.waited_index) + ": nothing for " + stuck_for;
  }
  return Position(rank, state) + " has been running for " + stuck_for;
}

// The ranks `from` waits on, one after the other, while each is watched and active: the last
// one is what holds `from` up. `cycle` is set when the waits lead back into the chain.
struct WaitChain {
  std::vector<size_t> ranks;
  bool cycle = false;
};

// Whether a rank is still inside its step's actions (not yet at the exchange or past it).
bool InActions(const ProgressSnapshot& state) {
  switch (state.activity) {
    case Activity::kBeginning:
    case Activity::kRunning:
    case Activity::kWaiting:
    case Activity::kFinishing:
      return true;
    case Activity::kIdle:
    case Activity::kExchanging:
    case Activity::kMirroring:
    case Activity::kEnding:
    case Activity::kDone:
      break;
  }
  return false;
}

// The watched rank that `from` waits on: the peer of the transfer it waits for, or its
// mirror; in the gradient-state exchange, which waits for every rank, the first still in its
// actions.
std::optional<size_t> WaitedRank(size_t from, const std::vector<WatchedRank>& ranks,
                                 const std::vector<ProgressSnapshot>& states) {
  if (states[from].activity == Activity::kExchanging) {
    for (size_t i = 0; i < ranks.size(); ++i) {
      if (i != from && InActions(states[i])) return i;
    }
    return std::nullopt;
  }
  std::optional<RankId> peer;
  if (states[from].activity == Activity::kMirroring) {
    peer = RankId(static_cast<int>(states[from].waited_index));
  } else if (const Action* comm = WaitedComm(ranks[from], states[from])) {
    peer = comm->peer;
  }
  if (!peer) return std::nullopt;
  const auto next = std::find_if(ranks.begin(), ranks.end(),
                                 [&](const WatchedRank& r) { return r.program->rank == *peer; });
  if (next == ranks.end()) return std::nullopt;  // a peer this watchdog cannot see
  return static_cast<size_t>(next - ranks.begin());
}

WaitChain ChainFrom(size_t from, const std::vector<WatchedRank>& ranks,
                    const std::vector<ProgressSnapshot>& states) {
  WaitChain chain{{from}, false};
  while (const std::optional<size_t> next = WaitedRank(chain.ranks.back(), ranks, states)) {
    const size_t next_index = *next;
    if (!IsActive(states[next_index])) break;
    if (std::find(chain.ranks.begin(), chain.ranks.end(), next_index) != chain.ranks.end()) {
      chain.cycle = true;
      break;
    }
    chain.ranks.push_back(next_index);
  }
  return chain;
}

// A chain is stalled when its end has made no progress for the timeout: ranks waiting on a
// busy, progressing peer are not. In a cycle of waits (a deadlock) every rank waits on
// another, so it is stalled once all of them have waited for the timeout.
bool IsStalled(const WaitChain& chain, const std::vector<ProgressSnapshot>& states,
               double timeout_seconds, TimePoint now) {
  if (!chain.cycle) return NoProgressFor(states[chain.ranks.back()], timeout_seconds, now);
  return std::all_of(chain.ranks.begin(), chain.ranks.end(),
                     [&](size_t r) { return NoProgressFor(states[r], timeout_seconds, now); });
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

  // The first stalled chain, in rank order of where it starts; its end is the rank that
  // holds everyone up.
  std::optional<size_t> root;
  for (size_t i = 0; i < ranks.size() && !root; ++i) {
    if (!IsActive(states[i])) continue;
    const WaitChain chain = ChainFrom(i, ranks, states);
    if (IsStalled(chain, states, timeout_seconds, now)) root = chain.ranks.back();
  }
  if (!root) return Status::Ok();

  std::string message = "stalled: " + DescribeStall(ranks[*root], states[*root], now);
  // Then every rank held up by it, directly or through others, in rank order.
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i == *root || !IsActive(states[i])) continue;
    const std::vector<size_t> chain = ChainFrom(i, ranks, states).ranks;
    if (std::find(chain.begin(), chain.end(), *root) == chain.end()) continue;
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
