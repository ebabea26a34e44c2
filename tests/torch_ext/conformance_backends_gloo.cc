// The Gloo transport joins the transport conformance suite: a world of transports in this
// process, one rendezvous per test on a free local port.
#include <thread>

#include "../runtime/transport_conformance.h"
#include "pipeplan/runtime/rank_processes.h"
#include "pipeplan/torch_ext/gloo_transport.h"

namespace pipeplan::runtime {

std::vector<Backend> ConformanceBackends() {
  return {{"gloo",
           [](int ranks) {
             const int port = FreeLocalPort();
             std::vector<StatusOr<torch_ext::GlooConnection>> connections;
             for (int r = 0; r < ranks; ++r) {
               connections.emplace_back(Status(StatusCode::kInternal, "not connected"));
             }
             {
               std::vector<std::jthread> threads;
               for (int r = 0; r < ranks; ++r) {
                 threads.emplace_back([&, r] {
                   torch_ext::Rendezvous rendezvous;
                   rendezvous.port = port;
                   rendezvous.rank = r;
                   rendezvous.world_size = ranks;
                   rendezvous.timeout = std::chrono::seconds(20);
                   connections[r] = torch_ext::ConnectGloo(rendezvous);
                 });
               }
             }
             Transports transports;
             for (auto& connection : connections) {
               if (!connection.ok()) return Transports{};
               transports.push_back(std::move(connection->transport));
             }
             return transports;
           },
           /*tells_completion=*/true}};
}

}  // namespace pipeplan::runtime
