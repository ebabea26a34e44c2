#include "post_validation_check.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "pipeplan/model/plan_util.h"

namespace pipeplan {
namespace {

class PostValidationChecker {
 public:
  explicit PostValidationChecker(const Plan& plan) : plan_(plan), stages_(plan.request.topology) {}

  Status Check() const {
    const bool any = HasPostValidation(plan_);
    for (size_t r = 0; r < plan_.programs.size(); ++r) {
      PIPEPLAN_RETURN_IF_ERROR(any ? CheckRank(static_cast<int>(r))
                                   : CheckNoPv(static_cast<int>(r)));
    }
    return any ? CheckRollbacks() : Status::Ok();
  }

 private:
  Status CheckNoPv(int rank) const {
    const auto& actions = plan_.programs[rank].actions;
    for (size_t i = 0; i < actions.size(); ++i) {
      if (actions[i].kind == ActionKind::kSendPostValidation ||
          actions[i].kind == ActionKind::kRecvPostValidation) {
        return InvalidArgument(Where(rank, i, actions[i]) +
                               ": post-validation comm without any PV action");
      }
      if (actions[i].rollback) {
        return InvalidArgument(Where(rank, i, actions[i]) +
                               ": rollback flag in a plan without post-validation");
      }
    }
    return Status::Ok();
  }

  Status CheckRank(int rank) const {
    const auto& actions = plan_.programs[rank].actions;
    const int last = static_cast<int>(plan_.programs.size()) - 1;
    const StageId chunk_zero = stages_.StagesOf(RankId(rank))[0];
    int receives = 0, sends = 0, validations = 0;
    for (size_t i = 0; i < actions.size(); ++i) {
      const Action& a = actions[i];
      const auto where = [&] { return Where(rank, i, a); };
      switch (a.kind) {
        case ActionKind::kRecvPostValidation:
          ++receives;
          if (validations > 0)
            return InvalidArgument(where() + ": receives the validation state after PV");
          break;
        case ActionKind::kSendPostValidation:
          ++sends;
          if (validations > 0)
            return InvalidArgument(where() + ": forwards the validation state after PV");
          break;
        case ActionKind::kPostValidation:
          ++validations;
          if (validations > 1) return InvalidArgument(where() + ": second PV on this rank");
          break;
        case ActionKind::kRecvForward:
          break;
        case ActionKind::kForward:
        case ActionKind::kSendForward:
          if (validations == 0 && rank != last && a.stage != chunk_zero) {
            return InvalidArgument(where() + ": only chunk-0 forwards may run before PV");
          }
          break;
        case ActionKind::kBackward:
        case ActionKind::kBackwardInput:
        case ActionKind::kBackwardWeight:
        case ActionKind::kOverlapFB:
        case ActionKind::kSendBackward:
        case ActionKind::kRecvBackward:
          if (validations == 0)
            return InvalidArgument(where() + ": only forwards may run before PV");
          break;
      }
    }
    const std::string name = "rank " + std::to_string(rank);
    if (validations != 1)
      return InvalidArgument(name + " has no PV action while other ranks have one");
    if (receives != (rank < last ? 1 : 0)) {
      return InvalidArgument(
          name + (rank < last ? " must receive the validation state (RECV_PV) once"
                              : " is the last rank and must not receive the validation state"));
    }
    if (sends != (rank > 0 ? 1 : 0)) {
      return InvalidArgument(name + (rank > 0
                                         ? " must forward the validation state (SEND_PV) once"
                                         : " is rank 0 and must not forward the validation state"));
    }
    return Status::Ok();
  }

  Status CheckRollbacks() const {
    for (size_t r = 0; r < plan_.programs.size(); ++r) {
      std::vector<int> early;  // microbatches rank r-1 sent to us before its PV
      if (r > 0) {
        for (const Action& a : plan_.programs[r - 1].actions) {
          if (a.kind == ActionKind::kPostValidation) break;
          if (a.kind == ActionKind::kSendForward && a.peer == RankId(static_cast<int>(r)))
            early.push_back(a.microbatch.value);
        }
      }
      const StageId chunk_zero = stages_.StagesOf(RankId(static_cast<int>(r)))[0];
      const auto& actions = plan_.programs[r].actions;
      for (size_t i = 0; i < actions.size(); ++i) {
        const Action& a = actions[i];
        const bool should =
            a.kind == ActionKind::kRecvForward && a.stage == chunk_zero &&
            std::find(early.begin(), early.end(), a.microbatch.value) != early.end();
        if (a.rollback != should) {
          return InvalidArgument(
              Where(static_cast<int>(r), i, a) +
              (should ? ": must be tagged rollback (its send precedes the sender's PV)"
                      : ": tagged rollback but its send does not precede the sender's PV"));
        }
      }
    }
    return Status::Ok();
  }

  const Plan& plan_;
  StageMap stages_;
};

}  // namespace

Status CheckPostValidation(const Plan& plan) { return PostValidationChecker(plan).Check(); }

}  // namespace pipeplan
