#!/usr/bin/env bash
# Fetches the CMU Pronouncing Dictionary as the npm package cmu-pronouncing-dictionary@3.0.0,
# verifies the tarball's sha256, and extracts its index.js (the only file mona reads).
#
#   scripts/fetch-cmudict.sh [CACHE_DIR]
#
# CACHE_DIR: the first argument, else $MONA_DATA_CACHE, else data/cache/ in the repository.
# Result:    CACHE_DIR/cmu-pronouncing-dictionary-3.0.0.tgz        (verified tarball)
#            CACHE_DIR/cmu-pronouncing-dictionary-3.0.0/index.js   (extracted)
# The path of index.js is the last line printed on stdout.
#
# Idempotent: a cached tarball with the right checksum is reused (no network); a cached
# tarball with a wrong checksum is deleted and fetched again; a freshly fetched tarball with a
# wrong checksum is deleted and the script fails. index.js is re-extracted from the verified
# tarball (via a temporary file + rename) whenever it is missing or differs.
# Needs npm (scripts/install-deps.sh installs Debian's npm when it is missing).
set -euo pipefail

PKG=cmu-pronouncing-dictionary
VERSION=3.0.0
SHA256=ca16ac157e95277ffe1ca105a5ca2c833a15626024f15711c2a425da367b68ce
TARBALL_NAME="${PKG}-${VERSION}.tgz"

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache_dir="${1:-${MONA_DATA_CACHE:-${repo_root}/data/cache}}"
mkdir -p "$cache_dir"
cache_dir=$(cd "$cache_dir" && pwd)
tarball="${cache_dir}/${TARBALL_NAME}"
extract_dir="${cache_dir}/${PKG}-${VERSION}"
index_js="${extract_dir}/index.js"

log() { echo "fetch-cmudict: $*" >&2; }

sha_of() { sha256sum "$1" | cut -d' ' -f1; }

fetch() {
  command -v npm >/dev/null || {
    log "npm is needed to fetch ${PKG}@${VERSION}; run scripts/install-deps.sh (Debian package npm)"
    exit 1
  }
  log "fetching ${PKG}@${VERSION} with npm pack into ${cache_dir}"
  local tmp
  tmp=$(mktemp -d "${cache_dir}/.npm-pack.XXXXXX")
  # Quiet, no audit/fund/update-notifier chatter; npm's own cache is used as usual.
  if ! (cd "$tmp" && NPM_CONFIG_UPDATE_NOTIFIER=false NPM_CONFIG_FUND=false \
        NPM_CONFIG_AUDIT=false npm pack --silent "${PKG}@${VERSION}" >/dev/null); then
    rm -rf "$tmp"
    log "npm pack ${PKG}@${VERSION} failed (network? registry?)"
    exit 1
  fi
  if [[ ! -f "${tmp}/${TARBALL_NAME}" ]]; then
    rm -rf "$tmp"
    log "npm pack did not produce ${TARBALL_NAME}"
    exit 1
  fi
  mv -f "${tmp}/${TARBALL_NAME}" "$tarball"
  rm -rf "$tmp"
}

if [[ -f "$tarball" ]]; then
  got=$(sha_of "$tarball")
  if [[ "$got" == "$SHA256" ]]; then
    log "cached tarball verified: ${tarball}"
  else
    log "cached ${tarball} has sha256 ${got}, expected ${SHA256}: deleting it and fetching again"
    rm -f "$tarball"
  fi
fi

if [[ ! -f "$tarball" ]]; then
  fetch
  got=$(sha_of "$tarball")
  if [[ "$got" != "$SHA256" ]]; then
    rm -f "$tarball"
    log "REFUSED: ${PKG}@${VERSION} tarball has sha256"
    log "    ${got}"
    log "expected"
    log "    ${SHA256}"
    log "the download was deleted; the package on the registry is not the one mona was built for."
    exit 1
  fi
  log "tarball verified (sha256 ${SHA256}): ${tarball}"
fi

# Extract package/index.js from the verified tarball next to its final place, then rename.
mkdir -p "$extract_dir"
tmp_js=$(mktemp "${extract_dir}/.index.js.XXXXXX")
trap 'rm -f "$tmp_js"' EXIT
if ! tar -xzOf "$tarball" package/index.js >"$tmp_js"; then
  log "cannot extract package/index.js from ${tarball}"
  exit 1
fi
[[ -s "$tmp_js" ]] || { log "package/index.js in ${tarball} is empty"; exit 1; }
if [[ -f "$index_js" ]] && cmp -s "$tmp_js" "$index_js"; then
  rm -f "$tmp_js"
  log "index.js up to date: ${index_js}"
else
  chmod 0644 "$tmp_js"
  mv -f "$tmp_js" "$index_js"
  log "extracted ${index_js} ($(wc -l <"$index_js") lines)"
fi
trap - EXIT
echo "$index_js"
