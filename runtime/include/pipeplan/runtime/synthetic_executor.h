// Synthetic executor: holds every compute action for its modelled duration (plan costs times
// a time scale) on the steady clock, and models transfers too: a message carries the time its
// data would land (sent + latency + bytes / bandwidth), and its consumer waits for that and
// for the receive overhead counted from the end of the rank's previous compute. Its op spans
// put transfers where the simulator does: a SEND from its post until its data lands, a RECV
// from its post until the data lands (and at least the receive overhead). It measures the
// runtime's overhead and the simulator's fidelity without a GPU, and every message it
// receives is checked to be the one the consumer expects.
#pragma once

#include <array>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "pipeplan/model/plan.h"
#include "pipeplan/model/topology.h"
#include "pipeplan/runtime/op_executor.h"

namespace pipeplan::runtime {

struct SyntheticOptions {
  double seconds_per_unit = 0.001;  // wall-clock seconds per unit of the plan's costs
  size_t message_bytes = 64;        // size of every message (at least the 40-byte header)
  // The step (from 0) whose post-validation fails, as a clipped or skipped step's would: the
  // runtime drains the stale messages and runs the forwards before the PV again. -1: none.
  int fail_validation_at = -1;
  // > 0: the optimizer's global check (clip to a global norm, skip a non-finite step) is
  // modelled: every step ends with the gradient-state exchange, and a synchronous update
  // then holds this many units, as the check's all-reduce would; a speculative one
  // (post-validation) does not wait for it.
  double check_units = 0.0;
};

// It models its op times (its meter reports them) and, with check_units, the gradient-state
// exchange.
class SyntheticExecutor final : public OpExecutor, public OpMeter, public GradientExchange {
 public:
  // `plan` (its costs and topology) must outlive the executor.
  SyntheticExecutor(const Plan& plan, RankId rank, const SyntheticOptions& options);

  Status BeginStep(const OpContext& context) override;
  Status Run(const Action& action, const OpContext& context) override;
  StatusOr<std::span<std::byte>> SendBuffer(const Action& send, const OpContext& context) override;
  StatusOr<std::span<std::byte>> RecvBuffer(const Action& recv, const OpContext& context) override;
  Status EndStep(const OpContext& context) override;
  StatusOr<Verdict> Validate(const Action& pv, const OpContext& context) override;
  OpMeter* meter() override { return this; }
  GradientExchange* gradient_exchange() override { return this; }

  bool ExchangesGradientState() const override { return options_.check_units > 0; }
  StatusOr<std::span<std::byte>> GradientStateBuffer(RankId rank,
                                                     const OpContext& context) override;
  std::vector<OpSpan> TakeOpSpans() override;

 private:
  struct PostedRecv {
    size_t action_index;
    TimePoint at;
  };

  std::vector<std::byte>* Slot(ActionKind kind, StageId stage, MicrobatchId mb);
  // Checks the message a compute part consumes, if it came from another rank; raises
  // `ready` to when its data lands and to `free_since_` plus the boundary's receive overhead,
  // and records its RECV's span.
  Status CheckInput(const Action& part, TimePoint& ready);
  // Sleeps until `until`, or returns Aborted once `context.stop` is requested.
  Status HoldUntil(TimePoint until, const OpContext& context);

  const Plan& plan_;
  StageMap stages_;
  RankId rank_;
  SyntheticOptions options_;
  int step_ = 0;
  // When the previous compute action ended (the step's start before the first): where the
  // runtime posts the receives of the next one, and where the simulator counts their receive
  // overhead from.
  TimePoint free_since_;
  std::unordered_map<uint64_t, std::vector<std::byte>> slots_;  // one buffer per comm key
  std::vector<OpSpan> spans_;  // compute actions, and transfers as the simulator draws them
  std::unordered_map<uint64_t, PostedRecv> posted_;  // this step's receives, by comm key
  std::vector<std::array<double, 2>> states_;        // the gradient-state rows, one per rank
  std::mutex hold_mutex_;
  std::condition_variable_any hold_;
};

}  // namespace pipeplan::runtime
