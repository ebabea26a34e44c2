// Plan and Action <-> pipeplan.v1.
#include <cmath>
#include <string>
#include <utility>

#include "pipeplan/model/text_format.h"
#include "proto_convert.h"

namespace pipeplan {
namespace proto_convert {

void ToProto(const Action& action, v1::Action* out) {
  out->set_kind(kActionKinds.ToProto(action.kind));
  out->set_stage(action.stage.value);
  out->set_microbatch(action.microbatch.value);
  out->set_peer(action.peer.value);
  out->set_rollback(action.rollback);
  for (const Action& sub : action.sub_actions) ToProto(sub, out->add_sub_actions());
}

void ToProto(const Plan& plan, v1::Plan* out) {
  ToProto(plan.request, out->mutable_request());
  for (const RankProgram& program : plan.programs) {
    v1::RankProgram* entry = out->add_programs();
    entry->set_rank(program.rank.value);
    for (const Action& action : program.actions) ToProto(action, entry->add_actions());
  }
  v1::Provenance* provenance = out->mutable_provenance();
  provenance->set_tool_version(plan.provenance.tool_version);
  provenance->set_strategy(plan.provenance.strategy);
  provenance->set_options(plan.provenance.options);
  provenance->set_solver_status(plan.provenance.solver_status);
  provenance->set_proven_bound(plan.provenance.proven_bound);
}

bool IsPostValidation(ActionKind kind) {
  return kind == ActionKind::kPostValidation || kind == ActionKind::kSendPostValidation ||
         kind == ActionKind::kRecvPostValidation;
}

bool IsBackwardKind(ActionKind kind) {
  return kind == ActionKind::kBackward || kind == ActionKind::kBackwardInput ||
         kind == ActionKind::kBackwardWeight;
}

// `topology` is the plan's own: the ids an action may refer to.
StatusOr<Action> FromProto(const v1::Action& proto, const Topology& topology,
                           const std::string& path);

// An overlap cell is exactly {forward, backward}; anything else has no sub-actions.
Status ConvertSubActions(const v1::Action& proto, const Topology& topology, const std::string& path,
                         Action* action) {
  const std::string sub_path = Child(path, "sub_actions");
  if (action->kind != ActionKind::kOverlapFB) {
    if (proto.sub_actions().empty()) return Status::Ok();
    return FieldError(sub_path, "only OVERLAP_F_B actions have sub-actions");
  }
  if (proto.sub_actions_size() != 2) {
    return FieldError(sub_path,
                      "an OVERLAP_F_B action needs 2 sub-actions (forward, backward), got " +
                          std::to_string(proto.sub_actions_size()));
  }
  for (int i = 0; i < 2; ++i) {
    PIPEPLAN_ASSIGN_OR_RETURN(Action sub,
                              FromProto(proto.sub_actions(i), topology, Element(sub_path, i)));
    action->sub_actions.push_back(std::move(sub));
  }
  if (action->sub_actions[0].kind != ActionKind::kForward) {
    return FieldError(Child(Element(sub_path, 0), "kind"),
                      "expected FORWARD, got " + v1::ActionKind_Name(proto.sub_actions(0).kind()));
  }
  if (!IsBackwardKind(action->sub_actions[1].kind)) {
    return FieldError(Child(Element(sub_path, 1), "kind"),
                      "expected BACKWARD, BACKWARD_INPUT or BACKWARD_WEIGHT, got " +
                          v1::ActionKind_Name(proto.sub_actions(1).kind()));
  }
  return Status::Ok();
}

StatusOr<Action> FromProto(const v1::Action& proto, const Topology& topology,
                           const std::string& path) {
  if (proto.kind() == v1::ACTION_KIND_UNSPECIFIED) {
    return FieldError(Child(path, "kind"), "unspecified action kind");
  }
  const std::optional<ActionKind> kind = kActionKinds.FromProto(proto.kind());
  if (!kind.has_value()) {
    return FieldError(Child(path, "kind"), "unknown action kind " + std::to_string(proto.kind()));
  }
  Action action;
  action.kind = *kind;
  PIPEPLAN_RETURN_IF_ERROR(CheckIndex(proto.stage(), topology.num_stages(), Child(path, "stage")));
  action.stage = StageId(proto.stage());
  // PV actions carry no microbatch and compute actions no peer: only their sign is checked.
  PIPEPLAN_RETURN_IF_ERROR(
      IsPostValidation(*kind)
          ? CheckAtLeast(proto.microbatch(), 0, Child(path, "microbatch"))
          : CheckIndex(proto.microbatch(), topology.microbatches, Child(path, "microbatch")));
  action.microbatch = MicrobatchId(proto.microbatch());
  PIPEPLAN_RETURN_IF_ERROR(IsComm(*kind)
                               ? CheckIndex(proto.peer(), topology.ranks, Child(path, "peer"))
                               : CheckAtLeast(proto.peer(), 0, Child(path, "peer")));
  action.peer = RankId(proto.peer());
  if (proto.rollback() && *kind != ActionKind::kRecvForward) {
    return FieldError(Child(path, "rollback"), "only RECV_F actions carry the rollback flag");
  }
  action.rollback = proto.rollback();
  PIPEPLAN_RETURN_IF_ERROR(ConvertSubActions(proto, topology, path, &action));
  return action;
}

StatusOr<Plan> FromProto(const v1::Plan& proto) {
  Plan plan;
  PIPEPLAN_ASSIGN_OR_RETURN(plan.request, FromProto(proto.request(), "request"));
  const Topology& topology = plan.request.topology;
  // A plan is a finished artifact: its costs must fit its own topology, or simulating it
  // would index past the per-stage tables.
  PIPEPLAN_RETURN_IF_ERROR(
      ValidateCostModel(plan.request.costs, topology.num_stages()).WithContext("request"));
  PIPEPLAN_RETURN_IF_ERROR(
      ValidateMemoryModel(plan.request.memory, topology.num_stages()).WithContext("request"));
  PIPEPLAN_RETURN_IF_ERROR(
      ValidateStaticByRank(plan.request.memory, topology.ranks).WithContext("request"));
  if (proto.programs_size() != topology.ranks) {
    return FieldError("programs", "expected " + std::to_string(topology.ranks) +
                                      " rank programs (request.topology.ranks), got " +
                                      std::to_string(proto.programs_size()));
  }
  for (int r = 0; r < proto.programs_size(); ++r) {
    const v1::RankProgram& program = proto.programs(r);
    const std::string path = Element("programs", r);
    if (program.rank() != r) {
      return FieldError(Child(path, "rank"), "expected " + std::to_string(r) +
                                                 " (programs are listed in rank order), got " +
                                                 std::to_string(program.rank()));
    }
    RankProgram& out = plan.programs.emplace_back();
    out.rank = RankId(r);
    for (int i = 0; i < program.actions_size(); ++i) {
      PIPEPLAN_ASSIGN_OR_RETURN(Action action, FromProto(program.actions(i), topology,
                                                         Element(Child(path, "actions"), i)));
      out.actions.push_back(std::move(action));
    }
  }
  plan.provenance.tool_version = proto.provenance().tool_version();
  plan.provenance.strategy = proto.provenance().strategy();
  plan.provenance.options = proto.provenance().options();
  plan.provenance.solver_status = proto.provenance().solver_status();
  plan.provenance.proven_bound = proto.provenance().proven_bound();
  if (!std::isfinite(plan.provenance.proven_bound) || plan.provenance.proven_bound < 0) {
    return FieldError("provenance.proven_bound", "expected a finite number >= 0, got " +
                                                     FormatNumber(plan.provenance.proven_bound));
  }
  return plan;
}

}  // namespace proto_convert

StatusOr<std::string> SerializePlan(const Plan& plan, ProtoFormat format) {
  v1::Plan proto;
  proto_convert::ToProto(plan, &proto);
  proto_convert::StampFile(FileKind::kPlan, &proto);
  return proto_convert::Serialize(proto, format);
}

StatusOr<Plan> ParsePlan(std::string_view data, ProtoFormat format) {
  return proto_convert::ParseAs<v1::Plan>(
      data, format, FileKind::kPlan, "plan file",
      [](const v1::Plan& proto) { return proto_convert::FromProto(proto); });
}

}  // namespace pipeplan
