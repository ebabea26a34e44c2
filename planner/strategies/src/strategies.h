// Generators of the strategy catalogue (one file each). Each returns the compute-only order
// per rank; the registry (strategy_registry.cc) lists them with their constraints.
#pragma once

#include "pipeplan/model/plan.h"
#include "pipeplan/model/topology.h"

namespace pipeplan::strategies {

StatusOr<ComputeOrder> GenerateGpipe(const PlanRequest& request, const StageMap& stages);
StatusOr<ComputeOrder> GenerateOneFOneB(const PlanRequest& request, const StageMap& stages);
StatusOr<ComputeOrder> GenerateInterleaved1F1B(const PlanRequest& request, const StageMap& stages);
StatusOr<ComputeOrder> GenerateLoopedBfs(const PlanRequest& request, const StageMap& stages);
StatusOr<ComputeOrder> GenerateZbH1(const PlanRequest& request, const StageMap& stages);
StatusOr<ComputeOrder> GenerateZbH2(const PlanRequest& request, const StageMap& stages);
StatusOr<ComputeOrder> GenerateInterleavedZb(const PlanRequest& request, const StageMap& stages);
StatusOr<ComputeOrder> GenerateZbvHandcrafted(const PlanRequest& request, const StageMap& stages);
StatusOr<ComputeOrder> GenerateDualPipe(const PlanRequest& request, const StageMap& stages);
StatusOr<ComputeOrder> GenerateDualPipeV(const PlanRequest& request, const StageMap& stages);
StatusOr<ComputeOrder> GenerateOneFOneBOverlap(const PlanRequest& request, const StageMap& stages);
StatusOr<ComputeOrder> GenerateInterleaved1F1BOverlap(const PlanRequest& request,
                                                      const StageMap& stages);
// Greedy heuristics under a memory limit (request.memory.limit, or the preset's).
StatusOr<ComputeOrder> GenerateZb(const PlanRequest& request, const StageMap& stages);
StatusOr<ComputeOrder> GenerateZb1p(const PlanRequest& request, const StageMap& stages);
StatusOr<ComputeOrder> GenerateZb2p(const PlanRequest& request, const StageMap& stages);
StatusOr<ComputeOrder> GenerateZbv(const PlanRequest& request, const StageMap& stages);
// The smallest memory limit (per rank) with which the greedy ones plan the request.
StatusOr<double> SmallestZbLimit(const PlanRequest& request, const StageMap& stages);
StatusOr<double> SmallestZbvLimit(const PlanRequest& request, const StageMap& stages);
StatusOr<ComputeOrder> GenerateVHalf(const PlanRequest& request, const StageMap& stages);
StatusOr<ComputeOrder> GenerateVMin(const PlanRequest& request, const StageMap& stages);

}  // namespace pipeplan::strategies
