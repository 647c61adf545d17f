#!/usr/bin/env bash
# One device call's worth of GPU work, in phases, each under its own time limit, so that one
# slow phase cannot take the others' time and each leaves its log whatever happens:
#
#   bash bench/gpu_batch.sh WHEELS "name:SECONDS:command" ["name:SECONDS:command" ...]
#
# WHEELS is the folder ../shared/gpu/prepare.sh filled (.gpu, .gpu236). The script sources its
# bootstrap.sh, installs eqsat from this checkout without the network, points EQSAT_CORPUS and
# EQSAT_CORPUS_THUNDER at .gpudata/corpus and .gpudata/corpus_thunder where they are (copies
# carried with the call), then runs each phase's command with bash under `timeout`, its output
# in $OUT/NAME.log (OUT defaults to ./gpu_out) and the last lines printed. Commands write their
# JSON under $OUT themselves (e.g. "seeds:240:python3 bench/seeds.py --json \$OUT/seeds.json").
set -uo pipefail
cd "$(dirname "$0")/.."
wheels="${1:?usage: bench/gpu_batch.sh WHEELS name:SECONDS:command ...}"
shift
export OUT="${OUT:-$PWD/gpu_out}"
mkdir -p "$OUT"
# shellcheck disable=SC1091
source "$wheels/bootstrap.sh" || { echo "gpu_batch: $wheels/bootstrap.sh failed"; exit 1; }
python3 -m pip install -q --no-deps --no-build-isolation -e . || { echo "gpu_batch: eqsat did not install"; exit 1; }
[ -d .gpudata/corpus ] && export EQSAT_CORPUS="$PWD/.gpudata/corpus"
[ -d .gpudata/corpus_thunder ] && export EQSAT_CORPUS_THUNDER="$PWD/.gpudata/corpus_thunder"
status=0
for phase in "$@"; do
    name="${phase%%:*}"; rest="${phase#*:}"; seconds="${rest%%:*}"; command="${rest#*:}"
    if [ -z "$name" ] || ! [[ "$seconds" =~ ^[0-9]+$ ]] || [ "$command" = "$rest" ]; then
        echo "gpu_batch: a phase is name:SECONDS:command, got: $phase"; status=2; continue
    fi
    start=$(date +%s)
    timeout --kill-after=10 "$seconds" bash -c "$command" > "$OUT/$name.log" 2>&1
    rc=$?
    echo "=== $name: exit $rc after $(( $(date +%s) - start )) s (limit $seconds s)"
    tail -n 25 "$OUT/$name.log"
    [ $rc -eq 0 ] || status=1
done
exit $status
