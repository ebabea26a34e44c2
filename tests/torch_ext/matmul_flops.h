// Counts the matrix products' FLOPs per phase of a test (F, B, I, W), through a dispatcher
// callback: how the tests show that I and W together do B's work once.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/record_function.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pipeplan::torch_ext::testing {

// Counts the multiply-add FLOPs of every matrix product the dispatcher runs (mm, addmm, bmm,
// baddbmm: what linear, matmul and their backwards come down to on CPU), 2 per multiply-add,
// while `phase` names where they go. One at a time: the callback is process-wide.
class MatmulFlops {
 public:
  MatmulFlops() {
    active_ = this;
    handle_ = at::addGlobalCallback(at::RecordFunctionCallback(&OnOp).needsInputs(true));
  }
  ~MatmulFlops() {
    at::removeCallback(handle_);
    active_ = nullptr;
  }
  MatmulFlops(const MatmulFlops&) = delete;
  MatmulFlops& operator=(const MatmulFlops&) = delete;

  void Phase(std::string phase) { phase_ = std::move(phase); }
  int64_t operator[](const std::string& phase) const {
    const auto found = flops_.find(phase);
    return found == flops_.end() ? 0 : found->second;
  }

 private:
  static std::unique_ptr<at::ObserverContext> OnOp(const at::RecordFunction& fn) {
    if (active_ == nullptr) return nullptr;
    const std::string_view name = fn.name();
    const c10::ArrayRef<const c10::IValue> in = fn.inputs();
    // The two factors: mm(a, b), bmm(a, b); addmm(c, a, b), baddbmm(c, a, b).
    size_t first = 0;
    if (name == "aten::addmm" || name == "aten::baddbmm") {
      first = 1;
    } else if (name != "aten::mm" && name != "aten::bmm") {
      return nullptr;
    }
    const std::vector<int64_t> a = in[first].toTensor().sizes().vec();
    const std::vector<int64_t> b = in[first + 1].toTensor().sizes().vec();
    int64_t batch = a.size() == 3 ? a[0] : 1;
    const int64_t m = a[a.size() - 2];
    const int64_t k = a[a.size() - 1];
    const int64_t n = b[b.size() - 1];
    active_->flops_[active_->phase_] += 2 * batch * m * k * n;
    return nullptr;
  }

  static inline MatmulFlops* active_ = nullptr;
  at::CallbackHandle handle_ = 0;
  std::string phase_;
  std::map<std::string, int64_t> flops_;
};

}  // namespace pipeplan::torch_ext::testing
