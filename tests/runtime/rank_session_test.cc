// A rank's session in a process of its own (threads here, each with its coordinator):
// the steps, the transport released before anything is exchanged, the front end's hooks,
// rank 0's report on every rank's steps, and a failing report returned after all left.
#include "pipeplan/runtime/rank_session.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "pipeplan/planner/planner.h"
#include "pipeplan/runtime/inproc_transport.h"
#include "pipeplan/runtime/synthetic_executor.h"
#include "runtime_test_support.h"

namespace pipeplan::runtime {
namespace {

using std::chrono::milliseconds;
using testing::RuntimeRequest;

// A transport that says when it is gone.
class ReleasedTransport : public Transport {
 public:
  ReleasedTransport(std::unique_ptr<Transport> inner, std::atomic<bool>* released)
      : inner_(std::move(inner)), released_(released) {}
  ~ReleasedTransport() override { *released_ = true; }
  RankId rank() const override { return inner_->rank(); }
  int world_size() const override { return inner_->world_size(); }
  StatusOr<std::vector<std::unique_ptr<PendingOp>>> Post(std::span<const P2POp> ops) override {
    return inner_->Post(ops);
  }
  void Abort(const Status& reason) override { inner_->Abort(reason); }

 private:
  std::unique_ptr<Transport> inner_;
  std::atomic<bool>* released_;
};

struct Session {
  Status returned;
  bool released_before_publish = false;
  int reports = 0;
  GatheredSteps gathered;
  std::string peer_record;  // what rank 0's report read of rank 1's published record
};

// Every rank's session on threads; `report_status` is what rank 0's report returns.
std::vector<Session> RunSessions(const Plan& plan, int steps, const Status& report_status) {
  const int ranks = plan.request.topology.ranks;
  std::vector<std::unique_ptr<Transport>> transports = MakeInProcTransports(ranks);
  const std::vector<std::unique_ptr<Coordinator>> coordinators = MakeInProcCoordinators(ranks);
  std::vector<Session> out(ranks);
  std::vector<std::atomic<bool>> released(ranks);
  std::vector<std::jthread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      SyntheticExecutor executor(plan, RankId(r), SyntheticOptions{.seconds_per_unit = 1e-4});
      RankSessionOptions options;
      options.run.steps = steps;
      options.run.warmup = 1;
      options.run.timeout_seconds = 5;
      options.run.seconds_per_unit = 1e-4;
      options.world_size = ranks;
      options.timeout = milliseconds(5000);
      Session& session = out[r];
      options.publish = [&, r](Coordinator& coordinator) {
        session.released_before_publish = released[r];
        return coordinator.Put("record/" + std::to_string(r), "rank " + std::to_string(r));
      };
      options.report = [&](Coordinator& coordinator, const GatheredSteps& gathered) {
        ++session.reports;
        session.gathered = gathered;
        StatusOr<std::string> peer = coordinator.Get("record/1", milliseconds(5000));
        if (peer.ok()) session.peer_record = *peer;
        return report_status;
      };
      auto transport = std::make_unique<ReleasedTransport>(std::move(transports[r]), &released[r]);
      session.returned = RunRankSession(plan, RankId(r), executor, std::move(transport),
                                        /*timer=*/nullptr, *coordinators[r], std::move(options));
    });
  }
  threads.clear();
  return out;
}

TEST(RankSession, RankZeroReportsEveryRanksStepsAfterEachReleasedItsTransport) {
  const StatusOr<Plan> plan = BuildPlan(RuntimeRequest({"1f1b", false}, 3, 6, 0.0));
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  const std::vector<Session> run = RunSessions(*plan, 2, Status::Ok());
  for (size_t r = 0; r < run.size(); ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_TRUE(run[r].returned.ok()) << run[r].returned.message();
    EXPECT_TRUE(run[r].released_before_publish);
    EXPECT_EQ(run[r].reports, r == 0 ? 1 : 0);
  }
  ASSERT_EQ(run[0].gathered.steps.size(), 2u);
  for (const Timeline& step : run[0].gathered.steps) {
    ASSERT_EQ(step.ranks.size(), 3u);
    for (const RankTimeline& rank : step.ranks) EXPECT_FALSE(rank.actions.empty());
  }
  // With a barrier before each step the run's added times are not gathered.
  EXPECT_TRUE(run[0].gathered.added.empty());
  EXPECT_EQ(run[0].peer_record, "rank 1");
}

TEST(RankSession, AFailingReportIsRankZerosAndTheOthersLeaveCleanly) {
  const StatusOr<Plan> plan = BuildPlan(RuntimeRequest({"1f1b", false}, 2, 4, 0.0));
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  const std::vector<Session> run =
      RunSessions(*plan, 1, Internal("the report could not be written"));
  EXPECT_EQ(run[0].returned.message(), "the report could not be written");
  EXPECT_TRUE(run[1].returned.ok()) << run[1].returned.message();
}

}  // namespace
}  // namespace pipeplan::runtime
