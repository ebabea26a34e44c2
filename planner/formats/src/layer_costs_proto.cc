// LayerCosts <-> pipeplan.v1. Parsing checks the result with ValidateLayerCosts.
#include <optional>
#include <string>

#include "pipeplan/formats/proto_io.h"
#include "proto_convert.h"

namespace pipeplan {
namespace {

void ToProto(const LayerFigures& layer, v1::Layer* out) {
  out->set_name(layer.name);
  if (layer.forward.has_value()) out->set_forward(*layer.forward);
  if (layer.backward.has_value()) out->set_backward(*layer.backward);
  if (layer.backward_input.has_value()) out->set_backward_input(*layer.backward_input);
  if (layer.backward_weight.has_value()) out->set_backward_weight(*layer.backward_weight);
  out->set_activation(layer.activation);
  out->set_freed_by_input(layer.freed_by_input);
  out->set_parameter_bytes(layer.parameter_bytes);
  out->set_output_bytes(layer.output_bytes);
  // Written where measured, so that files of figures without them read as before.
  if (layer.forward_transient > 0) out->set_forward_transient(layer.forward_transient);
  if (layer.backward_transient > 0) out->set_backward_transient(layer.backward_transient);
  if (layer.input_transient > 0) out->set_input_transient(layer.input_transient);
  if (layer.weight_transient > 0) out->set_weight_transient(layer.weight_transient);
  if (layer.allocated_by_input > 0) out->set_allocated_by_input(layer.allocated_by_input);
}

LayerFigures FromProto(const v1::Layer& proto) {
  const auto optional = [](bool has, double value) {
    return has ? std::optional<double>(value) : std::nullopt;
  };
  return {.name = proto.name(),
          .forward = optional(proto.has_forward(), proto.forward()),
          .backward = optional(proto.has_backward(), proto.backward()),
          .backward_input = optional(proto.has_backward_input(), proto.backward_input()),
          .backward_weight = optional(proto.has_backward_weight(), proto.backward_weight()),
          .activation = proto.activation(),
          .freed_by_input = proto.freed_by_input(),
          .parameter_bytes = proto.parameter_bytes(),
          .output_bytes = proto.output_bytes(),
          .forward_transient = proto.forward_transient(),
          .backward_transient = proto.backward_transient(),
          .input_transient = proto.input_transient(),
          .weight_transient = proto.weight_transient(),
          .allocated_by_input = proto.allocated_by_input()};
}

}  // namespace

StatusOr<std::string> SerializeLayerCosts(const LayerCosts& layers, ProtoFormat format) {
  v1::LayerCosts proto;
  for (const LayerFigures& layer : layers.layers) ToProto(layer, proto.add_layers());
  for (const SharedParameter& shared : layers.shared_parameters) {
    v1::SharedParameter* out = proto.add_shared_parameters();
    out->set_name(shared.name);
    out->set_bytes(shared.bytes);
    for (const std::string& layer : shared.layers) out->add_layers(layer);
  }
  proto.set_time_unit(layers.time_unit);
  proto.set_optimizer_multiple(layers.optimizer_multiple);
  proto_convert::StampFile(FileKind::kLayerCosts, &proto);
  return proto_convert::Serialize(proto, format);
}

StatusOr<LayerCosts> ParseLayerCosts(std::string_view data, ProtoFormat format) {
  return proto_convert::ParseAs<v1::LayerCosts>(
      data, format, FileKind::kLayerCosts, "layer costs file",
      [](const v1::LayerCosts& proto) -> StatusOr<LayerCosts> {
        LayerCosts layers;
        for (const v1::Layer& layer : proto.layers()) layers.layers.push_back(FromProto(layer));
        for (const v1::SharedParameter& shared : proto.shared_parameters()) {
          layers.shared_parameters.push_back(
              {.name = shared.name(),
               .bytes = shared.bytes(),
               .layers = {shared.layers().begin(), shared.layers().end()}});
        }
        layers.time_unit = proto.time_unit();
        layers.optimizer_multiple = proto.optimizer_multiple();
        PIPEPLAN_RETURN_IF_ERROR(ValidateLayerCosts(layers));
        return layers;
      });
}

}  // namespace pipeplan
