#!/usr/bin/env bash
# Debian's Chromium for the browser tests (Playwright drives it; it downloads no browser).
# Installs the package with apt-get when no chromium is on PATH (needs root); prints the
# binary's path. Set PRIVACY_CI_CHROMIUM to use another build.
set -euo pipefail
log() { echo "ci_chromium: $*" >&2; }
if [ -n "${PRIVACY_CI_CHROMIUM:-}" ]; then echo "$PRIVACY_CI_CHROMIUM"; exit 0; fi
if ! command -v chromium >/dev/null 2>&1; then
    if [ "$(id -u)" != 0 ]; then
        log "chromium is not installed and this is not root: apt-get install chromium first"
        exit 1
    fi
    log "installing Chromium with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >&2
fi
command -v chromium
