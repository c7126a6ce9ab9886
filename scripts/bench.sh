#!/usr/bin/env bash
# Measures cairn's ingest throughput, CPU and memory in the shape of a small
# two-core board: the publisher (and Mosquitto) on core 0, `cairn run` alone
# on core 1 (one core, as on a small board; cairn then runs one P). 100 simulated devices send JSON messages
# (millisecond ts + 2 numeric fields = 2 readings) at QoS 1.
#
#   scripts/bench.sh [CASE...]     CASE: embedded_max external_drain embedded_paced
#                                        external_paced embedded_pruning sealing
#                                        uplink_drain uplink_backlog sdwear
#                                        window1 storage retention series
#                                        dashboard mqtt_upstream
#   scripts/bench.sh soak          alone, not among the default cases (an hour)
#   scripts/bench.sh cgroup_drain  not among the default cases (minutes; root)
#
# Cases (each run on a fresh data dir, BENCH_RUNS times, default 3):
#   embedded_max    embedded broker; `cairn sim -rate 0 -count 200000
#                   -inflight 100` as fast as it goes; readings/s = readings
#                   stored / the publisher's elapsed seconds
#   external_drain  Mosquitto holds 200,000 messages queued for cairn's
#                   persistent session; time from starting cairn until all
#                   400,000 readings are stored
#   embedded_paced  embedded broker; `cairn sim -rate 10000 -duration 20s`;
#                   cairn's share of one core (the broker's work included)
#   external_paced  the same load through Mosquitto (on core 0) to cairn
#                   subscribed to it: cairn's share of one core from the
#                   publisher's start until every reading is stored, and
#                   Mosquitto's share of core 0
#   embedded_pruning  two cairns, one after the other, on copies of a store
#                   of PRUNING_SERIES (200) series x 1 Hz x PRUNING_DAYS
#                   (30) days: one with retention by age off, one with a
#                   raw max age of 7 days, whose first prune begins a
#                   minute after the start. embedded_max's publisher runs
#                   from 5 s before that minute; the readings/s ingest
#                   takes over 8 s from a second after the prune began
#                   (the prune must still run at the end), and over the
#                   same seconds without it: their ratio
#                   (pruning_alone_ratio, should stay above 0.8), the
#                   readings the prune removed a second meanwhile, and
#                   cairn's share of its core. BENCH_CONFIG_EXTRA must
#                   not have a retention block here.
#   sealing         embedded_max and external_drain, each twice: with the
#                   default buckets of 200 readings (each of the 200
#                   series fills and seals 10), and with
#                   store.bucket_samples 10000 (none fills, none is
#                   sealed): readings/s and CPU of each, and their ratio
#                   (LOAD_ratio, should stay above 0.9). Both with the same
#                   memory limit: none (memory_limit_mib 0) unless
#                   BENCH_CONFIG_EXTRA sets one, since the auto limit
#                   grows with bucket_samples. Needs Mosquitto.
#   uplink_drain    UPLINK_DRAIN (1,000,000) readings stored while the
#                   upstream is down, then a local VictoriaMetrics (on core
#                   0) comes up and cairn restarts: readings/s from cairn's
#                   start until nothing is pending, and peak RSS meanwhile
#   cgroup_drain    as uplink_drain, with the release build
#                   (scripts/release-tags, as scripts/binsize.sh builds
#                   it), and the drain run inside a memory cgroup limited
#                   to CGROUP_DRAIN_MIB (64) MiB: cgroup v2 (memory.max)
#                   where the memory controller is given to the script's
#                   cgroup's children, else cgroup v1's memory controller
#                   (memory.limit_in_bytes); fails when neither can be
#                   made (not root, no memory controller). The cgroup's
#                   peak (memory.peak, v1 memory.max_usage_in_bytes),
#                   cairn's VmHWM, the cgroup's OOM kills (v2
#                   memory.events, v1 memory.oom_control; must be 0) and
#                   times it hit its limit, readings/s, and the readings
#                   VictoriaMetrics holds afterwards against the backlog
#                   (must be equal). Fails if cairn is killed.
#   mqtt_upstream   as uplink_drain, to a local Mosquitto over TLS with a
#                   client certificate (kind: mqtt, payload
#                   BENCH_MQTT_PAYLOAD: json, senml or influx, default
#                   json; over mqtts://, or wss:// to a websockets
#                   listener with BENCH_MQTT_SCHEME=wss; certificates
#                   made with openssl): readings/s
#                   from cairn's start until nothing is pending, CPU
#                   seconds per 100 k readings, peak RSS, Mosquitto's
#                   CPU, and the bytes cairn's TLS connection sent per
#                   reading (ss's bytes_sent at the end: TLS records,
#                   MQTT headers and the payload)
#   uplink_backlog  the upstream stays down while UPLINK_BACKLOG
#                   (10,000,000) readings are stored at full speed: RSS
#                   (VmRSS, and VmHWM) when 1 M and when all are stored;
#                   and, where the script can make cairn a memory cgroup
#                   of its own (cgroup v1's memory controller, or v2 with
#                   the memory controller given to its children; as
#                   root), what that cgroup is charged: its peak
#                   (memory.max_usage_in_bytes, v2 memory.peak), and at
#                   the end its usage, the page cache in it (mostly the
#                   store's files, read or written), the part of that
#                   mapped, its anonymous memory, and the major page
#                   faults in it meanwhile (pages read again from disk:
#                   reclaimed too soon). BENCH_MEMORY_MAX_MIB limits the
#                   cgroup.
#   sdwear          SD-card wear at the default config: 100 simulated
#                   sensors, one message of 2 readings a second each
#                   (`cairn sim -devices 100 -rate 100`, one connection),
#                   for SDWEAR_DURATION (600) seconds after
#                   SDWEAR_WARMUP (60): bytes the cairn process wrote
#                   (/proc/PID/io write_bytes) per reading stored and per
#                   day at that rate, group commits a second, and the
#                   median and p99 time from PUBLISH to PUBACK as the
#                   publisher saw it, over the whole run. Target: at most
#                   1 GiB a day, PUBACK p99 at most 1 s. With
#                   SDWEAR_POLL=S, the dashboard is open meanwhile: its
#                   health, devices and 1h charts parts are fetched every
#                   S seconds, as the page does every 10 s.
#   window1         a lone publisher that waits for each PUBACK before it
#                   sends the next message, at the default config: one
#                   paho client, one device, QoS 1, window 1
#                   (scripts/bench/window1) for WINDOW1_DURATION (10)
#                   seconds: messages acknowledged a second (msgs_per_sec;
#                   target at least 100) and the median PUBACK time; then
#                   ten `mosquitto_pub -q 1` one after another, each a
#                   process of its own: the seconds the ten took
#                   (mosquitto_pub_10_s). Needs mosquitto-clients.
#   storage         the store's own benchmarks (go test -bench ./buffer/):
#                   bytes on disk per reading after sealing and compaction
#                   for STORAGE_SERIES (1000) series x 1 Hz x STORAGE_HOURS
#                   (24) h, next to one reading per key; p99 of the latest
#                   50 readings of one device among 1000 with 30 days, and
#                   of one day of one series at 1 Hz; stats of a 30-day
#                   range (group=all) and of a year by day, for one series
#                   with a year at 1 Hz, and the records they read
#   retention       the retention benchmarks (go test -bench ./buffer/):
#                   RETENTION_SERIES (1000) series x 1 Hz x RETENTION_DAYS
#                   (30) days as sealed buckets, then a raw max age of 7
#                   days: prune_s and compact_s (the time to delete and to
#                   give the space back), disk_bytes_before/after and their
#                   ratio (about 7/30 expected); then the writer's ingest
#                   (RETENTION_INGEST readings, 200 series, commits of
#                   1,000) into such a store alone and while that prune and
#                   compaction run: ingest_alone readings/s, and
#                   ingest_pruning readings/s over the time the prune and
#                   compaction took; ingest_ratio of the two (should stay
#                   above 0.8). Then a store with an 8 MiB memtable (the
#                   store package's default) filled with the upstream down to several times a
#                   disk cap of RETENTION_DISK_CAP_MIB (256): the data
#                   directory's peak and final size over the cap
#                   (disk_cap_peak_ratio, disk_cap_end_ratio). With the
#                   defaults it stores 2.6 G readings per run: about 20
#                   minutes a run here.
#   series          the store's memory per series (go test -bench
#                   SeriesMemory ./buffer/): heap bytes per series after
#                   one reading to each of 10,000 and of 100,000 new series
#                   (100 metrics a device) through the writer and a
#                   checkpoint (bytes_per_series), and after the store is
#                   opened again and loads them (reopened_bytes_per_series);
#                   the same with a unit on every series (…_units)
#   dashboard       the dashboard's benchmarks (go test -bench Dashboard
#                   ./gateway/httpapi/), BENCH_RUNS (here default 5)
#                   times, the test binary alone on core 1 with
#                   GOMAXPROCS=1: the server's time to answer GET / of 100
#                   devices x 5 metrics with d000's five 24-hour charts
#                   (page_ms; page_cpu_ms, the process's CPU time per
#                   request; page_bytes) and d000's 90-day charts part
#                   (chart90d_ms, chart90d_cpu_ms, chart90d_bytes), through
#                   the real handler over a real store: one reading a
#                   minute, d000 for 90 days, the other 99 devices for
#                   DASHBOARD_OTHER_DAYS (7) days (90 for the full 64.8 M
#                   readings). The store is made once, on both cores,
#                   in DASHBOARD_DIR (default
#                   $TMPDIR/cairn-bench-dashboard) and kept for later runs:
#                   store_readings, store_bytes, the seconds it took to
#                   make (store_generate_s), and generated_now_s when this
#                   run made it. The worst device, one with 1,000
#                   metrics (one reading an hour for 90 days, kept in
#                   DASHBOARD_WIDE_DIR, default
#                   $TMPDIR/cairn-bench-dashboard-wide): its 90-day charts
#                   part (wide_chart90d_ms, wide_chart90d_cpu_ms,
#                   wide_chart90d_bytes, wide_chart90d_charts: the charts
#                   drawn) and its page at 90 days (wide_page_…), and
#                   its store (wide_store_readings, wide_store_bytes,
#                   wide_store_generate_s, wide_generated_now_s);
#                   DASHBOARD_BENCH=Wide runs these alone.
#                   Targets: page under 100 ms, chart under 50 ms, page
#                   under 200 KB.
#   soak            (alone, never by default) `cairn run` for SOAK_DURATION
#                   (1h) with 100 sensors at 1 Hz, the dashboard fetched
#                   every 10 s, an upstream VictoriaMetrics down for a sixth
#                   of the run up to its half, retention and a disk cap
#                   acting; RSS (and its parts), goroutines, open files,
#                   disk, backlog, commit time and the machine's CPU steal
#                   sampled every SOAK_SAMPLE (1m), their
#                   slopes over the last half judged flat or not, a CSV and
#                   an SVG plot in SOAK_OUT, and every reading acknowledged
#                   counted in the upstream (scripts/bench/soak,
#                   docs/performance.md#soak)
#
# Figures: readings_per_sec, cpu_sec_per_100k_msgs (utime+stime of cairn from
# just before the load until all readings are stored and a query has had
# the journal checkpointed; for external_drain from cairn's start),
# cpu_share_percent (for the paced cases: cairn's CPU seconds, the
# checkpoint after the load included, over the wall seconds of the
# measurement), peak_rss_mib (VmHWM
# just before cairn is stopped),
# rss_anon_mib (RssAnon at the same moment), publisher_cpu_percent /
# broker_cpu_percent (to see whether core 0 is the limit), and
# core1_other_cpu_percent: busy time of core 1 not charged to cairn during
# the measurement (other processes, plus interrupt and kernel-thread work,
# part of it cairn's own networking and I/O). On a quiet machine it should
# stay small; much more means something else ran on cairn's core.
#
# Environment:
#   BENCH_RUNS=N            runs per case (default 3)
#   BENCH_CONFIG_EXTRA=...  YAML lines appended to the generated cairn config,
#                           e.g. 'memory_limit_mib: 40' or
#                           $'store:\n  commit_wait: 0s' (don't repeat
#                           data_dir, mqtt or http: the script sets those)
#   BENCH_MOSQUITTO_EXTRA=...  lines appended to the generated mosquitto.conf
#   BENCH_TIMEOUT=S         seconds to wait for all readings (default 300)
#   BENCH_MEMORY_MAX_MIB=N  uplink_backlog: the memory limit of cairn's cgroup
#                           (memory.limit_in_bytes, v2 memory.max); none
#                           if unset
#   BENCH_MQTT_PAYLOAD=F    mqtt_upstream: the upstream's payload, json
#                           (default), senml or influx
#   BENCH_MQTT_SCHEME=S     mqtt_upstream: mqtts (default) or wss, MQTT
#                           over a WebSocket with TLS
#   CAIRN_CPU_PROFILE=FILE  each `cairn run` writes a CPU profile of its run
#                           to FILE when it stops (go tool pprof FILE)
#   CAIRN_HEAP_PROFILE=FILE each `cairn run` writes a heap profile to FILE on
#                           SIGUSR1 and when it stops
#   BENCH_CAIRN=PATH        measure this cairn binary instead of one built
#                           from the tree (to compare two versions)
#   TMPDIR                  where data dirs go; use a real disk, not tmpfs
#
# Summary lines go to stdout, progress to stderr. Needs Linux, 2+ cores,
# taskset, python3, Go; Mosquitto for external_drain, external_paced and
# sealing (installed with apt-get when missing and running as root).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/sbin:/sbin"
unset GOMAXPROCS # cairn takes it from its CPU affinity: 1

