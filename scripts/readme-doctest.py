#!/usr/bin/env python3
"""Runs the shell blocks of README.md, in order, as a test: a README that drifts from the
product fails the build.

    scripts/readme-doctest.py [--list] [--only TAG] [README]

Blocks are the ```sh fences (every line is run) and the ```console fences (the lines after
a `$ ` prompt, with their `\\` continuations; the rest is output, not checked). A comment on
the line before a fence marks it:

    <!-- doctest: skip REASON -->   not run (a placeholder, a registry); REASON is printed
    <!-- doctest: TAG -->           run only with --only TAG (e.g. docker: needs an engine)

Without --only, the unmarked blocks run. The blocks run one after another in one bash
(so a variable set in one is seen in the next), with `set -euo pipefail`, in a copy of
the repository (its tracked files as they are in the working tree: what the blocks write
there, a build or a report, stays out of the repository), in a mount namespace of their own where /mnt and /data are empty
tmpfs mounts and HOME is a temporary directory: the README's paths work as written and
nothing of the machine's changes but what the blocks install. AppBox mounts left at the
end (the set-up's ./sandbox) are unmounted. Prints each block as it runs and a summary
line; exits 1 when a block fails, 64 on bad usage.
"""
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

FENCE = re.compile(r"^```(\w+)\s*$")
MARK = re.compile(r"^<!--\s*doctest:\s*(\S+)\s*(.*?)\s*-->\s*$")


def blocks(path):
    """(first line number, language, mark, reason, commands) of every sh/console block."""
    lines = open(path, encoding="utf-8").read().split("\n")
    found, index = [], 0
    while index < len(lines):
        fence = FENCE.match(lines[index])
        if not fence:
            index += 1
            continue
        language, start = fence.group(1), index + 1
        end = start
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        if end == len(lines):
            sys.exit(f"readme-doctest: {path}:{index + 1}: a fence that never closes")
        mark = MARK.match(lines[index - 1]) if index > 0 else None
        body = lines[start:end]
        if language == "console":
            body = console_commands(body)
        if language in ("sh", "console"):
            found.append((index + 1, language, mark.group(1) if mark else "", mark.group(2) if mark else "", body))
        index = end + 1
    return found


def console_commands(body):
    """The commands of a console transcript: `$ ` lines and their continuations."""
    commands, continuing = [], False
    for line in body:
        if line.startswith("$ ") or continuing:
            text = line[2:] if line.startswith("$ ") and not continuing else line
            commands.append(text)
            continuing = text.rstrip().endswith("\\")
    return commands


def copy_repository(repo, destination):
    """Copies the tracked files of `repo` as they are in its working tree."""
    listed = subprocess.run(["git", "-C", repo, "ls-files", "-z"], capture_output=True, check=True).stdout
    for name in listed.decode("utf-8", "surrogateescape").split("\0"):
        source = os.path.join(repo, name)
        if not name or not os.path.lexists(source):
            continue
        target = os.path.join(destination, name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copy2(source, target, follow_symlinks=False)


def script(selected, repo):
    """One bash script running the selected blocks, naming each before it starts."""
    parts = ["set -euo pipefail", f"cd {shlex.quote(repo)}"]
    for line, language, _, _, body in selected:
        parts.append(f"echo 'readme-doctest: README.md:{line} ({language})' >&2")
        parts.append(f"echo 'readme-doctest: block at README.md:{line}' > \"$DOCTEST_CURRENT\"")
        parts.extend(body)
    return "\n".join(parts) + "\n"


# Runs as root in a private mount namespace: /mnt and /data become empty tmpfs mounts (a
# /data made for it is removed afterwards), the blocks run, and AppBox mounts they left
# are unmounted before the namespace goes.
NAMESPACE = r"""
set -u
made_data=0
[ -d /data ] || { mkdir /data; made_data=1; }
unshare -m --propagation private bash -c '
  mount -t tmpfs -o mode=0755 doctest-mnt /mnt && mount -t tmpfs -o mode=0755 doctest-data /data || exit 71
  bash "$1"; status=$?
  awk "\$3 == \"fuse.appbox\" {print \$2}" /proc/self/mounts | while read -r m; do
    appbox unmount "$m" 2>/dev/null || fusermount3 -uz "$m"
  done
  exit $status
' doctest "$1"
status=$?
[ "$made_data" = 1 ] && rmdir /data
exit $status
"""


def main(argv):
    only = None
    listing = False
    rest = []
    arguments = iter(argv)
    for argument in arguments:
        if argument == "--only":
            only = next(arguments, None)
            if not only:
                print("readme-doctest: --only needs a tag (see scripts/readme-doctest.py --help)", file=sys.stderr)
                return 64
        elif argument == "--list":
            listing = True
        elif argument in ("-h", "--help"):
            print(__doc__.strip())
            return 0
        elif argument.startswith("-"):
            print(f"readme-doctest: unknown option {argument} (see scripts/readme-doctest.py --help)", file=sys.stderr)
            return 64
        else:
            rest.append(argument)
    repo = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
    readme = rest[0] if rest else os.path.join(repo, "README.md")
    selected, skipped = [], []
    for block in blocks(readme):
        line, language, mark, reason, _ = block
        if mark == "skip":
            skipped.append(f"README.md:{line}: {reason or 'no reason given'}")
        elif mark == (only or ""):
            selected.append(block)
    if only:
        skipped = []  # said by the run without --only
    if listing:
        for line, language, mark, _, body in selected:
            print(f"README.md:{line} {language} {mark or '-'}: {len(body)} lines")
        return 0
    if not selected:
        print("readme-doctest: no block selected", file=sys.stderr)
        return 1
    if os.geteuid() != 0:
        print("readme-doctest: run as root (the README's set-up installs packages; blocks mount)", file=sys.stderr)
        return 77
    with tempfile.TemporaryDirectory(prefix="appbox-doctest-") as work:
        copy = os.path.join(work, "repository")
        copy_repository(repo, copy)
        path = os.path.join(work, "blocks.sh")
        with open(path, "w") as file:
            file.write(script(selected, copy))
        home = os.path.join(work, "home")
        os.mkdir(home)
        current = os.path.join(work, "current")
        environment = dict(os.environ, HOME=home, DOCTEST_CURRENT=current)
        environment["PATH"] = "/usr/local/bin:" + environment.get("PATH", "/usr/bin:/bin")
        status = subprocess.run(["bash", "-c", NAMESPACE, "doctest", path], env=environment).returncode
        where = open(current).read().strip() if os.path.exists(current) else "before the first block"
    lines = [f"readme-doctest: skipped {entry}" for entry in skipped]
    if status != 0:
        lines.append(
            f"readme-doctest: FAILED (exit {status}) in the {where.removeprefix('readme-doctest: ')}; "
            f"{len(selected)} blocks selected, {len(skipped)} skipped"
        )
    else:
        lines.append(f"readme-doctest: {len(selected)} blocks ran{' (' + only + ')' if only else ''}, {len(skipped)} skipped")
    print("\n".join(lines))
    if os.environ.get("APPBOX_CI_SUMMARY"):  # .ci/run's summary
        with open(os.environ["APPBOX_CI_SUMMARY"], "a") as summary:
            summary.write("\n".join(lines) + "\n")
    return 0 if status == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
