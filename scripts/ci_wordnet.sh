#!/usr/bin/env bash
# WordNet 3.0's database for the role graph of `privacy-ci kb build` (Debian's wordnet-base,
# in /usr/share/wordnet). Installs the package with apt-get when its noun files are missing
# (needs root). Set PRIVACY_CI_WORDNET to use another folder.
set -euo pipefail
log() { echo "ci_wordnet: $*" >&2; }
folder="${PRIVACY_CI_WORDNET:-/usr/share/wordnet}"
if [ -f "$folder/index.noun" ] && [ -f "$folder/data.noun" ]; then exit 0; fi
if [ "$(id -u)" != 0 ]; then
    log "no WordNet database in $folder and not root: apt-get install wordnet-base first"
    exit 1
fi
log "installing WordNet (wordnet-base) with apt-get"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
apt-get install -y -qq --no-install-recommends wordnet-base >&2
