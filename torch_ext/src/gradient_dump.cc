#include "pipeplan/torch_ext/gradient_dump.h"

#include <cstring>
#include <type_traits>

namespace pipeplan::torch_ext {
namespace {

constexpr char kMagic[4] = {'P', 'P', 'G', 'D'};
constexpr uint32_t kVersion = 1;

template <typename T>
void Put(std::string& out, const T& value) {
  static_assert(std::is_trivially_copyable_v<T>);
  out.append(reinterpret_cast<const char*>(&value), sizeof(T));
}

class Reader {
 public:
  explicit Reader(std::string_view bytes) : bytes_(bytes) {}

  template <typename T>
  Status Get(T& value, const char* what) {
    if (bytes_.size() - offset_ < sizeof(T)) return Truncated(what);
    std::memcpy(&value, bytes_.data() + offset_, sizeof(T));
    offset_ += sizeof(T);
    return Status::Ok();
  }
  Status GetBytes(void* out, size_t size, const char* what) {
    if (bytes_.size() - offset_ < size) return Truncated(what);
    if (size > 0) std::memcpy(out, bytes_.data() + offset_, size);
    offset_ += size;
    return Status::Ok();
  }
  size_t offset() const { return offset_; }
  bool done() const { return offset_ == bytes_.size(); }

 private:
  Status Truncated(const char* what) const {
    return InvalidArgument("gradient dump truncated at byte " + std::to_string(offset_) +
                           " while reading " + what);
  }
  std::string_view bytes_;
  size_t offset_ = 0;
};

}  // namespace

std::string EncodeGradientDump(const GradientDump& dump) {
  std::string out(kMagic, sizeof(kMagic));
  Put(out, kVersion);
  Put(out, static_cast<int32_t>(dump.stage));
  Put(out, dump.loss);
  Put(out, static_cast<uint32_t>(dump.gradients.size()));
  for (const NamedValues& g : dump.gradients) {
    Put(out, static_cast<uint32_t>(g.name.size()));
    out += g.name;
    Put(out, static_cast<uint32_t>(g.shape.size()));
    for (const int64_t d : g.shape) Put(out, d);
    Put(out, static_cast<uint64_t>(g.values.size()));
    out.append(reinterpret_cast<const char*>(g.values.data()), g.values.size() * sizeof(float));
  }
  return out;
}

StatusOr<GradientDump> DecodeGradientDump(std::string_view bytes) {
  Reader in(bytes);
  char magic[4] = {};
  PIPEPLAN_RETURN_IF_ERROR(in.GetBytes(magic, sizeof(magic), "the magic"));
  if (std::memcmp(magic, kMagic, sizeof(kMagic)) != 0) {
    return InvalidArgument("not a gradient dump (no PPGD magic at byte 0)");
  }
  uint32_t version = 0;
  PIPEPLAN_RETURN_IF_ERROR(in.Get(version, "the version"));
  if (version != kVersion) {
    return InvalidArgument("gradient dump version " + std::to_string(version) +
                           " (this build reads " + std::to_string(kVersion) + ")");
  }
  GradientDump dump;
  int32_t stage = 0;
  uint32_t count = 0;
  PIPEPLAN_RETURN_IF_ERROR(in.Get(stage, "the stage"));
  PIPEPLAN_RETURN_IF_ERROR(in.Get(dump.loss, "the loss"));
  PIPEPLAN_RETURN_IF_ERROR(in.Get(count, "the tensor count"));
  dump.stage = stage;
  for (uint32_t i = 0; i < count; ++i) {
    NamedValues g;
    uint32_t name_size = 0, rank = 0;
    uint64_t values = 0;
    PIPEPLAN_RETURN_IF_ERROR(in.Get(name_size, "a name length"));
    if (name_size > bytes.size()) return InvalidArgument("gradient dump: name length too large");
    g.name.resize(name_size);
    PIPEPLAN_RETURN_IF_ERROR(in.GetBytes(g.name.data(), name_size, "a name"));
    PIPEPLAN_RETURN_IF_ERROR(in.Get(rank, "a tensor rank"));
    if (rank > 16) return InvalidArgument("gradient dump: tensor '" + g.name + "' has rank > 16");
    g.shape.resize(rank);
    for (int64_t& d : g.shape) PIPEPLAN_RETURN_IF_ERROR(in.Get(d, "a dimension"));
    PIPEPLAN_RETURN_IF_ERROR(in.Get(values, "a value count"));
    if (values > bytes.size() / sizeof(float)) {
      return InvalidArgument("gradient dump: tensor '" + g.name + "' claims too many values");
    }
    g.values.resize(values);
    PIPEPLAN_RETURN_IF_ERROR(in.GetBytes(g.values.data(), values * sizeof(float), "values"));
    dump.gradients.push_back(std::move(g));
  }
  if (!in.done()) {
    return InvalidArgument("gradient dump has trailing bytes from byte " +
                           std::to_string(in.offset()));
  }
  return dump;
}

std::string GradientDumpName(int stage) { return "stage-" + std::to_string(stage) + ".grads"; }

}  // namespace pipeplan::torch_ext
