#!/usr/bin/env python3
"""Checks the library layering of docs/architecture.md against the build and the code.

For every library in the table of docs/architecture.md ("| `name` | `folder` | deps | ... |"):
  * the pipeplan:: targets its folder's CMakeLists.txt links must be exactly the listed ones;
  * every `#include "pipeplan/<lib>/..."` in its files must name itself or a listed library.
  * every source file of a library over 600 lines must be named, with its reason, in the
    section "Files over 600 lines", and every file named there must still be over 600 lines.
Exits 1 naming each violation (file, line, include), 0 when everything holds.

  --inject FILE:HEADER  pretend FILE (relative to the repository) also includes HEADER; the
                        architecture.layers_refuses test uses it to show a violation is caught.
"""
import argparse
import pathlib
import re
import sys

ROW = re.compile(r"^\|\s*`(?P<name>[a-z_]+)`\s*\|\s*`(?P<folder>[a-z_/]+)`\s*\|(?P<deps>[^|]*)\|")
LINK = re.compile(r"pipeplan::([a-z_]+)")
INCLUDE = re.compile(r'^\s*#\s*include\s+"pipeplan/([a-z_]+)/[^"]+"')
SOURCES = {".cc", ".h", ".cpp", ".hpp"}


def read_table(doc):
    libraries = {}
    in_section = False
    for line in doc.read_text().splitlines():
        if line.startswith("## "):
            in_section = line.strip() == "## Layers"
            continue
        match = ROW.match(line) if in_section else None
        if match:
            deps = {d.strip() for d in match["deps"].split(",") if d.strip()}
            libraries[match["name"]] = (match["folder"], deps)
    return libraries


def nested_folders(folder, libraries):
    """Folders of other libraries inside `folder` (planner/ holds the planner layers)."""
    return [f for f, _ in libraries.values() if f != folder and f.startswith(folder + "/")]


def files_of(root, folder, libraries):
    skip = [root / f for f in nested_folders(folder, libraries)]
    for path in sorted((root / folder).rglob("*")):
        if path.suffix in SOURCES and not any(s in path.parents for s in skip):
            yield path


def cmake_links(root, folder, libraries):
    """pipeplan:: targets named in the folder's own CMakeLists.txt (not its subfolders')."""
    text = (root / folder / "CMakeLists.txt").read_text()
    text = re.sub(r"#.*", "", text)
    names = set(LINK.findall(text))
    return names


NAMED_FILE = re.compile(r"`([a-z_/]+\.(?:cc|h))`")


def read_long_files(doc):
    """The files the section "## Files over 600 lines" names."""
    named = set()
    in_section = False
    for line in doc.read_text().splitlines():
        if line.startswith("## "):
            in_section = line.strip() == "## Files over 600 lines"
            continue
        if in_section:
            named.update(NAMED_FILE.findall(line))
    return named


def check_long_files(root, libraries, named, limit):
    problems = []
    seen = set()
    for folder, _ in libraries.values():
        for path in files_of(root, folder, libraries):
            rel = path.relative_to(root).as_posix()
            seen.add(rel)
            lines = len(path.read_text(errors="replace").splitlines())
            if lines > limit and rel not in named:
                problems.append(f"{rel}: {lines} lines, over {limit}: split it, or "
                                f"name it with its reason in docs/architecture.md")
    for rel in sorted(named):
        if rel not in seen:
            problems.append(f"docs/architecture.md: names {rel}, which is no library's file")
        elif len((root / rel).read_text(errors="replace").splitlines()) <= limit:
            problems.append(f"docs/architecture.md: names {rel} as over {limit} "
                            f"lines, but it is not (any more)")
    return problems


def check(root, libraries, injected):
    problems = []
    for name, (folder, deps) in sorted(libraries.items()):
        if not (root / folder).is_dir():
            problems.append(f"{folder}: folder of library '{name}' does not exist")
            continue
        for dep in deps:
            if dep not in libraries:
                problems.append(f"docs/architecture.md: '{name}' may depend on unknown '{dep}'")
        if (root / folder / "CMakeLists.txt").is_file():
            linked = cmake_links(root, folder, libraries) - {name}
            for extra in sorted(linked - deps):
                problems.append(f"{folder}/CMakeLists.txt: links pipeplan::{extra}, which "
                                f"'{name}' may not depend on")
            for missing in sorted(deps - linked):
                problems.append(f"{folder}/CMakeLists.txt: does not link pipeplan::{missing}, "
                                f"listed for '{name}' in docs/architecture.md")
        allowed = deps | {name}
        for path in files_of(root, folder, libraries):
            rel = path.relative_to(root).as_posix()
            lines = path.read_text(errors="replace").splitlines()
            lines += [f'#include "{h}"' for f, h in injected if f == rel]
            for number, line in enumerate(lines, 1):
                match = INCLUDE.match(line)
                if match and match[1] in libraries and match[1] not in allowed:
                    header = line.split('"')[1]
                    problems.append(f"{rel}:{number}: includes {header}, but "
                                    f"'{name}' may not depend on '{match[1]}'")
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=pathlib.Path(__file__).resolve().parents[2],
                        type=pathlib.Path, help="repository root")
    parser.add_argument("--inject", action="append", default=[], metavar="FILE:HEADER")
    parser.add_argument("--long-file-lines", type=int, default=600, metavar="N",
                        help="the length above which a file must be named (a test lowers it "
                             "to show an unnamed long file is caught)")
    args = parser.parse_args()
    libraries = read_table(args.root / "docs" / "architecture.md")
    if len(libraries) < 2:
        print("check_layers: no layer table found in docs/architecture.md", file=sys.stderr)
        return 1
    injected = [tuple(item.split(":", 1)) for item in args.inject]
    problems = check(args.root, libraries, injected)
    problems += check_long_files(args.root, libraries,
                                 read_long_files(args.root / "docs" / "architecture.md"),
                                 args.long_file_lines)
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        print(f"check_layers: {len(problems)} violation(s)", file=sys.stderr)
        return 1
    print(f"check_layers: {len(libraries)} libraries, every link and include allowed, "
          f"every file over {args.long_file_lines} lines named")
    return 0


if __name__ == "__main__":
    sys.exit(main())
