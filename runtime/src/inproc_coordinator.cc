#include <condition_variable>
#include <map>
#include <mutex>
#include <utility>

#include "pipeplan/runtime/coordinator.h"

namespace pipeplan::runtime {
namespace {

// What every rank's coordinator shares.
struct Store {
  explicit Store(int count) : ranks(count) {}
  const int ranks;
  std::mutex mutex;
  std::condition_variable changed;
  std::map<std::string, std::string> values;
  std::map<std::string, int> arrived;  // ranks at each barrier
  std::optional<Status> abort;
};

std::string Milliseconds(std::chrono::milliseconds timeout) {
  return std::to_string(timeout.count()) + " ms";
}

class InProcCoordinator final : public Coordinator {
 public:
  explicit InProcCoordinator(std::shared_ptr<Store> store) : store_(std::move(store)) {}

  Status Barrier(const std::string& name, std::chrono::milliseconds timeout) override {
    std::unique_lock lock(store_->mutex);
    int& arrived = store_->arrived[name];
    ++arrived;
    store_->changed.notify_all();
    if (!store_->changed.wait_for(lock, timeout, [&] { return arrived >= store_->ranks; })) {
      return DeadlineExceeded("barrier '" + name + "': " + std::to_string(arrived) + " of " +
                              std::to_string(store_->ranks) + " ranks there within " +
                              Milliseconds(timeout));
    }
    return Status::Ok();
  }

  Status Put(const std::string& key, const std::string& value) override {
    const std::lock_guard lock(store_->mutex);
    store_->values[key] = value;
    store_->changed.notify_all();
    return Status::Ok();
  }

  StatusOr<std::string> Get(const std::string& key, std::chrono::milliseconds timeout) override {
    std::unique_lock lock(store_->mutex);
    if (!store_->changed.wait_for(lock, timeout, [&] { return store_->values.contains(key); })) {
      return DeadlineExceeded("no rank put '" + key + "' within " + Milliseconds(timeout));
    }
    return store_->values.at(key);
  }

  Status PublishAbort(const Status& reason) override {
    const std::lock_guard lock(store_->mutex);
    if (!store_->abort.has_value()) store_->abort = reason;
    store_->changed.notify_all();
    return *store_->abort;
  }

  std::optional<Status> PublishedAbort() override {
    const std::lock_guard lock(store_->mutex);
    return store_->abort;
  }

 private:
  std::shared_ptr<Store> store_;
};

}  // namespace

std::vector<std::unique_ptr<Coordinator>> MakeInProcCoordinators(int ranks) {
  const auto store = std::make_shared<Store>(ranks);
  std::vector<std::unique_ptr<Coordinator>> out;
  out.reserve(ranks);
  for (int r = 0; r < ranks; ++r) out.push_back(std::make_unique<InProcCoordinator>(store));
  return out;
}

}  // namespace pipeplan::runtime
