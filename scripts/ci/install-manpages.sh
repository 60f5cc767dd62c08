#!/usr/bin/env bash
# What the manual pages' and shell completions' tests need: groff and man
# (they render every page of `coffer generate man` with warnings on) and
# bash-completion, fish and zsh (real shells load and run the scripts of
# `coffer completion bash|fish|zsh`).
set -euo pipefail
SUDO=""; [ "$(id -u)" != 0 ] && SUDO="sudo"
pkgs=(groff-base man-db bash-completion fish zsh)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
