# Shared helpers for scripts/*.sh (sourced, not run).
VENV="${KEMU_VENV:-$PWD/.venv}"

step() { printf '\n== %s\n' "$*"; }

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

# Install Debian packages that are missing (one apt-get update per run, only if needed).
ensure_apt_packages() {
  local missing=()
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    step "apt-get install ${missing[*]}"
    as_root apt-get update -qq
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
}

# A virtualenv in the repo, with a current pip.
ensure_venv() {
  if [ ! -x "$VENV/bin/python" ]; then
    step "python -m venv $VENV"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q --upgrade pip
  fi
}

# pip install quietly (setuptools' editable-install notice is noise); on failure, show why.
pip_install() {
  local log
  log="$(mktemp)"
  if ! "$VENV/bin/pip" install -q "$@" >"$log" 2>&1; then
    cat "$log" >&2
    rm -f "$log"
    return 1
  fi
  rm -f "$log"
}
