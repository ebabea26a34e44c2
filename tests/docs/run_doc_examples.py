"""Runs the shell examples of one document with byexample and compares what they print with
what the document quotes.

Each document runs in order, in one shell, in a fresh scratch directory that holds a link to
the repository's examples/ (the files the examples read). PATH starts with the directories
given (the built pipeplan and pipeplan-torch, torch's venv for torchrun) and tests/docs/bin
(`within`, for measured figures). Examples a machine cannot run say so themselves with
`# byexample: +skip` and a reason on the line. With --python-path the document's Python
examples (`>>>` in a python block) run too, in one `python3` whose PYTHONPATH is that directory
(the package assembled in the build tree). Exit code: byexample's (0 when all pass).
"""

import argparse
import os
import subprocess
import sys
import tempfile


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--byexample", required=True, help="the byexample executable")
    parser.add_argument("--repo", required=True, help="the repository root")
    parser.add_argument("--path", action="append", default=[],
                        help="a directory to put first on PATH (repeatable)")
    parser.add_argument("--python-path",
                        help="run the Python examples too, importing from this directory")
    parser.add_argument("document", help="the Markdown file whose examples run")
    args = parser.parse_args()

    helpers = os.path.join(args.repo, "tests", "docs", "bin")
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join(args.path + [helpers, env.get("PATH", "")])
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    # byexample runs commands on a terminal: the solver's progress lines would depend on how
    # fast this machine is.
    env["PIPEPLAN_SOLVER_PROGRESS"] = "off"
    languages = "shell"
    if args.python_path:
        env["PYTHONPATH"] = args.python_path
        languages = "shell,python3"
    document = os.path.abspath(args.document)
    with tempfile.TemporaryDirectory(prefix="pipeplan-docs-") as scratch:
        os.symlink(os.path.join(args.repo, "examples"), os.path.join(scratch, "examples"))
        print(f"run_doc_examples: {document} in {scratch}", flush=True)
        command = [args.byexample, "--language", languages, "--timeout", "300",
                   "--pretty", "none", "--no-progress-bar", "--diff", "unified",
                   # A line of just "~" stands for an empty line of output, which would
                   # otherwise end the quoted output.
                   "--options", "+rm=~", document]
        return subprocess.run(command, cwd=scratch, env=env, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