EXTRA_CASES=(cgroup_drain) # run only when named
ALL_CASES=(embedded_max external_drain embedded_paced external_paced embedded_pruning sealing uplink_drain uplink_backlog sdwear window1 storage retention series dashboard mqtt_upstream)
RUNS=${BENCH_RUNS:-3}
EXTRA=${BENCH_CONFIG_EXTRA:-}
MOSQ_EXTRA=${BENCH_MOSQUITTO_EXTRA:-}
TIMEOUT=${BENCH_TIMEOUT:-300}
MEMORY_MAX_MIB=${BENCH_MEMORY_MAX_MIB:-}
MQTT_PAYLOAD=${BENCH_MQTT_PAYLOAD:-json}
MQTT_SCHEME=${BENCH_MQTT_SCHEME:-mqtts}
STALL=30 # seconds without a new stored reading that fail a run
DEVICES=100
COUNT=200000
INFLIGHT=100
PACED_RATE=10000
PACED_DURATION=20s
CLIENT_ID=cairn-bench
HELPER=scripts/bench/status.py
UPLINK_DRAIN=${UPLINK_DRAIN:-1000000}
UPLINK_BACKLOG=${UPLINK_BACKLOG:-10000000}
CGROUP_DRAIN_MIB=${CGROUP_DRAIN_MIB:-64}
PRUNING_SERIES=${PRUNING_SERIES:-200}
PRUNING_DAYS=${PRUNING_DAYS:-30}
PRUNING_WINDOW=8 # seconds each ingest rate of embedded_pruning is measured over
SDWEAR_DURATION=${SDWEAR_DURATION:-600}
SDWEAR_WARMUP=${SDWEAR_WARMUP:-60}
SDWEAR_POLL=${SDWEAR_POLL:-}
WINDOW1_DURATION=${WINDOW1_DURATION:-10}

log() { printf 'bench: %s\n' "$*" >&2; }
FAILED=
die() {
	printf 'bench: FAIL: %s\n' "$*" >&2
	FAILED=1
	exit 1
}

# ---- arguments and prerequisites ----------------------------------------

if [ "${1:-}" = soak ]; then
	[ $# -eq 1 ] || die "soak runs alone"
	command -v victoria-metrics >/dev/null || die "victoria-metrics not found; install it: sudo apt-get install victoria-metrics"
	exec taskset -c 0 go run ./scripts/bench/soak
fi

cases=("$@")
[ ${#cases[@]} -gt 0 ] || cases=("${ALL_CASES[@]}")
for c in "${cases[@]}"; do
	case " ${ALL_CASES[*]} ${EXTRA_CASES[*]} " in
	*" $c "*) ;;
	*) die "unknown case '$c' (cases: ${ALL_CASES[*]} ${EXTRA_CASES[*]})" ;;
	esac
done
[[ $RUNS =~ ^[1-9][0-9]*$ ]] || die "BENCH_RUNS must be a positive integer (got '$RUNS')"
[[ $TIMEOUT =~ ^[1-9][0-9]*$ ]] || die "BENCH_TIMEOUT must be a positive integer (got '$TIMEOUT')"
[[ $MQTT_PAYLOAD =~ ^(json|senml|influx)$ ]] || die "BENCH_MQTT_PAYLOAD must be json, senml or influx (got '$MQTT_PAYLOAD')"
[[ $MQTT_SCHEME =~ ^(mqtts|wss)$ ]] || die "BENCH_MQTT_SCHEME must be mqtts or wss (got '$MQTT_SCHEME')"
[[ $CGROUP_DRAIN_MIB =~ ^[1-9][0-9]*$ ]] || die "CGROUP_DRAIN_MIB must be a positive integer (got '$CGROUP_DRAIN_MIB')"
[[ -z $MEMORY_MAX_MIB || $MEMORY_MAX_MIB =~ ^[1-9][0-9]*$ ]] || die "BENCH_MEMORY_MAX_MIB must be a positive integer (got '$MEMORY_MAX_MIB')"
[ "$(nproc --all)" -ge 2 ] || die "needs at least 2 cores (cairn on core 1, the publisher on core 0)"
for tool in taskset python3 go getconf; do
	command -v "$tool" >/dev/null || die "$tool not found"
done
if [[ " ${cases[*]} " == *" uplink_drain "* || " ${cases[*]} " == *" cgroup_drain "* ]] && ! command -v victoria-metrics >/dev/null; then
	[ "$(id -u)" -eq 0 ] || die "victoria-metrics not found; install it: sudo apt-get install victoria-metrics"
	log "installing victoria-metrics"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends victoria-metrics >/dev/null ||
		die "apt-get install victoria-metrics failed"
fi
if [[ " ${cases[*]} " == *" external_"* || " ${cases[*]} " == *" sealing "* || " ${cases[*]} " == *" mqtt_upstream "* ]] && ! command -v mosquitto >/dev/null; then
	[ "$(id -u)" -eq 0 ] || die "mosquitto not found; install it: sudo apt-get install mosquitto"
	log "installing mosquitto"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends mosquitto >/dev/null ||
		die "apt-get install mosquitto failed"
fi
if [[ " ${cases[*]} " == *" window1 "* ]] && ! command -v mosquitto_pub >/dev/null; then
	[ "$(id -u)" -eq 0 ] || die "mosquitto_pub not found; install it: sudo apt-get install mosquitto-clients"
	log "installing mosquitto-clients"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends mosquitto-clients >/dev/null ||
		die "apt-get install mosquitto-clients failed"
fi
TCK=$(getconf CLK_TCK)

# ---- a memory cgroup for cairn ----------------------------------------------
#
# What a memory cgroup is charged is what a memory limit of systemd's
# (MemoryMax=) holds cairn to: its anonymous memory, and the page cache it
# brought in, whether mapped or not.

CG=""      # the cgroup start_cairn starts cairn in; empty: none
CG_V=""    # its version: 1 or 2
CG_MADE=() # cgroups made and not yet removed

# cgroup_make NAME: makes a memory cgroup NAME under the script's own
# cgroup, with BENCH_MEMORY_MAX_MIB as its limit, and sets CG and CG_V;
# leaves CG empty if it cannot (not root, no memory controller, or cgroup
# v2 without the memory controller given to children). On cgroup v2 that
# means the script runs in the root cgroup: a cgroup that holds processes
# cannot give controllers to children. scripts/vm-cgroup2.sh runs the
# bench so, in a virtual machine.
cgroup_make() {
	local base rel dir
	CG=""
	if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
		rel=$(awk -F: '$1 == "0" { print $3 }' /proc/self/cgroup)
		base=/sys/fs/cgroup${rel%/}
		grep -qw memory "$base/cgroup.subtree_control" 2>/dev/null || return 0
		CG_V=2
	else
		rel=$(awk -F: '$2 ~ /(^|,)memory(,|$)/ { print $3 }' /proc/self/cgroup)
		base=/sys/fs/cgroup/memory${rel%/}
		[ -f "$base/memory.usage_in_bytes" ] || return 0
		CG_V=1
	fi
	dir=$base/$1
	mkdir "$dir" 2>/dev/null || return 0
	CG_MADE+=("$dir")
	if [ -n "$MEMORY_MAX_MIB" ]; then
		if [ "$CG_V" = 2 ]; then
			echo $((MEMORY_MAX_MIB << 20)) >"$dir/memory.max"
		else
			echo $((MEMORY_MAX_MIB << 20)) >"$dir/memory.limit_in_bytes"
		fi
	fi
	CG=$dir
}

# cgroup_bytes WHAT: what CG is charged, in bytes: usage, peak, or a key of
# its memory.stat: file (page cache), mapped (the part of it mapped), anon;
# or majfaults, its major page faults so far.
cgroup_bytes() {
	local f="" k=""
	case $CG_V:$1 in
	1:usage) f=memory.usage_in_bytes ;;
	1:peak) f=memory.max_usage_in_bytes ;;
	2:usage) f=memory.current ;;
	2:peak) f=memory.peak ;;
	1:file) k=cache ;;
	1:mapped) k=mapped_file ;;
	1:anon) k=rss ;;
	2:file) k=file ;;
	2:mapped) k=file_mapped ;;
	2:anon) k=anon ;;
	*:majfaults) k=pgmajfault ;;
	*) die "cgroup_bytes: no $1 for cgroup v$CG_V" ;;
	esac
	if [ -n "$f" ]; then
		cat "$CG/$f"
	else
		awk -v k="$k" '$1 == k { print $2 }' "$CG/memory.stat"
	fi
}

# cgroup_remove removes the cgroups made, once nothing runs in them (the
# page cache charged to them moves to their parent).
cgroup_remove() {
	local dir
	for dir in "${CG_MADE[@]}"; do
		rmdir "$dir" 2>/dev/null || log "warning: could not remove cgroup $dir"
	done
	CG_MADE=()
	CG=""
}

# ---- process bookkeeping --------------------------------------------------

tmp=$(mktemp -d "${TMPDIR:-/tmp}/cairn-bench.XXXXXX")
pids=() # every background process started and not yet reaped

