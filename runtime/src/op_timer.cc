#include "pipeplan/runtime/op_timer.h"

#include <algorithm>

namespace pipeplan::runtime {

Status HostOpTimer::BeginStep(size_t actions) {
  marks_.assign(actions, Mark{});
  return Status::Ok();
}

Status HostOpTimer::ComputeBegins(size_t index) {
  marks_[index] = {true, {index, Clock::now(), {}, kComputeThread}};
  return Status::Ok();
}

Status HostOpTimer::ComputeEnded(size_t index) {
  marks_[index].span.end = Clock::now();
  return Status::Ok();
}

Status HostOpTimer::GroupPosting(size_t /*begin*/, size_t /*end*/) {
  posting_ = Clock::now();
  return Status::Ok();
}

Status HostOpTimer::GroupPosted(size_t begin, size_t end) {
  for (size_t i = begin; i < end; ++i) marks_[i] = {true, {i, posting_, posting_, kCommThread}};
  return Status::Ok();
}

void HostOpTimer::Landed(size_t index, TimePoint completed) {
  OpSpan& span = marks_[index].span;
  span.end = std::max(span.start, completed);
}

StatusOr<std::vector<OpSpan>> HostOpTimer::Resolve() {
  std::vector<OpSpan> spans;
  for (const Mark& mark : marks_) {
    if (mark.marked) spans.push_back(mark.span);
  }
  return spans;
}

}  // namespace pipeplan::runtime
