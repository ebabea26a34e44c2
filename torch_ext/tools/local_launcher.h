// pipeplan-torch's --local-ranks launcher: this program once per rank on this machine, as
// torchrun would start it (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR=127.0.0.1 and a free
// MASTER_PORT set; the other variables kept), with the same arguments.
#pragma once

#include <string>
#include <vector>

namespace pipeplan::torch_ext {

// Spawns `ranks` processes of /proc/self/exe with `argv` and waits for all; returns the exit
// code (0 when every rank exited with 0). Once one fails the others get `timeout_s` (+5 s) to
// stop by themselves, then are killed, so the launcher never hangs.
int LaunchLocalRanks(int ranks, double timeout_s, const std::vector<std::string>& argv);

}  // namespace pipeplan::torch_ext
