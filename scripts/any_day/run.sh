#!/usr/bin/env bash
# The suite's clock-touching tests on 20 dates: year ends and starts, a leap day, both DST
# changes in the US and the EU, and under TZ values other than the suite's UTC. The wall clock
# of every Python the run starts is offset so it begins at the date and moves on from there
# (sitecustomize.py beside this script; the monotonic clock stays real). What `make test`
# promises, that it passes on any day, checked without waiting a year.
#
#     scripts/any_day/run.sh [PYTEST ARGS...]     # default: the tests listed below
#
# Prints one line per date (passed/failed counts, then what failed; the whole output is in
# $TMPDIR/infertriage-any-day/) and exits 1 if any date failed.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../.."
PY=${PY:-.venv/bin/python}
if [ $# -eq 0 ]; then
    set -- tests/analyze/test_log_join.py tests/analyze/test_log_timeline.py \
        tests/analyze/test_server_log.py tests/api/test_diagnose_capture.py tests/api/test_capture.py \
        tests/cli/test_logs_cli.py tests/cli/test_metrics_cli.py tests/api/test_diagnose_fleet.py \
        tests/api/test_diagnose_generalise.py tests/schemas/test_baselines.py \
        tests/schemas/test_rundir.py tests/report/test_html.py tests/plan/test_traffic.py \
        tests/cli/test_front_door.py \
        --deselect "tests/api/test_diagnose_fleet.py::test_an_uneven_fleet_is_read_from_prometheus_and_flagged"
    # (that one asks a real Prometheus, whose clock is not moved, for the run's minutes)
fi
logs=${TMPDIR:-/tmp}/infertriage-any-day
mkdir -p "$logs"
DATES=(
    "2026-12-31 23:50:00" "2027-01-01 00:10:00" "2028-02-29 12:00:00" "2028-03-01 00:00:30"
    "2027-03-14 01:59:00" "2027-11-07 01:30:00" "2027-03-28 00:59:30" "2027-10-31 00:59:30"
    "2026-12-04 00:00:00" "2026-12-05 23:59:50" "2027-06-30 23:59:59" "2027-07-01 12:00:00"
    "2029-12-31 23:59:00" "2030-01-01 00:00:10" "2031-05-15 08:00:00" "2032-02-29 23:58:00"
    "2035-09-01 03:00:00" "2038-01-19 03:10:00" "2027-04-01 00:00:00" "2027-09-30 22:00:00"
)
ZONES=(UTC America/New_York Europe/Berlin Asia/Kolkata Pacific/Auckland)
failed=0
for i in "${!DATES[@]}"; do
    day=${DATES[$i]}
    zone=${ZONES[$((i % ${#ZONES[@]}))]}
    # the suite sets TZ=UTC itself (tests/conftest.py); the zone here is the caller's, which
    # must not matter
    offset=$(( $(date -u -d "$day UTC" +%s) - $(date -u +%s) ))
    log="$logs/${day// /T}.log"
    TZ=$zone ANY_DAY_OFFSET_S=$offset PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}" \
        "$PY" -m pytest -q -p no:cacheprovider -n 2 "$@" >"$log" 2>&1
    line=$(tail -1 "$log")
    echo "$day ($zone): $line"
    grep -E "^(FAILED|ERROR) " "$log" | sed 's/^/    /'
    case $line in *" passed"*) case $line in *failed*|*error*) failed=1 ;; esac ;; *) failed=1 ;; esac
done
exit $failed
