#!/usr/bin/env python3
"""Checks that #includes between the product's folders point one way (doc/layers.md).

Every folder of the library has a rank in LAYERS, lowest first; a file may include files
of its own folder and of folders ranked below it, never above or level with another
folder. The public headers (include/) are below everything. Run from anywhere with the
repository root as the argument (default: two levels up); exits 1 and lists every upward
include found.
"""
import os
import re
import subprocess
import sys

# Lowest first. A file belongs to the longest prefix that matches its path.
LAYERS = [
    "include",
    "src/base",
    "plugins",
    "src/bootstrap",
    "src/topology",
    "cuda",
    "transport",
    "src/cost",
    "algorithms",
    "src/tuning",
    "src/comm",
    "src/engine",
    "src/launcher",
    "src/tools",
]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def layer_of(path):
    best = None
    for i, prefix in enumerate(LAYERS):
        if path == prefix or path.startswith(prefix + "/"):
            if best is None or len(prefix) > len(LAYERS[best]):
                best = i
    return best


def resolve(root, src, inc):
    """The repository path an include names, tried as the build's include paths do."""
    for cand in (os.path.join(os.path.dirname(src), inc), os.path.join("src", inc), inc,
                 os.path.join("include", inc)):
        cand = os.path.normpath(cand)
        if os.path.exists(os.path.join(root, cand)):
            return cand
    return None


EXTS = (".cpp", ".hpp", ".h", ".c", ".cu", ".cuh")


def source_files(root):
    """Tracked sources in a git checkout; every source under the root in a tarball."""
    try:
        out = subprocess.run(["git", "ls-files", "--"] + ["*" + e for e in EXTS], cwd=root, text=True,
                             capture_output=True, check=True).stdout.split()
        if out:
            return out
    except (OSError, subprocess.CalledProcessError):
        pass
    found = []
    for d, subdirs, names in os.walk(root):
        subdirs[:] = [s for s in subdirs if not s.startswith(".") and not s.startswith("build")]
        found += [os.path.relpath(os.path.join(d, n), root) for n in names if n.endswith(EXTS)]
    return sorted(found)


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
    root = os.path.abspath(root)
    files = source_files(root)
    bad = []
    for f in files:
        me = layer_of(f)
        if me is None:
            continue  # frontends, perf tools, tests: above the library
        with open(os.path.join(root, f), errors="replace") as fh:
            for n, line in enumerate(fh, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                target = resolve(root, f, m.group(1))
                if target is None:
                    continue  # generated (coll_config.h) or a system header in quotes
                them = layer_of(target)
                if them is None:
                    bad.append(f"{f}:{n}: includes {target}, which is not part of the library")
                elif them > me or (them == me and LAYERS[them] != LAYERS[me]):
                    bad.append(f"{f}:{n}: {LAYERS[me]} includes {target} of {LAYERS[them]}, a layer above it")
    for b in bad:
        print(b)
    print(f"{len(files)} files checked, {len(bad)} upward include(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
