#!/bin/sh
# Prints the configuration file that packages install as
# /etc/cairn/cairn.yaml: configs/cairn.yaml with its data under
# /var/lib/cairn, the service's StateDirectory.
set -eu
src="$(dirname "$0")/../configs/cairn.yaml"
grep -q '^data_dir: \.\./data$' "$src" || { echo "cairn-yaml.sh: no 'data_dir: ../data' line in $src" >&2; exit 1; }
sed -e 's#^data_dir: \.\./data$#data_dir: /var/lib/cairn#' -e "/^# The repository's example keeps/d" "$src"
