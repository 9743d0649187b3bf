#!/usr/bin/env bash
# The Debian packages that provide the shared libraries of the given
# binaries, one per line: what the runtime image installs. Fails, naming the
# library, if one belongs to no package.
set -euo pipefail
for f in $(ldd "$@" | awk '/=> \// {print $3}' | sort -u); do
  # ldd may print /lib or /usr/lib (merged /usr) or an alternatives link.
  dpkg -S "$f" 2>/dev/null || dpkg -S "/usr$f" 2>/dev/null ||
    dpkg -S "$(realpath "$f")" 2>/dev/null ||
    { echo "runtime-packages: no package owns $f" >&2; exit 1; }
done | cut -d: -f1 | sort -u
