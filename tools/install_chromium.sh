#!/bin/sh
# Debian's Chromium for the report's browser test (tox -e report).
#
# Does nothing when /usr/bin/chromium exists. Otherwise installs Debian's
# `chromium` package with apt-get (CI runs as root with Debian's repositories
# reachable). When it cannot (not root, no apt-get, the install fails), it says
# why and exits 0: the browser test then skips, naming the missing browser.
CHROMIUM=/usr/bin/chromium

if [ -x "$CHROMIUM" ]; then
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install_chromium: no apt-get on this machine (not Debian-like);" \
         "the browser test will skip" >&2
    exit 0
fi
if [ "$(id -u)" != 0 ]; then
    echo "install_chromium: not root, cannot apt-get install chromium;" \
         "install Debian's 'chromium' package for the browser test" >&2
    exit 0
fi
echo "install_chromium: $CHROMIUM missing, installing Debian's chromium package"
export DEBIAN_FRONTEND=noninteractive
if ! apt-get update -q; then
    echo "install_chromium: apt-get update failed; the browser test will skip" >&2
    exit 0
fi
if ! apt-get install -y -q --no-install-recommends chromium; then
    echo "install_chromium: apt-get install chromium failed; the browser test will skip" >&2
    exit 0
fi
if [ ! -x "$CHROMIUM" ]; then
    echo "install_chromium: the chromium package did not provide $CHROMIUM;" \
         "the browser test will skip" >&2
fi
exit 0
