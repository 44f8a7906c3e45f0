# Sourced by benchmark scripts (from the repository's root, after their defaults): the
# command line, the checks each makes before it starts, and appbox's release build.

# usage: the script's header comment (line 2 to `set -euo`) on stderr; exits 64.
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 64; }

# bench_options NAME... -- "$@": `--NAME VALUE` sets the variable NAME (a - in NAME is _
# in the variable: --per-app sets per_app); a NAME written NAME! is a switch, `--NAME`
# alone, which sets it to 1. Anything else: usage.
bench_options() {
  local -A takes=()
  while [ "$1" != -- ]; do
    takes[--${1%!}]=$([[ $1 == *! ]] && echo switch || echo value)
    shift
  done
  shift
  while [ $# -gt 0 ]; do
    [[ $1 == --?* ]] || usage
    local variable=${1#--}
    variable=${variable//-/_}
    case "${takes[$1]:-}" in
      value) printf -v "$variable" %s "${2:?$1 needs a value}"; shift 2 ;;
      switch) printf -v "$variable" 1; shift ;;
      *) usage ;;
    esac
  done
}

# whole NAME...: each variable a whole number above 0, else usage.
whole() {
  local name
  for name; do [[ ${!name} =~ ^[1-9][0-9]*$ ]] || usage; done
}

# need_root WHAT: exits 77 unless run as root, saying what needs it.
need_root() {
  [ "$(id -u)" = 0 ] || { echo "$(basename "$0" .sh): run as root ($1)" >&2; exit 77; }
}

# appbox_release: builds appbox (release) unless $binary is there already.
appbox_release() {
  [ -x "$binary" ] || swift build -c release --product appbox >/dev/null
}