running() { # PID: alive and not a zombie
	local s
	s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	s=${s##*) }
	[[ ${s:0:1} != [ZX] ]]
}

forget() {
	local keep=() p
	for p in "${pids[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
	pids=("${keep[@]}")
}

cleanup() {
	local p i
	for p in "${pids[@]}"; do running "$p" && kill -TERM "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do
		for ((i = 0; i < 50; i++)); do running "$p" || break; sleep 0.1; done
		running "$p" && kill -KILL "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	[ -z "$FAILED" ] || [ -z "$CG" ] ||
		log "cgroup v$CG_V $CG: $(cgroup_oom_kills) OOM kills, limit hit $(cgroup_limit_hits) times"
	cgroup_remove
	if [ -n "$FAILED" ]; then
		log "kept $tmp (logs, configs, data) for inspection"
	else
		rm -rf "$tmp"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# stop PID NAME: SIGTERM, wait up to 30 s, reap; warns on a non-zero exit.
stop() {
	local pid=$1 name=$2 i rc=0
	kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < 300; i++)); do running "$pid" || break; sleep 0.1; done
	if running "$pid"; then
		kill -KILL "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
		forget "$pid"
		die "$name (pid $pid) did not stop within 30 s of SIGTERM"
	fi
	wait "$pid" || rc=$?
	forget "$pid"
	[ "$rc" -eq 0 ] || log "warning: $name exited with status $rc after SIGTERM"
}

# ---- measurements ---------------------------------------------------------

