"""Peak memory of `pipeplan import --format torch-trace` against the size of the trace it
reads, and what a gzip bomb costs before it is refused.

    python3 bench/trace_import_memory.py --pipeplan build/cli/pipeplan

Writes three traces of about 40 MB each in Kineto's layout (one rank, a 1-rank plan of four
stages): nothing but `PP:` action ranges (the worst case: every event is kept), nothing but
`[memory]` events, and operator events around a few action ranges (what real traces are mostly
made of); imports each and reads the child's peak resident memory (getrusage). Budget: at most
8 times the JSON, plus 16 MiB for the program itself. Then a gzip file of 2 MB that inflates to
2 GiB, imported with the default limit (1 GiB): refused within 5 s under 200 MB.
"""

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
import zlib

RATIO_BUDGET = 8.0
BASE_MIB = 16
BOMB_SECONDS = 5.0
BOMB_MIB = 200
EVENTS = 500_000


def action_ranges():
    return ['{"ph":"X","cat":"user_annotation","name":"PP:%dF%d","tid":1,"ts":%d,"dur":1}'
            % (i % 4, i % 8, 2 * i) for i in range(EVENTS)]


def memory_events():
    first = ['{"ph":"X","cat":"user_annotation","name":"PP:0F0","tid":1,"ts":1,"dur":1}']
    return first + ['{"ph":"i","cat":"cpu_instant_event","s":"t","name":"[memory]","tid":1,'
                    '"ts":%d,"args":{"Total Allocated":%d,"Bytes":4096,"Device Type":0}}'
                    % (i, 4096 * i) for i in range(EVENTS)]


def operators():
    ranges = action_ranges()[:64]
    return ranges + ['{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":7,"tid":1,"ts":%d,'
                     '"dur":1,"args":{"External id":%d,"Ev Idx":%d}}' % (i, i, i)
                     for i in range(EVENTS)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pipeplan", required=True)
    args = parser.parse_args()
    failed = False
    with tempfile.TemporaryDirectory(prefix="pipeplan-trace-memory-") as work:
        plan = os.path.join(work, "plan.pb")
        subprocess.run([args.pipeplan, "plan", "--strategy", "interleaved-1f1b", "--ranks", "1",
                        "--stages-per-rank", "4", "--microbatches", "8", "-o", plan],
                       check=True, capture_output=True)
        for name, events in [("action ranges", action_ranges), ("memory events", memory_events),
                             ("operators", operators)]:
            path = os.path.join(work, name.replace(" ", "_") + ".json")
            with open(path, "w", encoding="utf-8") as f:
                f.write('{"traceEvents":[' + ",".join(events()) + "]}")
            size_mib = os.path.getsize(path) / 2**20
            # The synthetic actions do not match the plan: the import reads and parses the
            # whole trace (where its memory goes), then fails matching, as a wrong --plan would.
            mib, _ = measure_alone([args.pipeplan, "import", "--format", "torch-trace", path,
                                    "--plan", plan, "-o", os.path.join(work, "m.pb")])
            ratio = (mib - BASE_MIB) / size_mib
            ok = ratio <= RATIO_BUDGET
            failed |= not ok
            print(f"{name:14s} {size_mib:6.1f} MiB of JSON: peak {mib:6.1f} MiB = "
                  f"{BASE_MIB} MiB + {ratio:.1f} x the JSON (budget {RATIO_BUDGET:.0f} x)"
                  f"{'' if ok else '  OVER BUDGET'}")
        bomb = os.path.join(work, "bomb.json.gz")
        write_bomb(bomb, 2 << 30)
        began = time.monotonic()
        mib, error = measure_alone([args.pipeplan, "import", "--format", "torch-trace", bomb,
                                    "-o", os.path.join(work, "b.pb")])
        took = time.monotonic() - began
        ok = took <= BOMB_SECONDS and mib <= BOMB_MIB and "inflates to more than" in error
        failed |= not ok
        print(f"gzip bomb      {os.path.getsize(bomb) / 2**20:.1f} MiB -> 2 GiB: refused in "
              f"{took:.1f} s (budget {BOMB_SECONDS:.0f} s), peak {mib:.1f} MiB "
              f"(budget {BOMB_MIB} MiB){'' if ok else '  OVER BUDGET'}")
    return 1 if failed else 0


def measure_alone(command):
    """(peak resident MiB, stderr) of `command`, run as the only child of a fresh Python:
    getrusage's RUSAGE_CHILDREN is a maximum over all children, so each gets its own parent."""
    probe = ("import resource, subprocess, sys; "
             "r = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
             "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); "
             "sys.stderr.write(r.stderr)")
    result = subprocess.run([sys.executable, "-c", probe, *command], capture_output=True,
                            text=True, check=True)
    return int(result.stdout.split()[0]) / 1024.0, result.stderr


def write_bomb(path, inflated):
    spaces = b" " * (1 << 20)
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    with open(path, "wb") as f:
        f.write(packer.compress(b'{"traceEvents": ['))
        for _ in range(inflated // len(spaces)):
            f.write(packer.compress(spaces))
        f.write(packer.compress(b"]}"))
        f.write(packer.flush())


if __name__ == "__main__":
    sys.exit(main())
