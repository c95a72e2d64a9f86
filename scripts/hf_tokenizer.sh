#!/usr/bin/env bash
# Hugging Face's own tokenizer implementation for JavaScript (npm @huggingface/tokenizers, the
# tokenizers.js of transformers.js) on an exported tokenizer.json (tests/export/test_hf_export.cpp).
#
#   scripts/hf_tokenizer.sh fetch
#       Installs @huggingface/tokenizers@0.2.0 with npm into ${MARIN_CACHE:-$HOME/.cache/marin}/
#       npm-hf (outside the repository; idempotent). Exits non-zero with the reason when node,
#       npm or the registry is unavailable.
#   scripts/hf_tokenizer.sh encode EXPORT_DIR DOCS.jsonl OUT.jsonl
#       Loads EXPORT_DIR/tokenizer.json + tokenizer_config.json and writes one line {"ids": [...]}
#       per {"text": ...} line of DOCS.jsonl (no special tokens added).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${MARIN_CACHE:-$HOME/.cache/marin}/npm-hf"
package=@huggingface/tokenizers@0.2.0

source "$here/npm_fetch.sh"
fetch() { npm_fetch "$cache" "$package"; }

case "${1:-}" in
  fetch) fetch ;;
  encode)
    [[ $# -eq 4 ]] || { echo "usage: $0 encode EXPORT_DIR DOCS.jsonl OUT.jsonl" >&2; exit 2; }
    fetch
    NODE_PATH="$cache/node_modules" node "$here/hf_tokenizer.mjs" "$cache" "$2" "$3" "$4"
    ;;
  *)
    sed -n '2,12p' "$0" >&2
    exit 2
    ;;
esac
