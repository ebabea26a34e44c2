"""``python -m pipeplan`` and the ``pipeplan`` console script: the pipeplan command."""

import sys

from pipeplan import main as _main


def main() -> None:
    sys.exit(_main(sys.argv[1:]))


if __name__ == "__main__":
    main()
