// Measured ranks in separate processes each start their step clock when they leave the
// step's barrier, and those moments differ (by ~0.1 ms over a TCP store), so a receive can
// appear to end before its send started. AlignRankClocks corrects that skew with the least
// later shift per rank that makes every transfer causal.
#pragma once

#include <vector>

#include "pipeplan/model/plan.h"
#include "pipeplan/model/timeline.h"

namespace pipeplan {

// `ranks` is index-aligned with plan.programs and each RankTimeline with its program. Adds to
// every time of rank r the smallest offset d_r >= 0 such that, for every transfer,
// receive end + d_receiver >= send start + d_sender (the k-th send on a link pairs with the
// k-th receive on it). Returns the offsets. Constraints that cannot all hold (a cycle of
// transfers that would need ever larger shifts) leave the times as they are, offsets all 0.
std::vector<double> AlignRankClocks(const Plan& plan, std::vector<RankTimeline>& ranks);

}  // namespace pipeplan
