#include "pipeplan/torch_ext/stage_dump.h"

#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/csrc/jit/serialization/pickle.h>
#include <torch/csrc/jit/serialization/pickler.h>

#include <exception>
#include <vector>

namespace pipeplan::torch_ext {
namespace {

using Dict = c10::impl::GenericDict;

Dict MakeDict() { return Dict(c10::StringType::get(), c10::AnyType::get()); }

c10::Dict<std::string, at::Tensor> TensorDict(const NamedTensors& tensors) {
  c10::Dict<std::string, at::Tensor> dict;
  for (const auto& [name, tensor] : tensors) {
    dict.insert(name, tensor.detach().to(at::kCPU).clone());
  }
  return dict;
}

// torch.save's zip format, as LibTorch's pickle_save writes it but without TorchScript's type
// tags on dicts (torch.jit._pickle.restore_type_tag), which torch.load(weights_only=True)
// refuses as an unknown global.
std::string Pickle(const Dict& dict) {
  std::vector<char> pickled;
  torch::jit::Pickler pickler(
      [&](const char* bytes, size_t size) { pickled.insert(pickled.end(), bytes, bytes + size); },
      /*tensor_table=*/nullptr, /*type_renamer=*/nullptr, /*memoized_class_types=*/nullptr,
      /*get_tensor_id=*/nullptr, /*tag_aggregates=*/false);
  pickler.protocol();
  pickler.pushIValue(c10::IValue(dict));
  pickler.stop();
  std::string archive;
  {
    caffe2::serialize::PyTorchStreamWriter writer([&](const void* bytes, size_t size) {
      archive.append(static_cast<const char*>(bytes), size);
      return size;
    });
    torch::jit::writeArchiveAndTensors("data", pickled.data(), pickled.size(), pickler.tensorData(),
                                       writer);
  }  // the writer's destructor writes the end of the archive
  return archive;
}

}  // namespace

std::string GradientDumpPath(const std::string& dir, int stage) {
  return dir + "/stage-" + std::to_string(stage) + ".pt";
}

std::string ParameterDumpPath(const std::string& dir, int step, int stage) {
  return dir + "/step-" + std::to_string(step) + "/stage-" + std::to_string(stage) + ".pt";
}

std::string EncodeGradientDump(int stage, int step, double loss, const NamedTensors& grads) {
  Dict dict = MakeDict();
  dict.insert("stage", int64_t{stage});
  dict.insert("step", int64_t{step});
  dict.insert("loss", loss);
  dict.insert("grads", TensorDict(grads));
  return Pickle(dict);
}

std::string EncodeParameterDump(int stage, int step, const NamedTensors& params,
                                const std::vector<NamedTensors>& optimizer_state,
                                int optimizer_step) {
  Dict dict = MakeDict();
  dict.insert("stage", int64_t{stage});
  dict.insert("step", int64_t{step});
  dict.insert("params", TensorDict(params));
  Dict state = MakeDict();
  for (size_t i = 0; i < params.size() && i < optimizer_state.size(); ++i) {
    if (!optimizer_state[i].empty()) state.insert(params[i].first, TensorDict(optimizer_state[i]));
  }
  dict.insert("optimizer_state", state);
  dict.insert("optimizer_step", int64_t{optimizer_step});
  return Pickle(dict);
}

StatusOr<c10::impl::GenericDict> DecodeStageDump(const std::string& bytes) {
  try {
    const c10::IValue value =
        torch::jit::pickle_load(std::vector<char>(bytes.begin(), bytes.end()));
    if (!value.isGenericDict()) return InvalidArgument("a stage dump is not a dictionary");
    return value.toGenericDict();
  } catch (const std::exception& e) {
    std::string what = e.what();
    return InvalidArgument("not a stage dump: " + what.substr(0, what.find('\n')));
  }
}

}  // namespace pipeplan::torch_ext
