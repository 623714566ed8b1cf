# Shared by the throwaway database servers of the tests (.ci/postgres.sh, .ci/mariadb.sh); sourced after
# the script defines log().

# apt_install PRODUCT NO_INSTALL_VAR PACKAGE...: installs Debian's packages for PRODUCT, as root or with
# password-less sudo, unless the variable named NO_INSTALL_VAR is 1 (the tests never install).
apt_install() {
  local product=$1 no_install_var=$2
  shift 2
  if [ "${!no_install_var:-}" = 1 ]; then
    log "$product is not installed (and $no_install_var=1)"
    return 1
  fi
  local sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    if sudo -n true 2>/dev/null; then sudo=(sudo -n); else
      log "$product is not installed and apt-get needs root"
      return 1
    fi
  fi
  log "installing Debian's $* package"
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
  # A package's own service is not started in containers (policy-rc.d); the scripts run theirs from DIR.
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >&2
}

random_port() {
  # 20000-59999, outside the usual ephemeral range of Linux (32768-60999 overlaps a little; retried).
  echo $((20000 + $(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % 40000))
}
