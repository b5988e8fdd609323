#!/usr/bin/env bash
# Makes sure a Chromium is there for the browser tests (test/browser), and prints where it is:
#
#   COFFER_TEST_CHROMIUM=/usr/bin/chromium
#
# Runs as root on Debian 12 without internet: installs Debian's chromium when it is missing (the
# tests drive it with playwright-core, which downloads no browser of its own), and proves that it
# starts headless.
set -euo pipefail

say() { printf 'chromium.sh: %s\n' "$*" >&2; }
die() {
  say "error: $*"
  exit 1
}

chromium=/usr/bin/chromium
if [ ! -x "$chromium" ]; then
  say 'installing chromium from Debian'
  bash "$(dirname "${BASH_SOURCE[0]}")/apt-install.sh" --no-install-recommends chromium
  [ -x "$chromium" ] || die "$chromium is still missing after installing chromium"
fi

# A browser that cannot start would only show up as a failed test: fail here, naming it.
version=$(timeout 60 "$chromium" --headless --no-sandbox --disable-gpu --version 2>/dev/null) ||
  die "$chromium --version failed"
say "$version"
echo "COFFER_TEST_CHROMIUM=$chromium"
