// pipeplan-torch's --local-ranks launcher: this program once per rank on this machine, as
// torchrun would start it (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR=127.0.0.1 and a free
// MASTER_PORT set; the other variables kept), with the same arguments.
#pragma once

#include "pipeplan/model/status.h"

namespace pipeplan::torch_ext {

// Spawns `ranks` processes of this program with its own arguments and waits for all; an error
// names each rank that did not exit with 0 and how it ended. Once one fails the others get
// `timeout_s` (+5 s) to stop by themselves, then are killed, so the launcher never hangs.
Status LaunchLocalRanks(int ranks, double timeout_s);

}  // namespace pipeplan::torch_ext
