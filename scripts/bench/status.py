#!/usr/bin/env python3
"""Helpers for scripts/bench.sh (standard library only).

  status.py ports N
      print N free TCP ports on 127.0.0.1, one a line
  status.py connected URL PID TIMEOUT
      poll URL (cairn's /v1/status) every 50 ms until mqtt.connected is true
  status.py readings URL PID TARGET TIMEOUT STALL
      poll URL every 50 ms until store.readings >= TARGET; print
      "EPOCH_SECONDS READINGS MESSAGES COMMITS COMMIT_MS_AVG" at the first
      poll that saw it
  status.py retention URL
      print "REMOVED LAST_RUN": the readings retention removed, and
      retention.last_run (- until the first run of retention by age ends)
  status.py rate URL SECONDS
      print "READINGS_PER_SEC REMOVED_PER_SEC" over the next SECONDS: the
      readings ingest decoded (ingest.readings) and retention removed
      (retention.removed_readings, 0 without retention)
  status.py pruning URL PID TIMEOUT
      poll URL every 50 ms until retention.removed_readings > 0 (a prune
      has begun)

  status.py sent URL PID TIMEOUT STALL
      poll URL every 50 ms until uplink.pending_readings is 0; print
      "EPOCH_SECONDS SENT_READINGS SENT_BATCHES RETRIES" at that poll

The waits fail (exit 1, reason on stderr) when process PID has exited, after
TIMEOUT seconds, or (readings) when store.readings has not moved for STALL
seconds while below TARGET.
"""
import json
import socket
import sys
import time
import urllib.request

POLL = 0.05


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def get(url):
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return json.load(r)
    except (OSError, ValueError):
        return None  # not listening yet, or mid-restart


def fail(msg, last):
    print(f"status.py: {msg}; last status: {json.dumps(last)[:600]}", file=sys.stderr)
    sys.exit(1)


def ports(n):
    socks, out = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        out.append(s.getsockname()[1])
    for s in socks:
        s.close()
    print("\n".join(map(str, out)))


def wait_for(url, pid, timeout, ok, what):
    """Poll url until ok(status) is true; fail when pid exits or after timeout."""
    end = time.monotonic() + timeout
    last = None
    while True:
        st = get(url)
        if st is not None:
            last = st
            if ok(st):
                return
        if not alive(pid):
            fail(f"cairn (pid {pid}) exited before {what}", last)
        if time.monotonic() > end:
            fail(f"{what}: not within {timeout:g}s", last)
        time.sleep(POLL)


def connected(url, pid, timeout):
    wait_for(url, pid, timeout, lambda st: st.get("mqtt", {}).get("connected"), "mqtt.connected became true")


def retention(url):
    st = get(url)
    if st is None or "retention" not in st:
        fail("no retention status", st)
    r = st["retention"]
    print(f"{r['removed_readings']} {r.get('last_run') or '-'}")


def rate(url, seconds):
    def sample():
        # The counters are read early in the request; the status then
        # walks the data directory, which takes longer in a big store.
        t = time.monotonic()
        st = get(url)
        if st is None:
            fail("no status", st)
        return t, st["ingest"]["readings"], st.get("retention", {}).get("removed_readings", 0)
    t0, n0, r0 = sample()
    time.sleep(seconds)
    t1, n1, r1 = sample()
    print(f"{(n1 - n0) / (t1 - t0):.1f} {(r1 - r0) / (t1 - t0):.1f}")


def pruning(url, pid, timeout):
    wait_for(url, pid, timeout, lambda st: st.get("retention", {}).get("removed_readings", 0) > 0,
             "a prune began")


def readings(url, pid, target, timeout, stall):
    end = time.monotonic() + timeout
    last, seen, moved = None, -1, time.monotonic()
    while True:
        st = get(url)
        now = time.monotonic()
        if st is not None:
            last = st
            n = st["store"]["readings"]
            if n >= target:
                print(f"{time.time():.3f} {n} {st['ingest']['messages']} "
                      f"{st['store']['commits']} {st['store'].get('commit_ms_avg', 0):.2f}")
                return
            if n != seen:
                seen, moved = n, now
        if not alive(pid):
            fail(f"cairn (pid {pid}) exited with {seen} of {target} readings stored", last)
        if now > end:
            fail(f"only {seen} of {target} readings stored after {timeout:g}s", last)
        if now - moved > stall:
            fail(f"stored readings stuck at {seen} of {target} for {stall:g}s", last)
        time.sleep(POLL)


def sent(url, pid, timeout, stall):
    end = time.monotonic() + timeout
    last, seen, moved = None, -1, time.monotonic()
    while True:
        st = get(url)
        now = time.monotonic()
        if st is not None:
            last = st
            up = st.get("uplink")
            if up is None:
                fail("status has no uplink", last)
            if up["pending_readings"] == 0:
                print(f"{time.time():.3f} {up['sent_readings']} {up['sent_batches']} {up['retries']}")
                return
            if up["pending_readings"] != seen:
                seen, moved = up["pending_readings"], now
        if not alive(pid):
            fail(f"cairn (pid {pid}) exited with {seen} readings pending", last)
        if now > end:
            fail(f"{seen} readings still pending after {timeout:g}s", last)
        if now - moved > stall:
            fail(f"pending readings stuck at {seen} for {stall:g}s", last)
        time.sleep(POLL)


def main(a):
    if a[:1] == ["ports"] and len(a) == 2:
        ports(int(a[1]))
    elif a[:1] == ["connected"] and len(a) == 4:
        connected(a[1], int(a[2]), float(a[3]))
    elif a[:1] == ["readings"] and len(a) == 6:
        readings(a[1], int(a[2]), int(a[3]), float(a[4]), float(a[5]))
    elif a[:1] == ["retention"] and len(a) == 2:
        retention(a[1])
    elif a[:1] == ["rate"] and len(a) == 3:
        rate(a[1], float(a[2]))
    elif a[:1] == ["pruning"] and len(a) == 4:
        pruning(a[1], int(a[2]), float(a[3]))
    elif a[:1] == ["sent"] and len(a) == 5:
        sent(a[1], int(a[2]), float(a[3]), float(a[4]))
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main(sys.argv[1:])
