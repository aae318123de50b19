#!/usr/bin/env bash
# The Debian packages attnviz's tests and tools use, installed when missing:
#   chromium        image export (PNG/SVG through kaleido)
#   chromium-headless-shell  the browser tests' Chromium (the same Blink, less CPU a page load; without it
#                   they drive chromium)
#   haproxy         `make serve` (several replicas behind one port)
#   fonts-noto-cjk  Chinese text in screenshots and exported figures
# Idempotent and quick when all are present (no apt call at all). Installs only as root
# (or with passwordless sudo) where apt-get exists; elsewhere it says what is missing and
# exits 0: the tests that need a missing package skip, naming this command.
set -uo pipefail

need=()
command -v chromium >/dev/null 2>&1 || [ -x /usr/bin/chromium ] || need+=(chromium)
[ -x /usr/bin/chromium-headless-shell ] || need+=(chromium-headless-shell)
command -v haproxy >/dev/null 2>&1 || [ -x /usr/sbin/haproxy ] || need+=(haproxy)
# grep reads all of fc-list (no -q): under pipefail an early exit would SIGPIPE fc-list and fail
{ command -v fc-list >/dev/null 2>&1 && fc-list 2>/dev/null | grep -i "Noto Sans CJK" >/dev/null; } || need+=(fonts-noto-cjk)
[ ${#need[@]} -eq 0 ] && exit 0

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO="sudo -n"; else SUDO=none; fi
fi
if ! command -v apt-get >/dev/null 2>&1 || [ "$SUDO" = none ]; then
  echo "system packages missing: ${need[*]} (tests that need them skip; install with: sudo apt-get install -y ${need[*]})" >&2
  exit 0
fi
echo "installing Debian's ${need[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
if ! { $SUDO apt-get update -qq && $SUDO apt-get install -y -qq "${need[@]}" >/dev/null; }; then
  # apt installs nothing of a list that names one package it cannot find (a release without the headless
  # shell): then each on its own, so the others still come
  for pkg in "${need[@]}"; do
    $SUDO apt-get install -y -qq "$pkg" >/dev/null 2>&1 || echo "apt-get could not install $pkg (what needs it: the list at the top of $0)" >&2
  done
fi
exit 0
