#include "pipeplan/torch_ext/graph_cut.h"

#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <numeric>
#include <unordered_map>
#include <unordered_set>
#include <utility>

namespace pipeplan::torch_ext {
namespace {

using torch::autograd::Edge;
using torch::autograd::edge_list;
using torch::autograd::Node;
using torch::autograd::variable_list;

// The gradients one intermediate received in I. Only the first arrival counts: W runs the
// node again, and what reaches it then is its own.
struct Arrival {
  bool armed = true;
  variable_list grads;
};

class KeepArrival final : public torch::autograd::FunctionPreHook {
 public:
  explicit KeepArrival(std::shared_ptr<Arrival> arrival) : arrival_(std::move(arrival)) {}

  variable_list operator()(const variable_list& grads) override {
    if (arrival_->armed) {
      arrival_->grads = grads;
      arrival_->armed = false;
    }
    return grads;
  }

 private:
  std::shared_ptr<Arrival> arrival_;
};

// The autograd graph below a root, each node after every node it leads to (post-order).
struct Graph {
  std::vector<std::shared_ptr<Node>> nodes;
  std::unordered_map<const Node*, size_t> index;
  std::vector<std::vector<size_t>> feeders;  // per node, the nodes with an edge to it
  std::vector<bool> on_input_chain;          // leads to the input: I runs it
};

Graph Explore(const std::shared_ptr<Node>& root, const Node* input) {
  Graph graph;
  struct Frame {
    std::shared_ptr<Node> node;
    size_t next_edge = 0;
  };
  std::unordered_set<const Node*> seen{root.get()};
  std::vector<Frame> stack{{root}};
  while (!stack.empty()) {
    Frame& top = stack.back();
    const edge_list& edges = top.node->next_edges();
    if (top.next_edge < edges.size()) {
      const std::shared_ptr<Node>& child = edges[top.next_edge++].function;
      if (child != nullptr && seen.insert(child.get()).second) stack.push_back({child});
      continue;
    }
    graph.index.emplace(top.node.get(), graph.nodes.size());
    graph.nodes.push_back(std::move(top.node));
    stack.pop_back();
  }
  const size_t size = graph.nodes.size();
  graph.feeders.resize(size);
  graph.on_input_chain.assign(size, false);
  for (size_t i = 0; i < size; ++i) {
    bool leads = graph.nodes[i].get() == input;
    for (const Edge& edge : graph.nodes[i]->next_edges()) {
      if (edge.function == nullptr) continue;
      const size_t child = graph.index.at(edge.function.get());
      graph.feeders[child].push_back(i);
      leads = leads || graph.on_input_chain[child];
    }
    graph.on_input_chain[i] = leads;
  }
  return graph;
}

// The input-chain nodes that feed a parameter's chain: walking up from its accumulator
// through the nodes off the input chain, the first ones on it.
std::vector<size_t> IntermediatesOf(const Graph& graph, size_t accumulator) {
  std::vector<size_t> found;
  std::unordered_set<size_t> seen{accumulator};
  std::vector<size_t> pending{accumulator};
  while (!pending.empty()) {
    const size_t node = pending.back();
    pending.pop_back();
    for (const size_t feeder : graph.feeders[node]) {
      if (graph.on_input_chain[feeder]) {
        found.push_back(feeder);
      } else if (seen.insert(feeder).second) {
        pending.push_back(feeder);
      }
    }
  }
  std::sort(found.begin(), found.end());
  found.erase(std::unique(found.begin(), found.end()), found.end());
  return found;
}

// Parameters whose chains leave the input's at shared nodes: W differentiates them together.
struct Group {
  std::vector<size_t> intermediates;  // graph indices, ascending
  edge_list parameters;
};

// The groups, in the order of their first parameter; none when a parameter in the graph has
// no intermediate (the root is off the input chain: nothing to split at).
std::vector<Group> GroupParameters(const Graph& graph, const std::vector<at::Tensor>& parameters,
                                   bool& splittable) {
  edge_list edges;
  std::vector<std::vector<size_t>> intermediates;
  for (const at::Tensor& parameter : parameters) {
    if (!parameter.requires_grad()) continue;
    Edge edge = torch::autograd::impl::gradient_edge(parameter);
    const auto found = graph.index.find(edge.function.get());
    if (found == graph.index.end()) continue;  // not used by this forward
    intermediates.push_back(IntermediatesOf(graph, found->second));
    if (intermediates.back().empty()) splittable = false;
    edges.push_back(std::move(edge));
  }
  // Union-find over the parameters, joined by shared intermediates.
  std::vector<size_t> parent(edges.size());
  std::iota(parent.begin(), parent.end(), size_t{0});
  const auto find = [&](size_t i) {
    while (parent[i] != i) i = parent[i] = parent[parent[i]];
    return i;
  };
  std::unordered_map<size_t, size_t> owner;  // intermediate -> a parameter it feeds
  for (size_t i = 0; i < edges.size(); ++i) {
    for (const size_t node : intermediates[i]) {
      const auto [it, fresh] = owner.emplace(node, i);
      if (!fresh) parent[find(i)] = find(it->second);
    }
  }
  std::vector<Group> groups;
  std::unordered_map<size_t, size_t> group_of;  // union-find root -> index in groups
  for (size_t i = 0; i < edges.size(); ++i) {
    const auto [it, fresh] = group_of.emplace(find(i), groups.size());
    if (fresh) groups.emplace_back();
    Group& group = groups[it->second];
    group.parameters.push_back(std::move(edges[i]));
    group.intermediates.insert(group.intermediates.end(), intermediates[i].begin(),
                               intermediates[i].end());
  }
  for (Group& group : groups) {
    std::sort(group.intermediates.begin(), group.intermediates.end());
    group.intermediates.erase(std::unique(group.intermediates.begin(), group.intermediates.end()),
                              group.intermediates.end());
  }
  return groups;
}

// Whether one of the group's intermediates leads to another along the input chain: W, run
// from both, would pass the first one's gradient into the second a second time.
bool OneLeadsToAnother(const Graph& graph, const Group& group) {
  if (group.intermediates.size() < 2) return false;
  const std::unordered_set<size_t> targets(group.intermediates.begin(), group.intermediates.end());
  for (const size_t start : group.intermediates) {
    std::unordered_set<size_t> seen{start};
    std::vector<size_t> pending{start};
    while (!pending.empty()) {
      const size_t node = pending.back();
      pending.pop_back();
      for (const Edge& edge : graph.nodes[node]->next_edges()) {
        if (edge.function == nullptr) continue;
        const size_t child = graph.index.at(edge.function.get());
        if (!graph.on_input_chain[child] || !seen.insert(child).second) continue;
        if (targets.contains(child)) return true;
        pending.push_back(child);
      }
    }
  }
  return false;
}

}  // namespace

struct GraphCut::State {
  bool done = false;
  bool split = false;
  // split: per group, where W starts, with what, and for which parameters.
  struct Run {
    edge_list roots;
    variable_list grads;
    edge_list parameters;
  };
  std::vector<Run> runs;
  // otherwise: the whole backward again, to the parameters.
  at::Tensor root;
  std::vector<at::Tensor> root_grads;
  std::vector<at::Tensor> parameters;
};

GraphCut::GraphCut(std::shared_ptr<State> state) : state_(std::move(state)) {}

GraphCut GraphCut::RunInput(const at::Tensor& root, const std::vector<at::Tensor>& root_grads,
                            const at::Tensor& input, const std::vector<at::Tensor>& parameters) {
  auto state = std::make_shared<State>();
  Graph graph;
  std::vector<Group> groups;
  if (const std::shared_ptr<Node>& root_node = root.grad_fn(); root_node != nullptr) {
    graph = Explore(root_node, torch::autograd::impl::gradient_edge(input).function.get());
    bool splittable = true;
    groups = GroupParameters(graph, parameters, splittable);
    state->split =
        splittable && std::none_of(groups.begin(), groups.end(), [&](const Group& group) {
          return OneLeadsToAnother(graph, group);
        });
  }
  std::unordered_map<size_t, std::shared_ptr<Arrival>> arrivals;
  if (state->split) {
    for (const Group& group : groups) {
      for (const size_t node : group.intermediates) {
        auto& arrival = arrivals[node];
        if (arrival != nullptr) continue;
        arrival = std::make_shared<Arrival>();
        graph.nodes[node]->add_pre_hook(std::make_unique<KeepArrival>(arrival));
      }
    }
  }
  torch::autograd::backward({root}, root_grads, /*retain_graph=*/true, /*create_graph=*/false,
                            {input});
  if (!state->split) {
    state->root = root;
    state->root_grads = root_grads;
    state->parameters = parameters;
    return GraphCut(std::move(state));
  }
  for (Group& group : groups) {
    State::Run run;
    for (const size_t node : group.intermediates) {
      const variable_list& grads = arrivals.at(node)->grads;
      for (size_t i = 0; i < grads.size(); ++i) {
        if (!grads[i].defined()) continue;
        run.roots.emplace_back(graph.nodes[node], static_cast<uint32_t>(i));
        run.grads.push_back(grads[i]);
      }
    }
    if (run.roots.empty()) continue;  // no gradient reached these parameters
    run.parameters = std::move(group.parameters);
    state->runs.push_back(std::move(run));
  }
  // What only I needed goes now: the saved tensors of the input chain's other nodes.
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    if (graph.on_input_chain[i] && !arrivals.contains(i)) graph.nodes[i]->release_variables();
  }
  return GraphCut(std::move(state));
}

bool GraphCut::RunWeight() {
  if (state_->done) return false;
  state_->done = true;
  if (state_->split) {
    for (State::Run& run : state_->runs) {
      torch::autograd::Engine::get_default_engine().execute(
          run.roots, run.grads, /*keep_graph=*/false, /*create_graph=*/false,
          /*accumulate_grad=*/true, run.parameters);
    }
    state_->runs.clear();
  } else if (!state_->parameters.empty()) {
    torch::autograd::backward({state_->root}, state_->root_grads, /*retain_graph=*/false,
                              /*create_graph=*/false, state_->parameters);
  }
  state_->root = at::Tensor();
  state_->root_grads.clear();
  return true;
}

bool GraphCut::splits_at_intermediates() const { return state_->split; }

}  // namespace pipeplan::torch_ext
