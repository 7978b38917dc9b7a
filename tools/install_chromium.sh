#!/bin/sh
# Debian's Chromium for the report's browser test (tox -e report).
#
#     sh tools/install_chromium.sh [NOTE_FILE]
#
# Does nothing when /usr/bin/chromium exists. Otherwise installs Debian's
# `chromium` package with apt-get (CI runs as root with Debian's repositories
# reachable). When it cannot (no apt-get, not root, the install fails), it
# prints why, writes the same sentence to NOTE_FILE (the browser test skips
# with it) and exits 0: a machine without a browser still runs the other tests.
CHROMIUM=/usr/bin/chromium
NOTE=${1:-}

if [ -n "$NOTE" ]; then
    rm -f "$NOTE"
fi

unavailable() {
    echo "install_chromium: $1" >&2
    if [ -n "$NOTE" ]; then
        printf '%s\n' "$1" > "$NOTE"
    fi
    exit 0
}

if [ -x "$CHROMIUM" ]; then
    exit 0
fi
command -v apt-get >/dev/null 2>&1 ||
    unavailable "$CHROMIUM is missing and there is no apt-get to install Debian's chromium"
[ "$(id -u)" = 0 ] ||
    unavailable "$CHROMIUM is missing and only root can apt-get install chromium"
echo "install_chromium: $CHROMIUM is missing: installing Debian's chromium package"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q ||
    unavailable "$CHROMIUM is missing and 'apt-get update' failed (see its output above)"
apt-get install -y -q --no-install-recommends chromium ||
    unavailable "$CHROMIUM is missing and 'apt-get install chromium' failed (see above)"
[ -x "$CHROMIUM" ] ||
    unavailable "Debian's chromium package was installed but $CHROMIUM is not there"
exit 0
