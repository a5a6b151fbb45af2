#!/usr/bin/env bash
# Makes sure Google's Bigtable emulator (`cbtemulator`) is installed, for the
# contract tests in tests/store. Safe to re-run: does nothing when it is there.
#
# It installs the Debian package google-cloud-cli-bigtable-emulator with
# apt-get from the configured apt sources (it never adds a source itself).
# The binary lands in /usr/lib/google-cloud-sdk/platform/bigtable-emulator/,
# where tests/store/conftest.py looks (or set FLL_CBTEMULATOR=/path/to/it).
# This script must never touch anything but apt sources and packages.
set -euo pipefail

PKG=google-cloud-cli-bigtable-emulator
KNOWN_PATHS=(
  /usr/lib/google-cloud-sdk/platform/bigtable-emulator/cbtemulator
  /usr/share/google-cloud-sdk/platform/bigtable-emulator/cbtemulator
  /opt/google-cloud-sdk/platform/bigtable-emulator/cbtemulator
)

find_emulator() {
  if [ -n "${FLL_CBTEMULATOR:-}" ] && [ -x "$FLL_CBTEMULATOR" ]; then echo "$FLL_CBTEMULATOR"; return 0; fi
  if command -v cbtemulator >/dev/null 2>&1; then command -v cbtemulator; return 0; fi
  for p in "${KNOWN_PATHS[@]}"; do
    if [ -x "$p" ]; then echo "$p"; return 0; fi
  done
  return 1
}

if found=$(find_emulator); then
  echo "cbtemulator already installed: $found"
  exit 0
fi

if [ "${FLL_SKIP_BIGTABLE:-}" = "1" ]; then
  echo "cbtemulator missing; FLL_SKIP_BIGTABLE=1, so the Bigtable tests will be skipped"
  exit 0
fi

SUDO=""
if [ "$(id -u)" != "0" ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "installing $PKG needs root (or sudo); run as root or set FLL_SKIP_BIGTABLE=1" >&2
    exit 2
  fi
fi
command -v apt-get >/dev/null 2>&1 || {
  echo "no apt-get here: install Google's Bigtable emulator by hand (gcloud components" \
       "install bigtable) and set FLL_CBTEMULATOR=/path/to/cbtemulator" >&2; exit 2; }

candidate() {
  apt-cache policy "$PKG" 2>/dev/null | awk '/Candidate:/ {print $2}'
}

$SUDO apt-get update -qq
if [ -z "$(candidate)" ] || [ "$(candidate)" = "(none)" ]; then
  echo "$PKG is not offered by any configured apt source: add the Cloud SDK apt" \
       "source by hand, or set FLL_CBTEMULATOR=/path/to/cbtemulator" >&2
  exit 2
fi
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$PKG"

if found=$(find_emulator); then
  echo "cbtemulator installed: $found"
else
  echo "$PKG installed but no cbtemulator found; files:" >&2
  dpkg -L "$PKG" | grep -i cbtemulator >&2 || true
  exit 1
fi
