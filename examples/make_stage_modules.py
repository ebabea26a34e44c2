"""Writes one TorchScript module per pipeline stage, as `pipeplan-torch --stage-modules DIR`
reads them: DIR/stage-0.pt .. DIR/stage-{S-1}.pt. Each stage here is a residual MLP on
[microbatch, sequence, hidden] float32 activations; put your own model's stages in their place.

    python examples/make_stage_modules.py --stages 8 --hidden 64 my_stages
"""

import argparse
import os

import torch


class ResidualMlp(torch.nn.Module):
    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.norm = torch.nn.LayerNorm(hidden)
        self.fc1 = torch.nn.Linear(hidden, 4 * hidden)
        self.fc2 = torch.nn.Linear(4 * hidden, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.norm(x))))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stages", type=int, required=True,
                        help="how many stages: the plan's P x V")
    parser.add_argument("--hidden", type=int, default=64,
                        help="hidden size, as pipeplan-torch's --hidden (default 64)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("directory", help="where to write stage-S.pt (created if missing)")
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    os.makedirs(args.directory, exist_ok=True)
    for stage in range(args.stages):
        path = os.path.join(args.directory, f"stage-{stage}.pt")
        torch.jit.script(ResidualMlp(args.hidden)).save(path)
    print(f"wrote {args.stages} stages (hidden {args.hidden}) to {args.directory}/")


if __name__ == "__main__":
    main()
