#!/usr/bin/env bash
# Installs Debian's chromium for the explorer's browser tests (tests/explorer),
# which drive it with Python Playwright (executable_path=/usr/bin/chromium).
# Idempotent: does nothing when /usr/bin/chromium is already there. Runs
# `apt-get update` only when the package is not known yet. It must never run
# `playwright install` (that downloads a browser from outside the Debian archive).
set -euo pipefail

CHROMIUM=/usr/bin/chromium
if [ -x "$CHROMIUM" ]; then
  echo "chromium is already installed: $("$CHROMIUM" --version 2>/dev/null || echo "$CHROMIUM")"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "installing chromium needs root (or sudo)" >&2; exit 2; }
  SUDO="sudo"
fi

export DEBIAN_FRONTEND=noninteractive
# only refresh the package lists when apt does not know chromium yet
# always refresh the lists first: a stale list can name a version the mirror
# no longer has, and the install would fail on a 404
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends chromium
"$CHROMIUM" --version
