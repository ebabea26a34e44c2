// The cost model the planning benches share: uniform unit costs (F = 1, B = 2, I = W = 1) and
// a small comm latency, so their figures are comparable with each other.
#pragma once

#include "pipeplan/model/cost_model.h"

namespace pipeplan::bench {

inline CostModel UnitCosts() {
  CostModel costs;
  StageCosts stage;
  stage.forward = 1.0;
  stage.backward = 2.0;
  stage.backward_input = 1.0;
  stage.backward_weight = 1.0;
  costs.stages = {stage};
  BoundaryCosts boundary;
  boundary.latency = 0.05;
  costs.boundaries = {boundary};
  return costs;
}

}  // namespace pipeplan::bench
