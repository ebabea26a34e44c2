#include "pipeplan/runtime/op_timer.h"

#include <algorithm>

namespace pipeplan::runtime {

Status HostOpTimer::BeginStep(size_t actions) {
  marks_.assign(actions, Mark{});
  replay_end_ = 0;
  discarded_.clear();
  return Status::Ok();
}

// A replay marks each action before the PV once more, so each first span is kept once.
void HostOpTimer::Retire(size_t index) {
  if (index >= replay_end_ || !marks_[index].marked) return;
  OpSpan first = marks_[index].span;
  first.discarded = true;
  discarded_.push_back(first);
}

Status HostOpTimer::ComputeBegins(size_t index) {
  Retire(index);
  marks_[index] = {true, {index, Clock::now(), {}, kComputeThread, false}};
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
  for (size_t i = begin; i < end; ++i) {
    Retire(i);
    marks_[i] = {true, {i, posting_, posting_, kCommThread, false}};
  }
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
  spans.insert(spans.end(), discarded_.begin(), discarded_.end());
  return spans;
}

}  // namespace pipeplan::runtime
