// A run's ranks as processes of this machine, as torchrun would start them: this program once
// per rank with its own arguments, RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR=127.0.0.1 and a
// free MASTER_PORT set (the other variables kept). A front end calls it where no launcher
// started it (pipeplan-torch's --local-ranks); each child then runs as a rank of a
// multi-process run (RunRankSession). POSIX only; not thread-safe (it waits for any child).
#pragma once

#include <string_view>

#include "pipeplan/model/status.h"

namespace pipeplan::runtime {

// A free TCP port on 127.0.0.1 for a local rendezvous (0 if none could be had).
int FreeLocalPort();

// Spawns `ranks` processes of this program and waits for all. Each rank that does not exit
// with 0 is said on stderr as it ends ("<program>: rank 1 exited with code 1") and named in
// the error. Once one fails the others get `timeout_s` (+5 s) to stop by themselves, then are
// killed, so the launcher never hangs.
Status LaunchLocalRanks(int ranks, double timeout_s, std::string_view program);

}  // namespace pipeplan::runtime