cpu_ticks() { # PID: utime+stime (fields 14, 15 of /proc/PID/stat)
	local s f
	s=$(cat "/proc/$1/stat") || die "pid $1 is gone"
	s=${s##*) } # field 3 on
	read -ra f <<<"$s"
	echo $((f[11] + f[12]))
}

mem_kib() { # PID KEY: a kB value of /proc/PID/status
	awk -v k="$2:" '$1 == k { print $2; found = 1 } END { if (!found) exit 1 }' "/proc/$1/status" ||
		die "no $2 for pid $1"
}

core_busy() { # CORE: busy ticks of one core (user nice system irq softirq steal)
	awk -v c="cpu$1" '$1 == c { print $2 + $3 + $4 + $7 + $8 + $9 }' /proc/stat
}

# other_pct BUSY0 BUSY1 OWN_TICKS WALL_S: percent of a core that processes
# other than OWN used meanwhile.
other_pct() { calc "(($2 - $1) - $3) / $TCK / $4 * 100"; }

calc() { awk "BEGIN { printf \"%.6f\", $1 }"; }
fmt() { printf "%.${2:-2}f" "$1"; } # VALUE [DECIMALS]

json_num() { # KEY JSON: a number field of a flat JSON object
	[[ $2 =~ \"$1\":([0-9.eE+-]+) ]] || die "no \"$1\" in $2"
	echo "${BASH_REMATCH[1]}"
}

# ---- results ----------------------------------------------------------------

declare -A VALS FMTS
ORDER=()

record() { # CASE FIGURE PRINTF-FORMAT VALUE
	local key="$1: $2"
	if [ -z "${FMTS[$key]+x}" ]; then
		ORDER+=("$key")
		FMTS[$key]=$3
		VALS[$key]=""
	fi
	VALS[$key]+="$(printf "$3" "$4") "
}

summarize() { # CASE: print its figures
	local key med
	for key in "${ORDER[@]}"; do
		[[ $key == "$1: "* ]] || continue
		# shellcheck disable=SC2086 # the values are words
		med=$(printf '%s\n' ${VALS[$key]} | sort -g |
			awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
		printf '%s median=%s runs=[%s]\n' "$key" "$(printf "${FMTS[$key]}" "$med")" "${VALS[$key]% }"
	done
}

# ---- building blocks ------------------------------------------------------

free_ports() { python3 "$HELPER" ports "$1" | tr '\n' ' '; }

# write_config FILE embedded|external MQTT_PORT HTTP_PORT DATA_DIR
write_config() {
	{
		echo "data_dir: $5"
		echo "mqtt:"
		if [ "$2" = embedded ]; then
			echo "  embedded:"
			echo "    listen: \"127.0.0.1:$3\""
		else
			echo "  url: tcp://127.0.0.1:$3"
		fi
		echo "  client_id: $CLIENT_ID"
		echo "http:"
		echo "  listen: \"127.0.0.1:$4\""
		[ -z "$EXTRA" ] || printf '%s\n' "$EXTRA"
	} >"$1"
	"$tmp/cairn" check-config -config "$1" >/dev/null 2>"$1.err" ||
		die "generated config rejected (BENCH_CONFIG_EXTRA?): $(cat "$1.err")"
}

# start_cairn CONFIG LOG: sets CAIRN_PID (taskset execs cairn: same pid),
# in the cgroup CG if one was made (cgroup_make); the binary is CAIRN_BIN.
CAIRN_BIN=$tmp/cairn
start_cairn() {
	if [ -n "$CG" ]; then
		taskset -c 1 sh -c 'echo $$ >"$0" && exec "$@"' "$CG/cgroup.procs" "$CAIRN_BIN" run -config "$1" 2>"$2" &
	else
		taskset -c 1 "$CAIRN_BIN" run -config "$1" 2>"$2" &
	fi
	CAIRN_PID=$!
	pids+=("$CAIRN_PID")
}

wait_started() { # PID LOG
	local i
	for ((i = 0; i < 600; i++)); do
		grep -q 'msg="cairn started"' "$2" && return 0
		running "$1" || die "cairn exited at start:"$'\n'"$(tail -n 20 "$2")"
		sleep 0.05
	done
	die "cairn did not log 'cairn started' within 30 s:"$'\n'"$(tail -n 20 "$2")"
}

# wait_readings HTTP_PORT PID TARGET LOG: sets DONE_AT (epoch seconds at the
# first poll that saw TARGET readings), COMMITS and COMMIT_MS (group commits
# so far and their average duration).
wait_readings() {
	local out
	out=$(python3 "$HELPER" readings "http://127.0.0.1:$1/v1/status" "$2" "$3" "$TIMEOUT" "$STALL") ||
		die "not all readings stored (cairn log: $4):"$'\n'"$(tail -n 20 "$4")"
	read -r DONE_AT _ _ COMMITS COMMIT_MS <<<"$out"
}

# run_sim DIR BROKER_PORT SIM-ARGS...: runs cairn sim on core 0 in the
# foreground; sets SIM_SENT SIM_ACKED SIM_SECONDS SIM_CPU_PCT.
run_sim() {
	local dir=$1 port=$2 out t real user sys
	shift 2
	local TIMEFORMAT='%R %U %S'
	{ time taskset -c 0 "$tmp/cairn" sim -broker "tcp://127.0.0.1:$port" -devices "$DEVICES" -qos 1 \
		-inflight "$INFLIGHT" "$@" >"$dir/sim.out" 2>"$dir/sim.err"; } 2>"$dir/sim.time" ||
		die "cairn sim failed: $(cat "$dir/sim.err")"
	out=$(tail -n 1 "$dir/sim.out")
	SIM_SENT=$(json_num sent "$out")
	SIM_ACKED=$(json_num acked "$out")
	SIM_SECONDS=$(json_num seconds "$out")
	read -r real user sys <"$dir/sim.time"
	SIM_CPU_PCT=$(calc "($user + $sys) / $real * 100")
	[ "$SIM_ACKED" -eq "$SIM_SENT" ] || die "cairn sim: only $SIM_ACKED of $SIM_SENT messages acknowledged: $(cat "$dir/sim.err")"
	[ "$SIM_ACKED" -gt 0 ] || die "cairn sim acknowledged no messages"
}

# checkpointed HTTP_PORT: has cairn checkpoint its journal (and seal and
# roll up what that wrote) now, by querying readings, so that the CPU it
# spends on the load's readings is counted; it would otherwise do so up
# to 5 s later.
checkpointed() {
	python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=60).read()' \
		"http://127.0.0.1:$1/v1/devices/sim-0000/readings?limit=1" ||
		die "querying readings on port $1 failed"
}

wait_port() { # PORT PID NAME
	local i
	for ((i = 0; i < 200; i++)); do
		(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
		running "$2" || die "$3 exited at start"
		sleep 0.05
	done
	die "$3 not listening on port $1 within 10 s"
}

# ---- cases ------------------------------------------------------------------

# embedded_max_run RUN-DIR: embedded_max's load; sets RPS, CPU (cairn's
# seconds), OTHER, HWM, ANON, and those of run_sim and wait_readings.
embedded_max_run() {
	local dir=$1 mport hport c0 c1 b0 b1 w0 w1 target
	read -r mport hport <<<"$(free_ports 2)"
	write_config "$dir/cairn.yaml" embedded "$mport" "$hport" "$dir/data"
	start_cairn "$dir/cairn.yaml" "$dir/cairn.log"
	wait_started "$CAIRN_PID" "$dir/cairn.log"
	b0=$(core_busy 1) w0=$EPOCHREALTIME
	c0=$(cpu_ticks "$CAIRN_PID")
	run_sim "$dir" "$mport" -rate 0 -count "$COUNT"
	target=$((2 * SIM_ACKED))
	wait_readings "$hport" "$CAIRN_PID" "$target" "$dir/cairn.log"
	checkpointed "$hport"
	c1=$(cpu_ticks "$CAIRN_PID")
	b1=$(core_busy 1) w1=$EPOCHREALTIME
	OTHER=$(other_pct "$b0" "$b1" $((c1 - c0)) "$(calc "$w1 - $w0")")
	HWM=$(mem_kib "$CAIRN_PID" VmHWM)
	ANON=$(mem_kib "$CAIRN_PID" RssAnon)
	stop "$CAIRN_PID" cairn
	CPU=$(calc "($c1 - $c0) / $TCK")
	RPS=$(calc "$target / $SIM_SECONDS")
}

case_embedded_max() { # RUN-DIR
	embedded_max_run "$1"
	local cpu=$CPU target=$((2 * SIM_ACKED))
	record embedded_max readings_per_sec %.0f "$RPS"
	record embedded_max cpu_sec_per_100k_msgs %.2f "$(calc "$cpu / ($SIM_ACKED / 100000)")"
	record embedded_max peak_rss_mib %.1f "$(calc "$HWM / 1024")"
	record embedded_max rss_anon_mib %.1f "$(calc "$ANON / 1024")"
	record embedded_max publisher_cpu_percent %.0f "$SIM_CPU_PCT"
	record embedded_max core1_other_cpu_percent %.0f "$OTHER"
	DETAIL="$target readings in ${SIM_SECONDS}s, cairn cpu $(fmt "$cpu")s, $COMMITS commits of ${COMMIT_MS} ms avg, publisher cpu $(fmt "$SIM_CPU_PCT" 0)%"
}

# preload_store: once per bench.sh, a store of PRUNING_SERIES series x 1 Hz x
# PRUNING_DAYS days that end at the last UTC midnight; sets PRELOAD.
preload_store() {
	PRELOAD=$tmp/preload
	[ -d "$PRELOAD" ] && return 0
	log "embedded_pruning: storing $PRUNING_SERIES series x 1 Hz x $PRUNING_DAYS days to prune (takes a minute)"
	CAIRN_BENCH_STORE_DIR=$PRELOAD CAIRN_BENCH_RETENTION_SERIES=$PRUNING_SERIES CAIRN_BENCH_RETENTION_DAYS=$PRUNING_DAYS \
		go test -run '^$' -bench '^BenchmarkLoadSealedDays$' -benchtime 1x -timeout 0 ./buffer/ >"$tmp/preload.log" 2>&1 ||
		die "storing the data to prune failed: $(tail -n 20 "$tmp/preload.log")"
}

# prune_state HTTP_PORT: sets REMOVED (readings retention removed) and
# LAST_RUN (- until the first run of retention by age has ended).
prune_state() {
	local out
	out=$(python3 "$HELPER" retention "http://127.0.0.1:$1/v1/status") || die "no retention status on port $1"
	read -r REMOVED LAST_RUN <<<"$out"
}

# prune_window DIR MAX_AGE: cairn with raw_max_age MAX_AGE on a copy of
# the preloaded store; embedded_max's publisher from 55 s after the start,
# 5 s before the first prune by age is due; ingest's rate measured from
# 61 s on, or a second after the prune has begun, for PRUNING_WINDOW
# seconds. Sets RATE, CPU_PCT, REMOVED_RATE (readings the prune removed a
# second meanwhile), OTHER, HWM and ANON.
prune_window() {
	local dir=$1 age=$2 mport hport started out b0 b1 w0 w1 c0 c1 EXTRA=$EXTRA
	mkdir -p "$dir"
	read -r mport hport <<<"$(free_ports 2)"
	cp -a "$PRELOAD" "$dir/data"
	# No disk cap: its deletes would count as the prune's.
	EXTRA+=${EXTRA:+$'\n'}$'retention:\n  max_disk_bytes: 0\n  raw_max_age: '$age
	write_config "$dir/cairn.yaml" embedded "$mport" "$hport" "$dir/data"
	start_cairn "$dir/cairn.yaml" "$dir/cairn.log"
	wait_started "$CAIRN_PID" "$dir/cairn.log"
	started=$EPOCHREALTIME
	sleep_until "$(calc "$started + 55")"
	start_load "$dir" "$mport" $((PRUNING_WINDOW + 20))
	if [ "$age" = 0 ]; then
		sleep_until "$(calc "$started + 60")"
	else
		python3 "$HELPER" pruning "http://127.0.0.1:$hport/v1/status" "$CAIRN_PID" 30 ||
			die "no prune began (cairn log: $dir/cairn.log):"$'\n'"$(tail -n 20 "$dir/cairn.log")"
	fi
	sleep 1
	b0=$(core_busy 1) w0=$EPOCHREALTIME
	c0=$(cpu_ticks "$CAIRN_PID")
	out=$(python3 "$HELPER" rate "http://127.0.0.1:$hport/v1/status" "$PRUNING_WINDOW") ||
		die "no ingest rate (cairn log: $dir/cairn.log)"
	read -r RATE REMOVED_RATE <<<"$out"
	c1=$(cpu_ticks "$CAIRN_PID")
	b1=$(core_busy 1) w1=$EPOCHREALTIME
	prune_state "$hport"
	[ "$age" = 0 ] || [ "$LAST_RUN" = - ] ||
		die "the prune ended (at $LAST_RUN) before the measurement did: raise PRUNING_SERIES (now $PRUNING_SERIES)"
	end_load "$dir"
	CPU_PCT=$(calc "($c1 - $c0) / $TCK / ($w1 - $w0) * 100")
	OTHER=$(other_pct "$b0" "$b1" $((c1 - c0)) "$(calc "$w1 - $w0")")
	HWM=$(mem_kib "$CAIRN_PID" VmHWM)
	ANON=$(mem_kib "$CAIRN_PID" RssAnon)
	stop "$CAIRN_PID" cairn
	rm -rf "$dir/data"
}

sleep_until() { # EPOCH_SECONDS
	local d
	d=$(calc "$1 - $EPOCHREALTIME")
	awk "BEGIN { exit !($d > 0) }" || return 0
	sleep "$d"
}

# start_load DIR BROKER_PORT SECONDS: embedded_max's publisher, in the
# background for SECONDS; sets SIM_PID.
start_load() {
	taskset -c 0 "$tmp/cairn" sim -broker "tcp://127.0.0.1:$2" -devices "$DEVICES" -qos 1 \
		-inflight "$INFLIGHT" -rate 0 -duration "${3}s" >"$1/sim.out" 2>"$1/sim.err" &
	SIM_PID=$!
	pids+=("$SIM_PID")
}

# end_load DIR: the publisher is still running, then it ends with every
# message acknowledged.
end_load() {
	local out sent acked
	running "$SIM_PID" || die "the publisher ended before the measurement did: $(cat "$1/sim.err")"
	wait "$SIM_PID" || die "cairn sim failed: $(cat "$1/sim.err")"
	forget "$SIM_PID"
	out=$(tail -n 1 "$1/sim.out")
	sent=$(json_num sent "$out") acked=$(json_num acked "$out")
	[ "$acked" -eq "$sent" ] || die "cairn sim: only $acked of $sent messages acknowledged"
}

case_embedded_pruning() { # RUN-DIR
	local dir=$1 alone cpu_alone
	[[ $'\n'$EXTRA != *$'\n'retention:* ]] ||
		die "embedded_pruning sets the retention block itself: take it out of BENCH_CONFIG_EXTRA"
	preload_store
	prune_window "$dir/alone" 0
	alone=$RATE cpu_alone=$CPU_PCT
	prune_window "$dir/pruning" 7d
	RPS=$RATE
	record embedded_pruning readings_per_sec_alone %.0f "$alone"
	record embedded_pruning readings_per_sec_pruning %.0f "$RATE"
	record embedded_pruning pruning_alone_ratio %.3f "$(calc "$RATE / $alone")"
	record embedded_pruning removed_per_sec %.0f "$REMOVED_RATE"
	record embedded_pruning cpu_percent_alone %.0f "$cpu_alone"
	record embedded_pruning cpu_percent_pruning %.0f "$CPU_PCT"
	record embedded_pruning peak_rss_mib %.1f "$(calc "$HWM / 1024")"
	record embedded_pruning rss_anon_mib %.1f "$(calc "$ANON / 1024")"
	record embedded_pruning core1_other_cpu_percent %.0f "$OTHER"
	DETAIL="alone $(fmt "$alone" 0) readings/s, while pruning $(fmt "$RATE" 0) ($(fmt "$REMOVED_RATE" 0) readings removed a second)"
}

case_sealing() { # RUN-DIR
	local dir=$1 load on on_cpu base=$EXTRA EXTRA=$EXTRA
	[[ $'\n'$base != *$'\n'store:* ]] ||
		die "sealing sets store.bucket_samples itself: take the store block out of BENCH_CONFIG_EXTRA"
	# The auto memory limit grows with store.bucket_samples (the samples a
	# series may hold open): with 10000 it would give the run that does not
	# seal three times the heap of the one that does, and the ratio would
	# measure garbage collection, not sealing. Both runs get the same
	# limit: none, unless BENCH_CONFIG_EXTRA sets one.
	[[ $'\n'$base == *$'\n'memory_limit_mib:* ]] ||
		base+=${base:+$'\n'}'memory_limit_mib: 0'
	DETAIL=
	for load in embedded_max external_drain; do
		mkdir -p "$dir/$load-on" "$dir/$load-off"
		EXTRA=$base
		"${load}_run" "$dir/$load-on"
		on=$RPS on_cpu=$(calc "$CPU / ($SIM_ACKED / 100000)")
		rm -rf "$dir/$load-on/data"
		# 2,000 readings a series: no bucket fills, none is sealed.
		EXTRA=$base${base:+$'\n'}$'store:\n  bucket_samples: 10000'
		"${load}_run" "$dir/$load-off"
		rm -rf "$dir/$load-off/data"
		record sealing "${load}_readings_per_sec_sealing" %.0f "$on"
		record sealing "${load}_readings_per_sec_not_sealing" %.0f "$RPS"
		record sealing "${load}_ratio" %.3f "$(calc "$on / $RPS")"
		record sealing "${load}_cpu_sec_per_100k_msgs_sealing" %.2f "$on_cpu"
		record sealing "${load}_cpu_sec_per_100k_msgs_not_sealing" %.2f "$(calc "$CPU / ($SIM_ACKED / 100000)")"
		DETAIL+="$load: sealing $(fmt "$on" 0) readings/s, not sealing $(fmt "$RPS" 0); "
	done
	RPS=$on # external_drain's, sealing
}



# start_mosquitto RUN-DIR PORT: Mosquitto on core 0, with no limit on what
# it queues for an offline session; sets MOSQ_PID.
start_mosquitto() {
	local dir=$1 mport=$2
	cat >"$dir/mosquitto.conf" <<EOF
listener $mport 127.0.0.1
allow_anonymous true
persistence false
max_inflight_messages 1000
max_queued_messages 0
max_queued_bytes 0
log_dest stderr
log_type error
log_type warning
${MOSQ_EXTRA}
EOF
	taskset -c 0 mosquitto -c "$dir/mosquitto.conf" 2>"$dir/mosquitto.log" &
	MOSQ_PID=$!
	pids+=("$MOSQ_PID")
	wait_port "$mport" "$MOSQ_PID" mosquitto
}

# external_drain_run RUN-DIR: external_drain's load; sets RPS, CPU
# (cairn's seconds), OTHER, HWM, ANON, DRAIN_SECS, BROKER_PCT, PUB_SECS,
# PUB_PCT, and those of run_sim and wait_readings.
external_drain_run() {
	local dir=$1 mport hport mpid t0 c1 m0 m1 b0 b1 target
	read -r mport hport <<<"$(free_ports 2)"
	start_mosquitto "$dir" "$mport"
	mpid=$MOSQ_PID
	write_config "$dir/cairn.yaml" external "$mport" "$hport" "$dir/data"

	# Create cairn's persistent session and subscription, then go offline.
	start_cairn "$dir/cairn.yaml" "$dir/cairn-session.log"
	python3 "$HELPER" connected "http://127.0.0.1:$hport/v1/status" "$CAIRN_PID" 30 ||
		die "cairn did not subscribe at mosquitto:"$'\n'"$(tail -n 20 "$dir/cairn-session.log")"
	stop "$CAIRN_PID" cairn

	# Queue the messages for the offline session.
	run_sim "$dir" "$mport" -rate 0 -count "$COUNT"
	PUB_SECS=$SIM_SECONDS PUB_PCT=$SIM_CPU_PCT
	running "$mpid" || die "mosquitto exited: $(tail -n 20 "$dir/mosquitto.log")"
	target=$((2 * SIM_ACKED))

	# Drain: from cairn's start until every reading is stored.
	m0=$(cpu_ticks "$mpid")
	b0=$(core_busy 1)
	t0=$EPOCHREALTIME
	start_cairn "$dir/cairn.yaml" "$dir/cairn.log"
	wait_readings "$hport" "$CAIRN_PID" "$target" "$dir/cairn.log"
	checkpointed "$hport"
	c1=$(cpu_ticks "$CAIRN_PID")
	m1=$(cpu_ticks "$mpid")
	b1=$(core_busy 1)
	HWM=$(mem_kib "$CAIRN_PID" VmHWM)
	ANON=$(mem_kib "$CAIRN_PID" RssAnon)
	stop "$CAIRN_PID" cairn
	stop "$mpid" mosquitto
	DRAIN_SECS=$(calc "$DONE_AT - $t0")
	CPU=$(calc "$c1 / $TCK")
	BROKER_PCT=$(calc "($m1 - $m0) / $TCK / $DRAIN_SECS * 100")
	OTHER=$(other_pct "$b0" "$b1" "$c1" "$(calc "$EPOCHREALTIME - $t0")")
	RPS=$(calc "$target / $DRAIN_SECS")
}

case_external_drain() { # RUN-DIR
	external_drain_run "$1"
	record external_drain readings_per_sec %.0f "$RPS"
	record external_drain cpu_sec_per_100k_msgs %.2f "$(calc "$CPU / ($SIM_ACKED / 100000)")"
	record external_drain peak_rss_mib %.1f "$(calc "$HWM / 1024")"
	record external_drain rss_anon_mib %.1f "$(calc "$ANON / 1024")"
	record external_drain broker_cpu_percent %.0f "$BROKER_PCT"
	record external_drain core1_other_cpu_percent %.0f "$OTHER"
	DETAIL="$((2 * SIM_ACKED)) readings drained in $(fmt "$DRAIN_SECS")s, cairn cpu $(fmt "$CPU")s, $COMMITS commits of ${COMMIT_MS} ms avg, mosquitto cpu $(fmt "$BROKER_PCT" 0)% (queued in ${PUB_SECS}s, publisher cpu $(fmt "$PUB_PCT" 0)%)"
}

case_external_paced() { # RUN-DIR
	local dir=$1 mport hport c0 c1 m0 m1 b0 b1 w0 w1 target
	read -r mport hport <<<"$(free_ports 2)"
	start_mosquitto "$dir" "$mport"
	write_config "$dir/cairn.yaml" external "$mport" "$hport" "$dir/data"
	start_cairn "$dir/cairn.yaml" "$dir/cairn.log"
	python3 "$HELPER" connected "http://127.0.0.1:$hport/v1/status" "$CAIRN_PID" 30 ||
		die "cairn did not subscribe at mosquitto:"$'\n'"$(tail -n 20 "$dir/cairn.log")"
	c0=$(cpu_ticks "$CAIRN_PID") m0=$(cpu_ticks "$MOSQ_PID")
	b0=$(core_busy 1) w0=$EPOCHREALTIME
	run_sim "$dir" "$mport" -rate "$PACED_RATE" -duration "$PACED_DURATION"
	# Mosquitto acknowledges on receipt: wait for cairn to store the rest
	# before the clock stops, so that its share covers all the work.
	target=$((2 * SIM_ACKED))
	wait_readings "$hport" "$CAIRN_PID" "$target" "$dir/cairn.log"
	checkpointed "$hport"
	c1=$(cpu_ticks "$CAIRN_PID") m1=$(cpu_ticks "$MOSQ_PID")
	b1=$(core_busy 1) w1=$DONE_AT
	HWM=$(mem_kib "$CAIRN_PID" VmHWM)
	ANON=$(mem_kib "$CAIRN_PID" RssAnon)
	stop "$CAIRN_PID" cairn
	stop "$MOSQ_PID" mosquitto
	record_paced external_paced $((c1 - c0)) "$b0" "$b1" "$w0" "$w1" "$target"
	record external_paced broker_cpu_percent %.0f "$(calc "($m1 - $m0) / $TCK / ($w1 - $w0) * 100")"
}

case_embedded_paced() { # RUN-DIR
	local dir=$1 mport hport c0 c1 b0 b1 w0 w1 target
	read -r mport hport <<<"$(free_ports 2)"
	write_config "$dir/cairn.yaml" embedded "$mport" "$hport" "$dir/data"
	start_cairn "$dir/cairn.yaml" "$dir/cairn.log"
	wait_started "$CAIRN_PID" "$dir/cairn.log"
	c0=$(cpu_ticks "$CAIRN_PID")
	b0=$(core_busy 1) w0=$EPOCHREALTIME
	run_sim "$dir" "$mport" -rate "$PACED_RATE" -duration "$PACED_DURATION"
	# A PUBACK leaves only once its message is synced: everything
	# acknowledged is stored by now, which wait_readings checks below.
	checkpointed "$hport"
	c1=$(cpu_ticks "$CAIRN_PID")
	b1=$(core_busy 1) w1=$EPOCHREALTIME
	target=$((2 * SIM_ACKED))
	wait_readings "$hport" "$CAIRN_PID" "$target" "$dir/cairn.log"
	HWM=$(mem_kib "$CAIRN_PID" VmHWM)
	ANON=$(mem_kib "$CAIRN_PID" RssAnon)
	stop "$CAIRN_PID" cairn
	record_paced embedded_paced $((c1 - c0)) "$b0" "$b1" "$w0" "$w1" "$target"
}

# store_counts HTTP_PORT: prints the group commits and the readings stored
# so far.
store_counts() {
	python3 -c 'import json, sys, urllib.request
d = json.load(urllib.request.urlopen(sys.argv[1], timeout=60))
print(d["store"]["commits"], d["ingest"]["stored"])' "http://127.0.0.1:$1/v1/status" ||
		die "reading the status on port $1 failed"
}

case_sdwear() { # RUN-DIR
	local dir=$1 mport hport sim poll= w0 w1 c0 s0 c1 s1 out bytes stored per_day
	read -r mport hport <<<"$(free_ports 2)"
	write_config "$dir/cairn.yaml" embedded "$mport" "$hport" "$dir/data"
	start_cairn "$dir/cairn.yaml" "$dir/cairn.log"
	wait_started "$CAIRN_PID" "$dir/cairn.log"
	taskset -c 0 "$tmp/cairn" sim -broker "tcp://127.0.0.1:$mport" -devices "$DEVICES" -qos 1 -inflight "$INFLIGHT" \
		-rate 100 -duration "$((SDWEAR_WARMUP + SDWEAR_DURATION + 5))s" >"$dir/sim.out" 2>"$dir/sim.err" &
	sim=$!
	pids+=("$sim")
	sleep "$SDWEAR_WARMUP"
	if [ -n "$SDWEAR_POLL" ]; then # after the warm-up: sim-0000 is there
		taskset -c 0 python3 -c 'import sys, time, urllib.request
base, every = sys.argv[1], float(sys.argv[2])
while True:
    for part in ("health", "devices", "charts&device=sim-0000&range=1h"):
        urllib.request.urlopen(base + "?part=" + part, timeout=30).read()
    time.sleep(every)' "http://127.0.0.1:$hport/" "$SDWEAR_POLL" 2>"$dir/poll.err" &
		poll=$!
		pids+=("$poll")
	fi
	w0=$(awk '/^write_bytes/ { print $2 }' "/proc/$CAIRN_PID/io")
	read -r c0 s0 <<<"$(store_counts "$hport")"
	sleep "$SDWEAR_DURATION"
	w1=$(awk '/^write_bytes/ { print $2 }' "/proc/$CAIRN_PID/io")
	read -r c1 s1 <<<"$(store_counts "$hport")"
	if [ -n "$poll" ]; then
		kill -0 "$poll" 2>/dev/null || die "the dashboard poller stopped: $(cat "$dir/poll.err")"
		kill "$poll"
		wait "$poll" 2>/dev/null || true
		forget "$poll"
	fi
	wait "$sim" || die "cairn sim failed: $(cat "$dir/sim.err")"
	forget "$sim"
	out=$(tail -n 1 "$dir/sim.out")
	[ "$(json_num acked "$out")" -eq "$(json_num sent "$out")" ] || die "cairn sim: not every message acknowledged: $out"
	HWM=$(mem_kib "$CAIRN_PID" VmHWM)
	stop "$CAIRN_PID" cairn
	bytes=$((w1 - w0)) stored=$((s1 - s0))
	[ "$stored" -gt 0 ] || die "no reading stored during the measurement"
	per_day=$(calc "$bytes / $SDWEAR_DURATION * 86400 / 1073741824")
	record sdwear bytes_per_reading %.1f "$(calc "$bytes / $stored")"
	record sdwear gib_per_day %.3f "$per_day"
	record sdwear commits_per_sec %.2f "$(calc "($c1 - $c0) / $SDWEAR_DURATION")"
	record sdwear puback_p50_ms %.0f "$(json_num ack_p50_ms "$out")"
	record sdwear puback_p99_ms %.0f "$(json_num ack_p99_ms "$out")"
	RPS=$(calc "$stored / $SDWEAR_DURATION") OTHER=0
	DETAIL="$bytes bytes written over ${SDWEAR_DURATION}s ($(fmt "$per_day" 3) GiB a day), $((c1 - c0)) commits, PUBACK p99 $(json_num ack_p99_ms "$out") ms"
}

case_window1() { # RUN-DIR
	local dir=$1 mport hport out t0 t1 i
	read -r mport hport <<<"$(free_ports 2)"
	write_config "$dir/cairn.yaml" embedded "$mport" "$hport" "$dir/data"
	start_cairn "$dir/cairn.yaml" "$dir/cairn.log"
	wait_started "$CAIRN_PID" "$dir/cairn.log"
	out=$(taskset -c 0 "$tmp/window1" -broker "tcp://127.0.0.1:$mport" -duration "${WINDOW1_DURATION}s" 2>"$dir/window1.err") ||
		die "window1 failed: $(cat "$dir/window1.err")"
	t0=$EPOCHREALTIME
	for ((i = 0; i < 10; i++)); do
		taskset -c 0 mosquitto_pub -h 127.0.0.1 -p "$mport" -q 1 -t sensors/seq/telemetry -m "{\"t\":$i}" ||
			die "mosquitto_pub $i failed"
	done
	t1=$EPOCHREALTIME
	HWM=$(mem_kib "$CAIRN_PID" VmHWM)
	stop "$CAIRN_PID" cairn
	record window1 msgs_per_sec %.1f "$(json_num msgs_per_sec "$out")"
	record window1 puback_p50_ms %.2f "$(json_num ack_p50_ms "$out")"
	record window1 mosquitto_pub_10_s %.3f "$(calc "$t1 - $t0")"
	RPS=$(calc "2 * $(json_num msgs_per_sec "$out")") OTHER=0
	DETAIL="window 1: $(json_num msgs_per_sec "$out") messages/s, PUBACK median $(json_num ack_p50_ms "$out") ms; ten mosquitto_pub -q 1: $(fmt "$(calc "$t1 - $t0")" 3) s"
}

# record_paced CASE TICKS B0 B1 W0 W1 TARGET: the figures of a paced case,
# from cairn's CPU ticks and core 1's busy ticks (B0, B1) over the wall
# seconds W0 to W1, and TARGET readings stored; sets RPS, OTHER and DETAIL.
record_paced() {
	local name=$1 ticks=$2 b0=$3 b1=$4 w0=$5 w1=$6 target=$7 cpu wall
	cpu=$(calc "$ticks / $TCK")
	wall=$(calc "$w1 - $w0")
	RPS=$(calc "$target / $SIM_SECONDS")
	OTHER=$(other_pct "$b0" "$b1" "$ticks" "$wall")
	record "$name" cpu_share_percent %.1f "$(calc "$cpu / $wall * 100")"
	record "$name" readings_per_sec %.0f "$RPS"
	record "$name" peak_rss_mib %.1f "$(calc "$HWM / 1024")"
	record "$name" rss_anon_mib %.1f "$(calc "$ANON / 1024")"
	record "$name" publisher_cpu_percent %.0f "$SIM_CPU_PCT"
	record "$name" core1_other_cpu_percent %.0f "$OTHER"
	DETAIL="$target readings in ${SIM_SECONDS}s, cairn cpu $(fmt "$cpu")s over $(fmt "$wall" 1)s, $COMMITS commits of ${COMMIT_MS} ms avg, publisher cpu $(fmt "$SIM_CPU_PCT" 0)%"
}

# drain_backlog CASE RUN-DIR HTTP_PORT UPSTREAM_PID UPSTREAM_NAME STORED
# [BROKER_PORT]: starts cairn (config RUN-DIR/cairn.yaml) on a backlog of
# STORED readings, waits until it has sent them all, stops it and the
# upstream, and records CASE's readings/s from cairn's start, CPU seconds
# per 100 k readings and peak RSS. Sets SENT, BATCHES, RETRIES, SECS,
# CPU (cairn's seconds), UP_PCT (the upstream's share of its core),
# OTHER, RPS, HWM, ANON; and WIRE, with BROKER_PORT: the bytes cairn's
# one connection to that port sent, TLS included.
drain_backlog() {
	local name=$1 dir=$2 hport=$3 upid=$4 uname=$5 stored=$6 wport=${7:-} t0 c1 u0 u1 b0 b1 out done_at
	u0=$(cpu_ticks "$upid")
	b0=$(core_busy 1)
	t0=$EPOCHREALTIME
	start_cairn "$dir/cairn.yaml" "$dir/cairn.log"
	out=$(python3 "$HELPER" sent "http://127.0.0.1:$hport/v1/status" "$CAIRN_PID" "$TIMEOUT" "$STALL") ||
		die "the backlog was not sent (cairn log: $dir/cairn.log):"$'\n'"$(tail -n 20 "$dir/cairn.log")"
	read -r done_at SENT BATCHES RETRIES <<<"$out"
	c1=$(cpu_ticks "$CAIRN_PID")
	u1=$(cpu_ticks "$upid")
	b1=$(core_busy 1)
	HWM=$(mem_kib "$CAIRN_PID" VmHWM)
	ANON=$(mem_kib "$CAIRN_PID" RssAnon)
	WIRE=
	if [ -n "$wport" ]; then
		WIRE=$(ss -tinH state established "( dport = :$wport )" | grep -o 'bytes_sent:[0-9]*' | head -n 1 | cut -d: -f2)
		[ -n "$WIRE" ] || die "no connection to the broker in ss"
	fi
	stop "$CAIRN_PID" cairn
	stop "$upid" "$uname"
	[ "$SENT" -eq "$stored" ] || die "sent $SENT readings, stored $stored"
	SECS=$(calc "$done_at - $t0")
	CPU=$(calc "$c1 / $TCK")
	UP_PCT=$(calc "($u1 - $u0) / $TCK / $SECS * 100")
	OTHER=$(other_pct "$b0" "$b1" "$c1" "$(calc "$EPOCHREALTIME - $t0")")
	RPS=$(calc "$SENT / $SECS")
	record "$name" readings_per_sec %.0f "$RPS"
	record "$name" cpu_sec_per_100k_readings %.2f "$(calc "$CPU / ($SENT / 100000)")"
	record "$name" peak_rss_mib %.1f "$(calc "$HWM / 1024")"
	record "$name" rss_anon_mib %.1f "$(calc "$ANON / 1024")"
}

# uplink_config FILE MQTT_PORT HTTP_PORT DATA_DIR UPSTREAM_PORT: an embedded
# broker and an uplink to VictoriaMetrics on UPSTREAM_PORT.
uplink_config() {
	write_config "$1" embedded "$2" "$3" "$4"
	printf 'uplink:\n  url: http://127.0.0.1:%s/write\n  gateway_id: bench\n' "$5" >>"$1"
	"$tmp/cairn" check-config -config "$1" >/dev/null 2>"$1.err" ||
		die "generated config rejected (BENCH_CONFIG_EXTRA with uplink?): $(cat "$1.err")"
}

case_uplink_drain() { # RUN-DIR
	local dir=$1 mport hport vport vpid
	read -r mport hport vport <<<"$(free_ports 3)"
	uplink_config "$dir/cairn.yaml" "$mport" "$hport" "$dir/data" "$vport"
	# The backlog: stored while nothing listens on the upstream's port.
	start_cairn "$dir/cairn.yaml" "$dir/cairn-fill.log"
	wait_started "$CAIRN_PID" "$dir/cairn-fill.log"
	run_sim "$dir" "$mport" -rate 0 -count $((UPLINK_DRAIN / 2))
	wait_readings "$hport" "$CAIRN_PID" $((2 * SIM_ACKED)) "$dir/cairn-fill.log"
	stop "$CAIRN_PID" cairn

	taskset -c 0 victoria-metrics -storageDataPath="$dir/vm" -httpListenAddr="127.0.0.1:$vport" \
		-retentionPeriod=100y -loggerLevel=ERROR 2>"$dir/vm.log" &
	vpid=$!
	pids+=("$vpid")
	wait_port "$vport" "$vpid" victoria-metrics

	drain_backlog uplink_drain "$dir" "$hport" "$vpid" victoria-metrics $((2 * SIM_ACKED))
	record uplink_drain upstream_cpu_percent %.0f "$UP_PCT"
	record uplink_drain core1_other_cpu_percent %.0f "$OTHER"
	DETAIL="$SENT readings sent in $(fmt "$SECS")s (from cairn's start) in $BATCHES batches, $RETRIES retries, cairn cpu $(fmt "$CPU")s, victoria-metrics cpu $(fmt "$UP_PCT" 0)%"
}

# cgroup_oom_kills: the OOM kills in CG so far (v2 memory.events, v1
# memory.oom_control, whose oom_kill line older kernels lack: then 0 and
# the failcnt tells).
cgroup_oom_kills() {
	local f=memory.oom_control n
	[ "$CG_V" = 1 ] || f=memory.events
	n=$(awk '$1 == "oom_kill" { print $2 }' "$CG/$f")
	echo "${n:-0}"
}

# cgroup_limit_hits: how often CG reached its limit (v2 memory.events max,
# v1 memory.failcnt).
cgroup_limit_hits() {
	if [ "$CG_V" = 1 ]; then
		cat "$CG/memory.failcnt"
	else
		awk '$1 == "max" { print $2 }' "$CG/memory.events"
	fi
}

# vm_readings PORT: the samples VictoriaMetrics on PORT holds, all series.
vm_readings() {
	python3 -c 'import json, sys, urllib.parse, urllib.request
q = urllib.parse.urlencode({"query": "sum(count_over_time({__name__=~\".+\"}[3650d]))"})
r = json.load(urllib.request.urlopen("http://127.0.0.1:%s/api/v1/query?%s" % (sys.argv[1], q), timeout=120))
res = r["data"]["result"]
print(res[0]["value"][1] if res else 0)' "$1" || die "querying victoria-metrics on port $1 failed"
}

case_cgroup_drain() { # RUN-DIR
	local dir=$1 mport hport vport vpid peak oom hits held stored MEMORY_MAX_MIB=$CGROUP_DRAIN_MIB
	[ "$(id -u)" -eq 0 ] || die "cgroup_drain: making a memory cgroup needs root"
	CAIRN_BIN=$tmp/cairn-release
	read -r mport hport vport <<<"$(free_ports 3)"
	uplink_config "$dir/cairn.yaml" "$mport" "$hport" "$dir/data" "$vport"
	# The backlog: stored while nothing listens on the upstream's port, outside the cgroup.
	start_cairn "$dir/cairn.yaml" "$dir/cairn-fill.log"
	wait_started "$CAIRN_PID" "$dir/cairn-fill.log"
	run_sim "$dir" "$mport" -rate 0 -count $((UPLINK_DRAIN / 2))
	stored=$((2 * SIM_ACKED))
	wait_readings "$hport" "$CAIRN_PID" "$stored" "$dir/cairn-fill.log"
	stop "$CAIRN_PID" cairn

	cgroup_make "cairn-bench.$$.$(basename "$dir")"
	[ -n "$CG" ] || die "cgroup_drain: no memory cgroup could be made: neither cgroup v2 with the memory controller in $(awk -F: '$1 == "0" { print "/sys/fs/cgroup" $3 }' /proc/self/cgroup)/cgroup.subtree_control nor cgroup v1's memory controller"
	log "cgroup_drain: cgroup v$CG_V, $CG, limit $CGROUP_DRAIN_MIB MiB"
	taskset -c 0 victoria-metrics -storageDataPath="$dir/vm" -httpListenAddr="127.0.0.1:$vport" \
		-retentionPeriod=100y -loggerLevel=ERROR 2>"$dir/vm.log" &
	vpid=$!
	pids+=("$vpid")
	wait_port "$vport" "$vpid" victoria-metrics
	drain_backlog cgroup_drain "$dir" "$hport" "$vpid" victoria-metrics "$stored"
	CAIRN_BIN=$tmp/cairn
	if [ "$CG_V" = 2 ] && [ ! -f "$CG/memory.peak" ]; then
		peak=-1 # kernels before 5.19 have no memory.peak
	else
		peak=$(cgroup_bytes peak)
	fi
	oom=$(cgroup_oom_kills)
	hits=$(cgroup_limit_hits)
	cgroup_remove
	# Stopped, VictoriaMetrics has written all it got; count it anew.
	taskset -c 0 victoria-metrics -storageDataPath="$dir/vm" -httpListenAddr="127.0.0.1:$vport" \
		-retentionPeriod=100y -loggerLevel=ERROR -search.latencyOffset=0s 2>>"$dir/vm.log" &
	vpid=$!
	pids+=("$vpid")
	wait_port "$vport" "$vpid" victoria-metrics
	held=$(vm_readings "$vport")
	stop "$vpid" victoria-metrics
	record cgroup_drain "cgroup_v${CG_V}_peak_mib" %.1f "$(calc "$peak / 1048576")"
	record cgroup_drain cgroup_limit_mib %d "$CGROUP_DRAIN_MIB"
	record cgroup_drain cgroup_limit_hits %d "$hits"
	record cgroup_drain oom_kills %d "$oom"
	record cgroup_drain upstream_readings %d "$held"
	record cgroup_drain backlog_readings %d "$stored"
	DETAIL="cgroup v$CG_V limit $CGROUP_DRAIN_MIB MiB: peak $((peak >> 20)) MiB, $oom OOM kills, limit hit $hits times; $SENT readings sent in $(fmt "$SECS")s, victoria-metrics holds $held of $stored"
	[ "$oom" -eq 0 ] || die "cgroup_drain: $oom OOM kills in the cgroup"
	[ "$held" -eq "$stored" ] || die "cgroup_drain: victoria-metrics holds $held readings, the backlog was $stored"
}

# mqtt_certs DIR: a CA, Mosquitto's certificate for 127.0.0.1 and cairn's
# client certificate (CN bench), made with openssl, in DIR.
mqtt_certs() {
	local d=$1 ec=(-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes)
	{
		openssl req -x509 "${ec[@]}" -days 2 -subj "/CN=bench CA" -keyout "$d/ca.key" -out "$d/ca.pem" &&
			openssl req "${ec[@]}" -subj "/CN=127.0.0.1" -addext "subjectAltName=IP:127.0.0.1" \
				-keyout "$d/broker.key" -out "$d/broker.csr" &&
			openssl x509 -req -in "$d/broker.csr" -CA "$d/ca.pem" -CAkey "$d/ca.key" -CAcreateserial -days 2 \
				-copy_extensions copy -out "$d/broker.pem" &&
			openssl req "${ec[@]}" -subj "/CN=bench" -keyout "$d/bench.key" -out "$d/bench.csr" &&
			openssl x509 -req -in "$d/bench.csr" -CA "$d/ca.pem" -CAkey "$d/ca.key" -CAcreateserial -days 2 -out "$d/bench.pem"
	} >"$d/openssl.log" 2>&1 || die "openssl failed: $(tail -n 5 "$d/openssl.log")"
	chmod 600 "$d/bench.key"
}

case_mqtt_upstream() { # RUN-DIR
	local dir=$1 mport hport qport qport2 qpid url proto more
	read -r mport hport qport qport2 <<<"$(free_ports 4)"
	mqtt_certs "$dir"
	write_config "$dir/cairn.yaml" embedded "$mport" "$hport" "$dir/data"
	url=mqtts://127.0.0.1:$qport
	proto="protocol mqtt" more=""
	if [ "$MQTT_SCHEME" = wss ]; then
		# Mosquitto 2.0.11 does not start with a websockets listener
		# alone: an MQTT listener beside it, which nothing uses.
		url=wss://127.0.0.1:$qport/mqtt proto="protocol websockets" more="listener $qport2 127.0.0.1"
	fi
	printf 'uplink:\n  kind: mqtt\n  url: %s\n  gateway_id: bench\n  payload: %s\n  tls:\n    ca_file: %s\n    cert_file: %s\n    key_file: %s\n' \
		"$url" "$MQTT_PAYLOAD" "$dir/ca.pem" "$dir/bench.pem" "$dir/bench.key" >>"$dir/cairn.yaml"
	"$tmp/cairn" check-config -config "$dir/cairn.yaml" >/dev/null 2>"$dir/cairn.yaml.err" ||
		die "generated config rejected (BENCH_CONFIG_EXTRA with uplink?): $(cat "$dir/cairn.yaml.err")"
	# The backlog: stored while nothing listens on the broker's port.
	start_cairn "$dir/cairn.yaml" "$dir/cairn-fill.log"
	wait_started "$CAIRN_PID" "$dir/cairn-fill.log"
	run_sim "$dir" "$mport" -rate 0 -count $((UPLINK_DRAIN / 2))
	wait_readings "$hport" "$CAIRN_PID" $((2 * SIM_ACKED)) "$dir/cairn-fill.log"
	stop "$CAIRN_PID" cairn

	cat >"$dir/mosquitto.conf" <<EOF
user $(id -un)
persistence false
allow_anonymous false
listener $qport 127.0.0.1
$proto
cafile $dir/ca.pem
certfile $dir/broker.pem
keyfile $dir/broker.key
require_certificate true
use_identity_as_username true
$more
log_dest stderr
log_type error
log_type warning
${MOSQ_EXTRA}
EOF
	taskset -c 0 mosquitto -c "$dir/mosquitto.conf" 2>"$dir/mosquitto.log" &
	qpid=$!
	pids+=("$qpid")
	wait_port "$qport" "$qpid" mosquitto

	drain_backlog mqtt_upstream "$dir" "$hport" "$qpid" mosquitto $((2 * SIM_ACKED)) "$qport"
	record mqtt_upstream wire_bytes_per_reading %.1f "$(calc "$WIRE / $SENT")"
	record mqtt_upstream broker_cpu_percent %.0f "$UP_PCT"
	record mqtt_upstream core1_other_cpu_percent %.0f "$OTHER"
	DETAIL="$SENT readings sent in $(fmt "$SECS")s (from cairn's start) in $BATCHES batches, $RETRIES retries, cairn cpu $(fmt "$CPU")s, mosquitto cpu $(fmt "$UP_PCT" 0)%, $WIRE bytes on the wire (payload $MQTT_PAYLOAD, $MQTT_SCHEME)"
}

case_uplink_backlog() { # RUN-DIR
	local dir=$1 mport hport vport spid c0 c1 b0 b1 w0 w1 rss1 hwm1 rss2 first cg=""
	read -r mport hport vport <<<"$(free_ports 3)"
	uplink_config "$dir/cairn.yaml" "$mport" "$hport" "$dir/data" "$vport"
	cgroup_make "cairn-bench.$$.$(basename "$dir")"
	if [ -z "$CG" ]; then
		[ -z "$MEMORY_MAX_MIB" ] || die "BENCH_MEMORY_MAX_MIB needs a memory cgroup, and none could be made"
		log "uplink_backlog: no memory cgroup could be made for cairn: no cgroup figures"
	fi
	start_cairn "$dir/cairn.yaml" "$dir/cairn.log"
	wait_started "$CAIRN_PID" "$dir/cairn.log"
	c0=$(cpu_ticks "$CAIRN_PID")
	b0=$(core_busy 1) w0=$EPOCHREALTIME
	taskset -c 0 "$tmp/cairn" sim -broker "tcp://127.0.0.1:$mport" -devices "$DEVICES" -qos 1 \
		-inflight "$INFLIGHT" -rate 0 -count $((UPLINK_BACKLOG / 2)) >"$dir/sim.out" 2>"$dir/sim.err" &
	spid=$!
	pids+=("$spid")
	first=$((UPLINK_BACKLOG < 1000000 ? UPLINK_BACKLOG : 1000000))
	wait_readings "$hport" "$CAIRN_PID" "$first" "$dir/cairn.log"
	rss1=$(mem_kib "$CAIRN_PID" VmRSS)
	hwm1=$(mem_kib "$CAIRN_PID" VmHWM)
	wait_readings "$hport" "$CAIRN_PID" "$UPLINK_BACKLOG" "$dir/cairn.log"
	c1=$(cpu_ticks "$CAIRN_PID")
	b1=$(core_busy 1) w1=$EPOCHREALTIME
	rss2=$(mem_kib "$CAIRN_PID" VmRSS)
	HWM=$(mem_kib "$CAIRN_PID" VmHWM)
	local charged=() what
	if [ -n "$CG" ]; then
		for what in usage file mapped anon majfaults peak; do
			[ "$what:$CG_V" != peak:2 ] || [ -f "$CG/memory.peak" ] || continue
			charged+=("$what" "$(cgroup_bytes "$what")")
		done
	fi
	wait "$spid" || die "cairn sim failed: $(cat "$dir/sim.err")"
	forget "$spid"
	stop "$CAIRN_PID" cairn
	cgroup_remove
	OTHER=$(other_pct "$b0" "$b1" $((c1 - c0)) "$(calc "$w1 - $w0")")
	RPS=$(calc "$UPLINK_BACKLOG / ($w1 - $w0)")
	record uplink_backlog rss_at_1m_mib %.1f "$(calc "$rss1 / 1024")"
	record uplink_backlog peak_rss_at_1m_mib %.1f "$(calc "$hwm1 / 1024")"
	record uplink_backlog rss_at_end_mib %.1f "$(calc "$rss2 / 1024")"
	record uplink_backlog peak_rss_at_end_mib %.1f "$(calc "$HWM / 1024")"
	record uplink_backlog readings_per_sec %.0f "$RPS"
	record uplink_backlog core1_other_cpu_percent %.0f "$OTHER"
	set -- "${charged[@]}"
	while [ $# -gt 0 ]; do
		case $1 in
		usage)
			record uplink_backlog cgroup_at_end_mib %.1f "$(calc "$2 / 1048576")"
			cg=", cgroup charged $(($2 >> 20)) MiB at the end"
			;;
		peak) record uplink_backlog cgroup_peak_mib %.1f "$(calc "$2 / 1048576")" ;;
		majfaults) record uplink_backlog cgroup_major_faults %d "$2" ;;
		*) record uplink_backlog "cgroup_${1}_at_end_mib" %.1f "$(calc "$2 / 1048576")" ;;
		esac
		shift 2
	done
	DETAIL="backlog of $UPLINK_BACKLOG readings built in $(fmt "$(calc "$w1 - $w0")" 0)s; RSS $((rss1 / 1024)) MiB at $first, $((rss2 / 1024)) MiB at the end$cg; data dir $(du -sm "$dir/data" | cut -f1) MiB"
}

# ---- main -------------------------------------------------------------------

log "building cairn"
if [[ -n ${BENCH_CAIRN:-} ]]; then
	cp "$BENCH_CAIRN" "$tmp/cairn" || die "BENCH_CAIRN=$BENCH_CAIRN: cannot copy it"
else
	go build -o "$tmp/cairn" ./cmd/cairn || die "go build failed"
fi
if [[ " ${cases[*]} " == *" cgroup_drain "* ]]; then
	CGO_ENABLED=0 go build -trimpath -buildvcs=false -tags "$(tr -d ' \n' <scripts/release-tags)" -ldflags "-s -w" \
		-o "$tmp/cairn-release" ./cmd/cairn || die "go build (release tags) failed"
fi
if [[ " ${cases[*]} " == *" window1 "* ]]; then
	go build -o "$tmp/window1" ./scripts/bench/window1 || die "go build ./scripts/bench/window1 failed"
fi
# The harness itself (polling, parsing) stays off cairn's core.
taskset -cp 0 $$ >/dev/null

cpu_model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
rev=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
[ -z "$(git status --porcelain --untracked-files=no 2>/dev/null)" ] || rev+="+dirty"
header="# cairn bench: nproc=$(nproc --all) cpu=\"${cpu_model:-unknown}\" $(go env GOVERSION) $(go env GOOS)/$(go env GOARCH)"
header+=" rev=$rev fs=$(stat -f -c %T "$tmp") loadavg=$(cut -d' ' -f1 /proc/loadavg) runs=$RUNS"
[ -z "$EXTRA" ] || header+=" config_extra=\"${EXTRA//$'\n'/; }\""
[ -z "$MOSQ_EXTRA" ] || header+=" mosquitto_extra=\"${MOSQ_EXTRA//$'\n'/; }\""
[ -z "$MEMORY_MAX_MIB" ] || header+=" memory_max_mib=$MEMORY_MAX_MIB"
[[ " ${cases[*]} " != *" dashboard "* ]] || header+=" dashboard_runs=${BENCH_RUNS:-5}"
echo "$header"

# AWK_MEDIANS are the awk functions that gather go test -bench figures
# (add), and give their median and every run: add(KEY, VALUE), median(KEY),
# runs(KEY), and metric(UNIT), the value before UNIT on a benchmark line.
AWK_MEDIANS='
		function add(k, v) { n[k]++; val[k, n[k]] = v }
		function median(k,   i, j, t, a) {
			for (i = 1; i <= n[k]; i++) a[i] = val[k, i]
			for (i = 1; i <= n[k]; i++) for (j = i + 1; j <= n[k]; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
			return a[int((n[k] + 1) / 2)]
		}
		function runs(k,   i, s) { for (i = 1; i <= n[k]; i++) s = s (i > 1 ? " " : "") val[k, i]; return s }
		function metric(name,   i) { for (i = 4; i < NF; i++) if ($(i+1) == name) return $i; return "" }
'

# storage_bench runs the store benchmarks RUNS times and prints medians.
storage_bench() {
	local series=${STORAGE_SERIES:-1000} hours=${STORAGE_HOURS:-24} out
	log "storage: $series series x 1 Hz x ${hours} h through the writer, sealed and as points (takes minutes)"
	out=$(CAIRN_BENCH_SERIES=$series CAIRN_BENCH_HOURS=$hours go test -run '^$' -bench 'DiskPerReading' \
		-benchtime 1x -count "$RUNS" -timeout 0 ./buffer/) || die "storage benchmark failed: $out"
	log "storage: query latencies"
	out+=$'\n'$(go test -run '^$' -bench 'Query_|Stats_Year' -benchtime 2000x -count "$RUNS" -timeout 0 ./buffer/) ||
		die "query benchmark failed: $out"
	printf '%s\n' "$out" | awk -v series="$series" -v hours="$hours" "$AWK_MEDIANS"'
		/^BenchmarkStore_DiskPerReading\/sealed/ { add("sealed_bytes_per_reading", metric("bytes/reading")); add("sealed_readings_bytes_per_reading", metric("readings-bytes/reading")); add("sealed_stats_bytes_per_reading", metric("stats-bytes/reading")); add("sealed_ingest_readings_per_sec", metric("readings/s")) }
		/^BenchmarkStore_DiskPerReading\/points/ { add("points_bytes_per_reading", metric("bytes/reading")); add("points_readings_bytes_per_reading", metric("readings-bytes/reading")); add("points_ingest_readings_per_sec", metric("readings/s")) }
		/^BenchmarkQuery_Latest50/ { add("latest50_p99_us", $5) }
		/^BenchmarkQuery_DayRange/ { add("day_range_p99_us", $5) }
		/^BenchmarkStats_Year\/30days_all/ { for (i = 4; i < NF; i++) { if ($(i+1) == "p99-µs") add("stats_30d_all_p99_us", $i); if ($(i+1) == "max-records") add("stats_30d_all_max_records", $i) } }
		/^BenchmarkStats_Year\/year_by_day/ { for (i = 4; i < NF; i++) { if ($(i+1) == "p99-µs") add("stats_year_by_day_p99_us", $i); if ($(i+1) == "max-records") add("stats_year_by_day_records", $i) } }
		END {
			split("sealed_bytes_per_reading sealed_readings_bytes_per_reading sealed_stats_bytes_per_reading points_bytes_per_reading points_readings_bytes_per_reading sealed_ingest_readings_per_sec points_ingest_readings_per_sec latest50_p99_us day_range_p99_us stats_30d_all_p99_us stats_30d_all_max_records stats_year_by_day_p99_us stats_year_by_day_records", keys, " ")
			for (i = 1; i in keys; i++) if (n[keys[i]]) printf "storage: %s median=%s runs=[%s] (%d series x %d h)\n", keys[i], median(keys[i]), runs(keys[i]), series, hours
		}'
}

# retention_bench runs the retention benchmarks RUNS times and prints
# medians.
retention_bench() {
	local series=${RETENTION_SERIES:-1000} days=${RETENTION_DAYS:-30} ingest=${RETENTION_INGEST:-2000000} out
	local cap=${RETENTION_DISK_CAP_MIB:-256}
	log "retention: $series series x 1 Hz x $days days, pruned to 7 days (takes long); disk cap of $cap MiB"
	out=$(CAIRN_BENCH_RETENTION_SERIES=$series CAIRN_BENCH_RETENTION_DAYS=$days CAIRN_BENCH_RETENTION_INGEST=$ingest \
		CAIRN_BENCH_DISK_CAP_MIB=$cap \
		go test -run '^$' -bench 'Retention_' -benchtime 1x -count "$RUNS" -timeout 0 ./buffer/) ||
		die "retention benchmark failed: $out"
	printf '%s\n' "$out" | awk -v series="$series" -v days="$days" "$AWK_MEDIANS"'
		/^BenchmarkRetention_Prune/ { add("prune_s", metric("prune-s")); add("compact_s", metric("compact-s")); add("disk_bytes_before", metric("bytes-before")); add("disk_bytes_after", metric("bytes-after")); add("after_before_ratio", metric("after/before")) }
		/^BenchmarkRetention_IngestWhilePruning\/alone/ { alone[++na] = metric("readings/s"); add("ingest_alone_readings_per_sec", alone[na]) }
		/^BenchmarkRetention_DiskCapOvershoot/ { add("disk_cap_peak_ratio", metric("peak/cap")); add("disk_cap_end_ratio", metric("end/cap")) }
		/^BenchmarkRetention_IngestWhilePruning\/pruning/ { p = metric("readings/s-during-prune"); add("ingest_pruning_readings_per_sec", p); add("ingest_prune_s", metric("prune-s")); if (alone[na] > 0) add("ingest_ratio", p / alone[na]) }
		END {
			split("prune_s compact_s disk_bytes_before disk_bytes_after after_before_ratio ingest_alone_readings_per_sec ingest_pruning_readings_per_sec ingest_ratio ingest_prune_s disk_cap_peak_ratio disk_cap_end_ratio", keys, " ")
			for (i = 1; i in keys; i++) if (n[keys[i]]) printf "retention: %s median=%s runs=[%s] (%d series x %d days)\n", keys[i], median(keys[i]), runs(keys[i]), series, days
		}'
}

# series_bench runs the memory-per-series benchmark RUNS times and prints
# medians.
series_bench() {
	local out
	log "series: heap bytes per series at 10k and 100k series"
	out=$(go test -run '^$' -bench 'SeriesMemory' -benchtime 1x -count "$RUNS" -timeout 0 ./buffer/) ||
		die "series benchmark failed: $out"
	printf '%s\n' "$out" | awk "$AWK_MEDIANS"'
		/^BenchmarkSeriesMemory\/10k-units/ { add("bytes_per_series_10k_units", metric("bytes/series")); add("reopened_bytes_per_series_10k_units", metric("reopened-bytes/series")); next }
		/^BenchmarkSeriesMemory\/100k-units/ { add("bytes_per_series_100k_units", metric("bytes/series")); add("reopened_bytes_per_series_100k_units", metric("reopened-bytes/series")); next }
		/^BenchmarkSeriesMemory\/10k/ { add("bytes_per_series_10k", metric("bytes/series")); add("reopened_bytes_per_series_10k", metric("reopened-bytes/series")) }
		/^BenchmarkSeriesMemory\/100k/ { add("bytes_per_series_100k", metric("bytes/series")); add("reopened_bytes_per_series_100k", metric("reopened-bytes/series")) }
		END {
			split("bytes_per_series_10k bytes_per_series_100k reopened_bytes_per_series_10k reopened_bytes_per_series_100k bytes_per_series_10k_units bytes_per_series_100k_units reopened_bytes_per_series_10k_units reopened_bytes_per_series_100k_units", keys, " ")
			for (i = 1; i in keys; i++) if (n[keys[i]]) printf "series: %s median=%s runs=[%s]\n", keys[i], median(keys[i]), runs(keys[i])
		}'
}

# dashboard_bench runs the dashboard's benchmarks (default 5 times) on
# core 1 and prints medians; it makes their stores first when
# DASHBOARD_DIR or DASHBOARD_WIDE_DIR has none.
dashboard_bench() {
	local runs=${BENCH_RUNS:-5} dir=${DASHBOARD_DIR:-${TMPDIR:-/tmp}/cairn-bench-dashboard}
	local only=${DASHBOARD_BENCH:-} other=${DASHBOARD_OTHER_DAYS:-7} out made= wide=${DASHBOARD_WIDE_DIR:-${TMPDIR:-/tmp}/cairn-bench-dashboard-wide}
	[[ -z $only || $only == Wide ]] || die "DASHBOARD_BENCH must be Wide or empty (got '$only')"
	go test -c -o "$tmp/httpapi.test" ./gateway/httpapi/ || die "go test -c ./gateway/httpapi/ failed"
	if [[ $only != Wide ]] && ! python3 -c 'import json, sys; sys.exit(json.load(open(sys.argv[1]))["other_days"] != int(sys.argv[2]))' \
		"$dir/cairn-bench-dashboard.json" "$other" 2>/dev/null; then
		# The store is made on both cores, by one run of the page's
		# benchmark that is not counted; only the measurement is pinned.
		log "dashboard: making the store in $dir on both cores: d000 x 90 days, 99 devices x $other days, one reading a minute (takes minutes)"
		made=$(cd gateway/httpapi && CAIRN_BENCH_DASHBOARD_DIR=$dir CAIRN_BENCH_DASHBOARD_OTHER_DAYS=$other \
			"$tmp/httpapi.test" -test.run '^$' -test.bench 'DashboardPage' -test.benchtime 1x -test.count 1 -test.timeout 0) ||
			die "dashboard store failed: $made"
	fi
	if [[ ! -f $wide/cairn-bench-dashboard.json ]]; then
		log "dashboard: making the wide device's store in $wide on both cores: 1 device x 1,000 metrics x 90 days, one reading an hour (takes minutes)"
		made+=$'\n'$(cd gateway/httpapi && CAIRN_BENCH_DASHBOARD_WIDE_DIR=$wide \
			"$tmp/httpapi.test" -test.run '^$' -test.bench 'DashboardWideChart90d' -test.benchtime 1x -test.count 1 -test.timeout 0) ||
			die "dashboard wide store failed: $made"
	fi
	log "dashboard: GET / and the 90-day charts${only:+ ($only only)}, $runs runs on core 1; load:$(uptime | sed 's/.*load average://')"
	out=$(cd gateway/httpapi && CAIRN_BENCH_DASHBOARD_DIR=$dir CAIRN_BENCH_DASHBOARD_OTHER_DAYS=$other GOMAXPROCS=1 \
		CAIRN_BENCH_DASHBOARD_WIDE_DIR=$wide \
		taskset -c 1 "$tmp/httpapi.test" -test.run '^$' -test.bench "Dashboard$only" -test.count "$runs" -test.timeout 0) ||
		die "dashboard benchmark failed: $out"
	out=$(printf '%s\n' "$made" | grep 'dashboard store: generated'; printf '%s\n' "$out")
	log "dashboard: done; load:$(uptime | sed 's/.*load average://')"
	printf '%s\n' "$out" | awk "$AWK_MEDIANS"'
		/^BenchmarkDashboardPage/ { add("page_ms", $3 / 1e6); add("page_cpu_ms", metric("cpu-ns/op") / 1e6); add("page_bytes", metric("page_bytes")) }
		/^BenchmarkDashboardChart90d/ { add("chart90d_ms", $3 / 1e6); add("chart90d_cpu_ms", metric("cpu-ns/op") / 1e6); add("chart90d_bytes", metric("charts_bytes")) }
		/^BenchmarkDashboardWideChart90d/ { add("wide_chart90d_ms", $3 / 1e6); add("wide_chart90d_cpu_ms", metric("cpu-ns/op") / 1e6); add("wide_chart90d_bytes", metric("charts_bytes")); add("wide_chart90d_charts", metric("charts")) }
		/^BenchmarkDashboardWidePage/ { add("wide_page_ms", $3 / 1e6); add("wide_page_cpu_ms", metric("cpu-ns/op") / 1e6); add("wide_page_bytes", metric("page_bytes")); add("wide_page_charts", metric("charts")) }
		/dashboard store: generated/ { for (i = 1; i < NF; i++) if ($(i+1) == "s,") printf "dashboard: %sgenerated_now_s=%s\n", (/wide x/ ? "wide_" : ""), $i }
		END {
			split("page_ms page_cpu_ms page_bytes chart90d_ms chart90d_cpu_ms chart90d_bytes wide_chart90d_ms wide_chart90d_cpu_ms wide_chart90d_bytes wide_chart90d_charts wide_page_ms wide_page_cpu_ms wide_page_bytes wide_page_charts", keys, " ")
			for (i = 1; i in keys; i++) if (n[keys[i]]) printf "dashboard: %s median=%s runs=[%s]\n", keys[i], median(keys[i]), runs(keys[i])
		}'
	python3 -c 'import json, sys
m = json.load(open(sys.argv[2]))
print("dashboard: wide_store_readings=%d wide_store_bytes=%d wide_store_generate_s=%.0f (1 device x %d metrics x %d days, one reading an hour)" %
      (m["readings"], m["bytes"], m["generate_seconds"], m["metrics"], m["days"]))
if sys.argv[1] == "Wide":
    sys.exit()
m = json.load(open(sys.argv[3]))
print("dashboard: store_readings=%d store_bytes=%d store_generate_s=%.0f (d000 x %d metrics x %d days, %d devices x %d days, one reading a minute)" %
      (m["readings"], m["bytes"], m["generate_seconds"], m["metrics"], m["days"], m["devices"] - 1, m["other_days"]))' \
		"$only" "$wide/cairn-bench-dashboard.json" "$dir/cairn-bench-dashboard.json"
}

start=$SECONDS
if [[ " ${cases[*]} " == *" dashboard "* ]]; then
	dashboard_bench
	cases=("${cases[@]/dashboard/}")
fi
if [[ " ${cases[*]} " == *" series "* ]]; then
	series_bench
	cases=("${cases[@]/series/}")
fi
if [[ " ${cases[*]} " == *" retention "* ]]; then
	retention_bench
	cases=("${cases[@]/retention/}")
fi
if [[ " ${cases[*]} " == *" storage "* ]]; then
	storage_bench
	cases=("${cases[@]/storage/}")
fi
for c in "${cases[@]}"; do
	[ -n "$c" ] || continue
	for ((r = 1; r <= RUNS; r++)); do
		dir="$tmp/$c-$r"
		mkdir -p "$dir"
		"case_$c" "$dir"
		log "$c run $r/$RUNS: $(fmt "$RPS" 0) readings/s, peak RSS $((HWM / 1024)) MiB; $DETAIL"
		awk "BEGIN { exit !($OTHER > 15) }" &&
			log "warning: other work took $(fmt "$OTHER" 0)% of core 1 during this run; its figures are unreliable"
		rm -rf "$dir/data"
	done
	summarize "$c"
done
log "done in $((SECONDS - start)) s"
