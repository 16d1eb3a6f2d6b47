#!/usr/bin/env bash
# check_layers.sh: fail when a source file includes a layer above its own.
#
# The layers, bottom to top (docs/architecture.md): forge/core, forge/format,
# forge/source, forge/model, then forge/artifact and forge/verify side by side
# (neither may include the other), then store/, api/, daemon/.  A file may
# include its own folder and any layer below it; nothing else.
set -u
cd "$(dirname "$0")/../.."

rank() {
	case "$1" in
	forge/core) echo 0 ;;
	forge/format) echo 1 ;;
	forge/source) echo 2 ;;
	forge/model) echo 3 ;;
	forge/artifact | forge/verify) echo 4 ;;
	store) echo 5 ;;
	api) echo 6 ;;
	daemon) echo 7 ;;
	*) echo -1 ;;
	esac
}

# The layer a path belongs to: forge/X for anything under forge/X/, else the top folder.
layer_of() {
	case "$1" in
	forge/*/*) local rest=${1#forge/}; echo "forge/${rest%%/*}" ;;
	forge/*) echo "forge" ;;
	*) echo "${1%%/*}" ;;
	esac
}

bad=0
while IFS= read -r f; do
	own=$(layer_of "$f")
	own_rank=$(rank "$own")
	if [ "$own_rank" -lt 0 ]; then
		echo "check-layers: $f is in no layer (forge/ files live in forge/<layer>/)"
		bad=1
		continue
	fi
	while IFS=: read -r line inc; do
		inc=${inc#*\"}; inc=${inc%\"*}
		[ -e "$inc" ] || continue   # a system or generated header
		dep=$(layer_of "$inc")
		[ "$dep" = "$own" ] && continue
		dep_rank=$(rank "$dep")
		if [ "$dep_rank" -lt 0 ] || [ "$dep_rank" -ge "$own_rank" ]; then
			echo "check-layers: $f:$line includes $inc ($dep is not below $own)"
			bad=1
		fi
	done < <(grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f")
done < <(git ls-files 'forge/*.[ch]' 'store/*.[ch]' 'api/*.[ch]' 'daemon/*.[ch]')

if [ "$bad" -ne 0 ]; then
	echo "check-layers: failed"
	exit 1
fi
echo "check-layers: ok"
