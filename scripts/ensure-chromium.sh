#!/usr/bin/env bash
# Make sure Debian's Chromium is at /usr/bin/chromium for the admin's browser tests.
# Playwright drives this system browser; nothing here downloads a browser of its own
# (the browser tests launch /usr/bin/chromium by its path).
set -eu
[ -x /usr/bin/chromium ] && exit 0
if ! command -v apt-get >/dev/null 2>&1; then
  echo "error: /usr/bin/chromium is missing and apt-get is not available;" \
       "install Debian's chromium package to run the admin browser tests" >&2
  exit 1
fi
echo "installing Debian's chromium package" >&2
sudo_=""
[ "$(id -u)" -eq 0 ] || sudo_="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo_ apt-get update -qq
$sudo_ apt-get install -y -qq --no-install-recommends chromium >/dev/null
[ -x /usr/bin/chromium ] || { echo "error: chromium installed but /usr/bin/chromium is missing" >&2; exit 1; }
