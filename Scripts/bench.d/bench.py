#!/usr/bin/python3
"""bluectl benchmarks (see Scripts/bench). Prints figures; asserts nothing timed."""
import csv, json, os, re, resource, shutil, signal, statistics, subprocess, sys, tempfile, time

import throughput  # Scripts/bench.d/throughput.py: issue 29's table and targets
from procfs import cpu_s as _cpu, peak_rss_kib

BIN = sys.argv[1]  # empty: the lab part lets Scripts/lab build bluectl
WHAT = " ".join(sys.argv[2:]).split()
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(REPO, "Tests", "BusTierTests", "Fixtures")


def startup():
    """Wall time and peak RSS through Scripts/bench.d/maxrss.c (see there why not from here)."""
    os.makedirs(CBIN, exist_ok=True)
    helper = os.path.join(CBIN, "maxrss")
    subprocess.run(["cc", "-O2", "-Wall", "-o", helper, os.path.join(REPO, "Scripts", "bench.d", "maxrss.c")], check=True)

    def run(args):
        ns, rss_kb, status = map(int, subprocess.run([helper] + args, capture_output=True, text=True,
                                                     check=True).stdout.split())
        if status != 0:
            sys.exit(f"bench: {' '.join(args)} exited {status}")
        return ns / 1e9, rss_kb

    rows = []
    for args in (["--version"], ["--help"]):
        samples = [run([BIN] + args) for _ in range(30)]
        walls = sorted(s[0] for s in samples)
        rows.append(("bluectl " + args[0], statistics.median(walls) * 1000, walls[int(len(walls) * 0.9)] * 1000,
                     max(s[1] for s in samples) / 1024))
    print("| command | median wall | p90 wall | peak RSS |")
    print("|---|---|---|---|")
    for name, med, p90, rss in rows:
        print(f"| `{name}` | {med:.1f} ms | {p90:.1f} ms | {rss:.1f} MB |")


class PrivateBus:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="bluectl-bench-")
        self.address = f"unix:path={self.dir}/system_bus_socket"
        self.daemon = subprocess.Popen(
            ["dbus-daemon", "--config-file", os.path.join(FIXTURES, "bus.conf"), "--nofork", "--nopidfile",
             "--address", self.address], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.env = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=self.address)
        self._wait(lambda: os.path.exists(f"{self.dir}/system_bus_socket"), "bus socket")
        self.standin = subprocess.Popen(
            ["/usr/bin/python3", "-m", "dbusmock", "--system", "--template", os.path.join(FIXTURES, "bluez_standin.py")],
            env=self.env, stdout=subprocess.DEVNULL, stderr=open(f"{self.dir}/standin.log", "w"))
        self._wait(lambda: self.busctl("status", "org.bluez", check=False).returncode == 0, "org.bluez on the bus")

    def busctl(self, *args, check=True):
        return subprocess.run(["busctl", f"--address={self.address}"] + list(args), env=self.env,
                              capture_output=True, text=True, check=check)

    def mock(self, method, signature, *args):
        return self.busctl("call", "--timeout=300", "org.bluez", "/", "org.freedesktop.DBus.Mock", method, signature,
                           *map(str, args)).stdout.strip()

    @staticmethod
    def _wait(cond, what, timeout=20):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if cond():
                return
            time.sleep(0.05)
        sys.exit(f"bench: timed out waiting for {what}")

    def close(self):
        for p in (self.standin, self.daemon):
            p.kill()
            p.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


SCAN_RUNS = 5


def scan(devices=10_000, updates=100_000, runs=SCAN_RUNS):
    """bluectl scan vs Bleak's scanner on the same burst, and the floor of
    any libdbus client (scan.c: libdbus reading the messages, nothing more),
    each on a fresh private bus, interleaved (bluectl, Bleak, the floor,
    bluectl, …) so that the machine's drift is shared, `runs` times each.
    All are measured by the
    same harness in the same way (`_scan_run`): a line per event into a
    file, counted from outside; CPU and peak RSS from /proc; ended by
    SIGINT once every event arrived or nothing came for 5 s."""
    expected = devices + updates
    py = ensure_bleak_venv()
    # the floor: libdbus reading and validating each message, and nothing else (scan.c)
    os.makedirs(CBIN, exist_ok=True)
    floor = os.path.join(CBIN, "scan")
    subprocess.run(["cc", "-O2", "-Wall", "-o", floor, os.path.join(REPO, "Scripts", "bench.d", "scan.c")]
                   + subprocess.run(["pkg-config", "--cflags", "--libs", "dbus-1"], capture_output=True, text=True,
                                    check=True).stdout.split(), check=True)
    tools = (("`bluectl scan --json --duplicates`", [BIN, "scan", "--json", "--duplicates", "--adapter", "hci0"]),
             ("Bleak 3 `BleakScanner` (detection callback)",
              [py, os.path.join(REPO, "Scripts", "bench.d", "peers", "bleak_scan.py"), "hci0"]),
             ("C libdbus floor (scan.c: path and RSSI, no state)", [floor, "/org/bluez/hci0"]))
    # BENCH_SCAN_DECODE=compare (the default): also bluectl with sensor decoding off, the
    # cost of decoding per event as a ratio (issue 25: at most 1.10); off: not run
    decode = os.environ.get("BENCH_SCAN_DECODE", "compare")
    if decode == "compare":
        tools += (("`bluectl scan --json --duplicates --no-decode`",
                   [BIN, "scan", "--json", "--duplicates", "--no-decode", "--adapter", "hci0"]),)
    elif decode != "off":
        sys.exit(f"bench: BENCH_SCAN_DECODE={decode!r}: expected compare or off")
    results = {name: [] for name, _ in tools}
    for _ in range(runs):
        for name, cmd in tools:
            results[name].append(_scan_run(cmd, devices, updates))

    def spread(values, fmt):
        values = sorted(values)
        return f"{fmt(statistics.median(values))} ({fmt(values[0])}–{fmt(values[-1])})"

    print(f"{runs} runs each, interleaved; median (min–max)\n")
    print("| scanner | events | received | done after | events/s | CPU per event | peak RSS |")
    print("|---|---|---|---|---|---|---|")
    for name, rs in results.items():
        print(f"| {name} | {expected:,} | {spread([r['count'] for r in rs], lambda v: f'{v:,.0f}')} | "
              f"{spread([r['elapsed'] for r in rs], lambda v: f'{v:.2f} s')} | "
              f"{spread([r['count'] / r['elapsed'] for r in rs], lambda v: f'{v:,.0f}')} | "
              f"{spread([r['cpu'] / max(r['count'], 1) * 1e6 for r in rs], lambda v: f'{v:.1f} µs')} | "
              f"{spread([r['rss_kb'] / 1024 for r in rs], lambda v: f'{v:.1f} MB')} |")
    mine, bleak = results[tools[0][0]], results[tools[1][0]]
    cpu_mine = statistics.median(r["cpu"] / max(r["count"], 1) * 1e6 for r in mine)
    cpu_bleak = statistics.median(r["cpu"] / max(r["count"], 1) * 1e6 for r in bleak)
    ratio = cpu_mine / cpu_bleak if cpu_bleak else None
    rss = max(r["rss_kb"] for r in mine) / 1024
    delivered = all(r["count"] == expected for r in mine)
    print()
    for limit, issue in ((0.8, 26), (0.5, 16)):
        print(target(f"scan: bluectl CPU/event {cpu_mine:.1f} µs = " + (
            f"{_x(ratio, limit)} × Bleak's {cpu_bleak:.1f} µs (median of {runs} runs each; issue {issue}'s target ≤ {limit})"
            if ratio else "? (no Bleak figure)"), ratio is not None and ratio <= limit))
    kept = [os.path.relpath(r["kept"], REPO) for r in mine if r.get("kept")]
    print(target(f"scan: bluectl printed {[r['count'] for r in mine]} events of the {expected:,} in its {runs} runs "
                 f"(target: exactly those in each run{'; kept: ' + ', '.join(kept) if kept else ''})", delivered))
    print(target(f"scan: bluectl peak RSS {rss:.1f} MB (highest of {runs} runs; target ≤ 30 MB)", rss <= 30))
    floor_runs = results[tools[2][0]]
    cpu_floor = statistics.median(r["cpu"] / max(r["count"], 1) * 1e6 for r in floor_runs)
    if any(r["count"] != expected for r in floor_runs):
        print(f"scan: the C libdbus floor printed {[r['count'] for r in floor_runs]} lines, not {expected:,} in each "
              f"run: its CPU/event below is not comparable")
    if cpu_bleak and cpu_mine:
        print(f"scan: the C libdbus floor's CPU/event {cpu_floor:.1f} µs = {cpu_floor / cpu_bleak:.2f} × Bleak's, "
              f"{cpu_floor / cpu_mine:.2f} × bluectl's (what any libdbus client pays before doing anything)")
    if decode == "compare":
        plain = results[tools[3][0]]
        cpu_plain = statistics.median(r["cpu"] / max(r["count"], 1) * 1e6 for r in plain)
        cost = cpu_mine / cpu_plain if cpu_plain else None
        print(target(f"scan: bluectl CPU/event with sensor decoding {cpu_mine:.1f} µs = " + (
            f"{_x(cost, 1.1)} × without (--no-decode) {cpu_plain:.1f} µs (median of {runs} runs each; target ≤ 1.10)"
            if cost else "? (no --no-decode figure)"), cost is not None and cost <= 1.1))


def _scan_run(cmd, devices, updates):
    """One scanner (`cmd`, printing a line per event) on a fresh bus and burst."""
    bus = PrivateBus()
    try:
        bus.mock("AddAdapter", "sssb", "hci0", "00:AA:01:00:00:01", "bench", "true")
        out_path = os.path.join(bus.dir, "scan.lines")
        with open(out_path, "w") as out:
            scanner = subprocess.Popen(cmd, env=bus.env, stdout=out, stderr=open(f"{bus.dir}/scanner.err", "w"))
        # ready when it has started discovery (both tools call StartDiscovery)
        bus._wait(lambda: "true" in bus.busctl("get-property", "org.bluez", "/org/bluez/hci0", "org.bluez.Adapter1",
                                                 "Discovering").stdout, "Discovering")
        cpu0 = _cpu(scanner.pid)
        start = time.perf_counter()
        bus.mock("EmitAdvertisementBurst", "suu", "hci0", devices, updates)
        expected = devices + updates
        last_count, last_change = -1, time.perf_counter()
        while True:
            count = _lines(out_path)
            now = time.perf_counter()
            if count != last_count:
                last_count, last_change = count, now
            if count >= expected or now - last_change > 5:
                break
            time.sleep(0.02)
        r = {"count": last_count, "elapsed": max(last_change - start, 1e-3),
             "cpu": _cpu(scanner.pid) - cpu0, "rss_kb": peak_rss_kib(scanner.pid)}
        if last_count != expected:  # kept to be looked at: which events are missing or extra
            os.makedirs(os.path.join(LAB_DIR, "bench"), exist_ok=True)
            r["kept"] = os.path.join(LAB_DIR, "bench", time.strftime("scan-%Y%m%d-%H%M%S-") + f"{last_count}.lines")
            shutil.copy(out_path, r["kept"])
        scanner.send_signal(signal.SIGINT)
        try:
            scanner.wait(timeout=10)
        except subprocess.TimeoutExpired:
            scanner.kill()
            scanner.wait()
        return r
    finally:
        bus.close()


def code():
    """A one-shot read on the bus tier, counted instead of timed: instructions
    (callgrind) and distinct code executed (lackey's superblocks, what qemu's
    TCG translates once per process: the lab's time follows it more than it
    follows instructions), for bluectl and the floor (busctl, the C client)."""
    if not shutil.which("valgrind"):
        subprocess.run(_as_root(["apt-get", "install", "-y", "-q", "valgrind"]), check=True)
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "dbus-1"], capture_output=True, text=True,
                           check=True).stdout.split()
    # the C clients built here, not in .lab/bench-bin: a lab boot may be running those
    work = tempfile.mkdtemp(prefix="bluectl-code-")
    subprocess.run(["cc", "-O2", "-o", os.path.join(work, "readvalue"),
                    os.path.join(REPO, "Scripts", "bench.d", "readvalue.c")] + flags, check=True)
    bin_copy = os.path.join(work, "bluectl")  # valgrind cannot read the full debug info of the static stdlib
    subprocess.run(["strip", "--strip-debug", "-o", bin_copy, BIN], check=True)
    bus = PrivateBus()
    try:
        address = "11:22:33:44:55:66"
        bus.mock("AddAdapter", "sssb", "hci0", "00:AA:01:00:00:01", "bench", "true")
        bus.mock("AddAdvertiser", "ssa{sv}", "hci0", address, 1, "Name", "s", "bench")
        svc = bus.mock("AddGattService", "sssb", "hci0", address, "180f", "true").split()[1].strip('"')
        chr_path = bus.mock("AddGattCharacteristic", "osasay", svc, "2a19", 1, "read", 1, 87).split()[1].strip('"')
        subprocess.run([bin_copy, "connect", address], env=bus.env, check=True, capture_output=True)
        tools = [
            ("`bluectl read DEV 2a19`", [bin_copy, "read", address, "2a19"]),
            ("`busctl call … ReadValue`", ["busctl", "call", "org.bluez", chr_path, "org.bluez.GattCharacteristic1",
                                           "ReadValue", "a{sv}", "0"]),
            ("C libdbus client (readvalue.c)", [os.path.join(work, "readvalue"), chr_path]),
            ("(`bluectl --version`)", [bin_copy, "--version"]),
        ]
        rows = []
        for name, argv in tools:
            out = os.path.join(work, "cg.out")
            r = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"] + argv, env=bus.env,
                               capture_output=True, text=True)
            ir = next((int(l.split()[-1].replace(",", "")) for l in r.stderr.splitlines() if "Collected" in l), None)
            if ir is None or r.returncode != 0:
                sys.exit(f"bench: {name} under callgrind failed (status {r.returncode}): {r.stderr[-600:]}")
            log = os.path.join(work, "lackey.%p")
            subprocess.run(["valgrind", "--tool=lackey", "--trace-superblocks=yes", f"--log-file={log}"] + argv,
                           env=bus.env, capture_output=True)
            blocks = set()
            for f in os.listdir(work):
                if f.startswith("lackey."):
                    with open(os.path.join(work, f)) as fh:
                        blocks.update(l.split()[1] for l in fh if l.startswith("SB "))
                    os.remove(os.path.join(work, f))
            rows.append((name, ir, len(blocks)))
        floor_ir = min(r[1] for r in rows[1:3] if r[1])
        floor_sb = min(r[2] for r in rows[1:3] if r[2])
        print("| tool | instructions | × floor | distinct code blocks | × floor |")
        print("|---|---|---|---|---|")
        for name, ir, sb in rows:
            print(f"| {name} | {ir / 1e6:.2f} M | {ir / floor_ir:.2f} | {sb:,} | {sb / floor_sb:.2f} |")
        notify_code(bus, work, bin_copy, address, svc, flags)
    finally:
        bus.close()
        shutil.rmtree(work, ignore_errors=True)


NOTIFY_COUNTS = (100, 3000)  # values per counted run: per value from the difference; the whole process at the second


def notify_code(bus, work, bin_copy, address, service, flags):
    """Notifications on the bus tier, counted: callgrind over `subscribe` (its
    forms), the C client (notify.c) and a bare python3-dbus consumer
    (peers/py_notify.py, handed the characteristic's path), each receiving
    the stand-in's EmitNotifications burst of 100 and of 3,000 values. Per
    value: the difference of the two runs over 2,900 values (start-up
    cancels out); the whole process: the 3,000-value run, start-up to exit.
    Heap allocations per value the same way, from memcheck's count of the
    whole process (every malloc, calloc and realloc of every thread)."""
    subprocess.run(["cc", "-O2", "-o", os.path.join(work, "notify"), os.path.join(REPO, "Scripts", "bench.d", "notify.c")]
                   + flags, check=True)
    stream = "b1ec7100-0000-4000-8000-000000000001"
    chr_path = bus.mock("AddGattCharacteristic", "osasay", service, stream, 2, "read", "notify", 1, 0).split()[1].strip('"')
    sub = [bin_copy, "subscribe", address, stream, "--count"]
    tools = [
        ("`bluectl subscribe` (default text)", lambda n: sub + [str(n)]),
        ("`bluectl subscribe --json`", lambda n: sub + [str(n), "--json"]),
        ("`bluectl subscribe --format raw`", lambda n: sub + [str(n), "--format", "raw"]),
        ("C libdbus client (notify.c)", lambda n: [os.path.join(work, "notify"), chr_path, str(n)]),
        ("python3-dbus (py_notify.py)", lambda n: ["/usr/bin/python3", os.path.join(REPO, "Scripts", "bench.d", "peers",
                                                                                    "py_notify.py"), "start", chr_path, str(n)]),
    ]

    def notifying():
        return "true" in bus.busctl("get-property", "org.bluez", chr_path, "org.bluez.GattCharacteristic1", "Notifying").stdout

    def count(argv, n, tool, figure):
        """`figure` of valgrind `tool`'s stderr (None: not there), and the lines the consumer printed."""
        with open(os.path.join(work, "notify.out"), "w") as sink:
            p = subprocess.Popen(["valgrind", *tool] + argv, env=bus.env,
                                 stdout=sink, stderr=subprocess.PIPE, text=True)
            bus._wait(lambda: notifying() or p.poll() is not None, "Notifying", timeout=120)
            bus.mock("EmitNotifications", "ouu", chr_path, 0, n)
            _, err = p.communicate(timeout=1200)
        bus._wait(lambda: not notifying(), "Notifying false", timeout=60)
        lines = _lines(os.path.join(work, "notify.out"))
        found = figure(err)
        if found is None or p.returncode != 0:
            sys.exit(f"bench: {argv[0]} under valgrind {tool[0]} failed (status {p.returncode}): {err[-600:]}")
        return found, lines

    callgrind = ["--tool=callgrind", f"--callgrind-out-file={os.path.join(work, 'cg.notify')}"]
    def collected(err):
        return next((int(l.split()[-1].replace(",", "")) for l in err.splitlines() if "Collected" in l), None)
    memcheck = ["--tool=memcheck", "--leak-check=no"]
    def allocations(err):
        m = re.search(r"total heap usage: ([\d,]+) allocs", err)
        return int(m.group(1).replace(",", "")) if m else None

    rows = []
    small, big = NOTIFY_COUNTS
    for name, argv in tools:
        counts = {n: count(argv(n), n, callgrind, collected) for n in NOTIFY_COUNTS}
        allocs = {n: count(argv(n), n, memcheck, allocations)[0] for n in NOTIFY_COUNTS}
        rows.append((name, (counts[big][0] - counts[small][0]) / (big - small), counts[big][0], counts[big][1],
                     (allocs[big] - allocs[small]) / (big - small)))
    c_value = next(r[1] for r in rows if r[0].startswith("C "))
    py_whole = next(r[2] for r in rows if r[0].startswith("python3"))
    print(f"\nNotifications (the stand-in's burst; instructions and heap allocations per value from the runs of "
          f"{small:,} and {big:,} values; the whole process: the run of {big:,}, start-up to exit)\n")
    print(f"| tool | per value | × the C client | allocations per value | whole process, {big:,} values | "
          f"× python3-dbus | lines out |")
    print("|---|---|---|---|---|---|---|")
    for name, per, whole, lines, allocs in rows:
        print(f"| {name} | {per:,.0f} | {per / c_value:.2f} | {allocs:.1f} | {whole / 1e6:.1f} M | "
              f"{whole / py_whole:.2f} | {lines:,} |")


def _lines(path):
    with open(path, "rb") as f:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))


# ------------------------------------------------------------------ micro
MICRO_SCRATCH = os.path.join(REPO, ".build-micro")
# -enable-testing: the cases reach internal API through @testable import (Benchmarks/Package.swift)
MICRO_FLAGS = ["--package-path", os.path.join(REPO, "Benchmarks"), "--scratch-path", MICRO_SCRATCH,
               "-Xswiftc", "-enable-testing"]
MICRO_ITERATIONS = 2000  # per callgrind run


def micro(only=""):
    """The hot paths of Benchmarks/ (decoding, the mirror, rendering), each
    measured twice: under package-benchmark (wall clock p50/p90, mallocs
    through its malloc interposer, 1,000 operations a measurement) and under
    callgrind (instructions per operation: HotPathCount runs MICRO_ITERATIONS
    operations after a warm-up, and only those are collected). `only`: a
    regex of benchmark names (BENCH_MICRO)."""
    if not shutil.which("valgrind"):
        subprocess.run(_as_root(["apt-get", "install", "-y", "-q", "valgrind"]), check=True)
    subprocess.run(["swift", "build", "-c", "release"] + MICRO_FLAGS, check=True, stdout=sys.stderr)
    count = os.path.join(MICRO_SCRATCH, "release", "HotPathCount")
    cases = [line.split("\t", 1) for line in
             subprocess.run([count, "--list"], capture_output=True, text=True, check=True).stdout.splitlines()]
    if only:
        cases = [c for c in cases if re.fullmatch(only, c[0])]
        if not cases:
            sys.exit(f"bench: no micro-benchmark matches {only!r}")
    # package-benchmark: one run of the HotPaths target, results as InfluxDB CSV on stdout
    args = ["swift", "package"] + MICRO_FLAGS + ["benchmark", "--no-progress", "--format", "influx", "--path", "stdout"]
    if only:
        args += ["--filter", only]
    run = subprocess.run(args, capture_output=True, text=True)
    if run.returncode != 0:
        sys.stderr.write(run.stdout[-4000:] + run.stderr[-4000:])
        sys.exit(f"bench: swift package benchmark failed (status {run.returncode})")
    stats = {}  # (name, metric) -> {percentile: value per measurement}
    for row in csv.reader(l for l in run.stdout.splitlines() if l.startswith("HotPaths,")):
        metric, name, pct, value = row[6], row[8], float(row[9]), int(row[10])
        stats.setdefault((name, metric), {})[pct] = value
    per_measurement = 1000  # scalingFactor .kilo (Benchmarks/Benchmarks/HotPaths/HotPaths.swift)
    # callgrind: a copy without debug info (valgrind 3.19 cannot read Swift 6.3's DWARF 5)
    work = tempfile.mkdtemp(prefix="bluectl-micro-")
    try:
        binary = os.path.join(work, "HotPathCount")
        subprocess.run(["strip", "--strip-debug", "-o", binary, count], check=True)
        instructions = {}
        for name, _ in cases:
            out = os.path.join(work, f"callgrind.{name}")
            subprocess.run(["valgrind", "--tool=callgrind", "--collect-atstart=no",
                            "--toggle-collect=bluectl_bench_measure", f"--callgrind-out-file={out}",
                            binary, name, str(MICRO_ITERATIONS)],
                           env=dict(os.environ, SWIFT_DETERMINISTIC_HASHING="1"), check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            with open(out) as f:
                totals = [int(l.split()[1]) for l in f if l.startswith("totals:")]
            instructions[name] = totals[0] / MICRO_ITERATIONS if totals else None
    finally:
        shutil.rmtree(work, ignore_errors=True)

    def p(name, metric, pct):
        v = stats.get((name, metric), {}).get(pct)
        return None if v is None else v / per_measurement

    print("Per operation; time and mallocs from package-benchmark (p50, p90 of its measurements of 1,000 "
          f"operations), instructions from callgrind ({MICRO_ITERATIONS:,} operations after 100 uncounted)\n")
    print("| benchmark | one operation | instructions | mallocs | time p50 | time p90 | operations/s (p50) |")
    print("|---|---|---|---|---|---|---|")
    for name, about in cases:
        ir, mallocs = instructions.get(name), p(name, "Malloc(total)", 50.0)
        t50, t90 = p(name, "Time(wallclock)", 50.0), p(name, "Time(wallclock)", 90.0)
        print(f"| `{name}` | {about} | {f'{ir:,.0f}' if ir else '?'} | "
              f"{f'{mallocs:.1f}' if mallocs is not None else '?'} | "
              f"{_fmt(t50 / 1000 if t50 else None, 'µs', 2)} | {_fmt(t90 / 1000 if t90 else None, 'µs', 2)} | "
              f"{f'{1e9 / t50:,.0f}' if t50 else '?'} |")


# ------------------------------------------------------------------ lab
LAB_DIR = os.path.join(REPO, ".lab")
CBIN = os.path.join(LAB_DIR, "bench-bin")
VENV = os.path.join(LAB_DIR, "venv-bleak")
FAILED_TARGETS = []


def _x(ratio, limit):
    """A ratio as printed beside its target: a third digit where two would round it onto the limit."""
    return f"{ratio:.3f}" if f"{ratio:.2f}" == f"{limit:.2f}" and ratio != limit else f"{ratio:.2f}"


def target(line, ok):
    """One of issue 16's targets: `line` states the figures and the ratio; returns it
    with the verdict, and records a missed one (the exit status names each)."""
    if not ok:
        FAILED_TARGETS.append(line)
    return f"{line} {'met' if ok else 'MISSED'}"


def _as_root(args):
    return args if os.geteuid() == 0 else ["sudo"] + args


def lab_prepare():
    """The peers the guest runs, made on the host (the guest sees the repository and /):
    the C libdbus clients, and a venv with Bleak."""
    os.makedirs(CBIN, exist_ok=True)
    if subprocess.run(["pkg-config", "--exists", "dbus-1"]).returncode != 0:
        subprocess.run(_as_root(["apt-get", "install", "-y", "-q", "libdbus-1-dev", "pkg-config"]), check=True)
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "dbus-1"], capture_output=True, text=True,
                           check=True).stdout.split()
    for name in ("readvalue", "notify", "writestream"):
        subprocess.run(["cc", "-O2", "-Wall", "-o", os.path.join(CBIN, name),
                        os.path.join(REPO, "Scripts", "bench.d", name + ".c")] + flags, check=True)
    # the L2CAP peer: the kernel ABI from the C shim's header, no libdbus
    subprocess.run(["cc", "-O2", "-Wall", "-I", os.path.join(REPO, "Sources", "CBluectlShim", "include"), "-o",
                    os.path.join(CBIN, "l2cat"), os.path.join(REPO, "Scripts", "bench.d", "l2cat.c")], check=True)
    ensure_bleak_venv()


def ensure_bleak_venv():
    """A venv with Bleak from PyPI under .lab/ (made once)."""
    py = os.path.join(VENV, "bin", "python")
    if not os.access(py, os.X_OK) or subprocess.run([py, "-c", "import bleak"]).returncode != 0:
        if subprocess.run(["/usr/bin/python3", "-c", "import venv, ensurepip"], capture_output=True).returncode != 0:
            subprocess.run(_as_root(["apt-get", "install", "-y", "-q", "python3-venv"]), check=True)
        subprocess.run(["/usr/bin/python3", "-m", "venv", "--clear", VENV], check=True)
        subprocess.run([py, "-m", "pip", "install", "-q", "bleak"], check=True)
    return py


def lab(reads=12, notify="3000", reps=3, big=10000, only=""):
    lab_prepare()
    out = os.path.join(LAB_DIR, "bench", time.strftime("lab-%Y%m%d-%H%M%S"))
    os.makedirs(out)
    env = dict(os.environ)  # BLUECTL_BIN passes through; else Scripts/lab builds (static stdlib, .build-lab)
    args = [os.path.join(REPO, "Scripts", "lab"), "run", "--fast", "-q",
            "--timeout", os.environ.get("BENCH_LAB_TIMEOUT", "2400"), "--out", out,
            os.path.join(REPO, "Scripts", "bench.d", "lab-guest.py"), "--reads", str(reads), "--notify", notify,
            "--notify-reps", str(reps), "--big", str(big), "--cbin", os.path.relpath(CBIN, REPO),
            "--venv", os.path.relpath(os.path.join(VENV, "bin", "python"), REPO),
            "--devices", os.environ.get("BENCH_DEVICES", "1000"), "--devices-ms", os.environ.get("BENCH_DEVICES_MS", "2"),
            "--devices-reps", str(reps), "--breakdown", os.environ.get("BENCH_BREAKDOWN", "5"),
            "--throughput", os.environ.get("BENCH_THROUGHPUT", f"2097152,3000,524288,{reps}")]
    if only:
        args += ["--only", only]
    if os.environ.get("BENCH_COMPARE"):
        compare = os.path.realpath(os.environ["BENCH_COMPARE"])
        if not compare.startswith(REPO + os.sep) or not os.access(compare, os.X_OK):
            sys.exit(f"bench: BENCH_COMPARE={compare} must be an executable inside the repository (the guest sees only it)")
        args += ["--compare", os.path.relpath(compare, REPO)]
    if os.environ.get("BENCH_CONSUMERS"):
        args += ["--consumers", os.environ["BENCH_CONSUMERS"]]
    print(f"(one lab boot; logs in {os.path.relpath(out, REPO)})", flush=True)
    rc = subprocess.run(args, env=env, cwd=REPO, stdout=sys.stderr).returncode
    path = os.path.join(out, "bench.json")
    if not os.path.exists(path):
        sys.exit(f"bench: the lab run failed (status {rc}); see {out}/check.log and lab.log")
    with open(path) as f:
        res = json.load(f)
    text = lab_report(res, out)
    with open(os.path.join(out, "table.md"), "w") as f:
        f.write(text)
    print(text)
    if rc != 0:
        why = ""
        try:
            with open(os.path.join(out, "console.log"), errors="replace") as f:
                crash = [l.strip() for l in f if "Segmentation fault" in l or "Call Trace" in l]
            with open(os.path.join(out, "check.log"), errors="replace") as f:
                last = f.read().strip().splitlines()[-1:]
            why = "; ".join(crash[:2] + last)
        except OSError:
            pass
        print(f"bench: the guest script ended early (status {rc}), later rows are missing: {why}", file=sys.stderr)
        FAILED_TARGETS.append(f"the guest script exited {rc} (see {out}/check.log): {why}")


def _pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))] if xs else None


def _fmt(x, unit="s", digits=3):
    return "–" if x is None else f"{x:.{digits}f} {unit}".strip()


def _table_head(L, columns):
    L.append("")
    L.append("| " + " | ".join(columns) + " |")
    L.append("|" + "---|" * len(columns))


def _group(items, key):
    groups = {}
    for item in items:
        groups.setdefault(key(item), []).append(item)
    return groups


def lab_report(res, out):
    L = []
    env = res["env"]
    L.append(f"Lab: one boot (TCG), bluetoothd/bluetoothctl {env.get('bluetoothctl')}, [GATT] Channels = "
             f"{env.get('gatt_channels') or 'default'}, {env.get('bluectl')}, Python {env.get('python')}, dbus-python "
             f"{env.get('dbus-python')}, Bleak/dbus-fast {env.get('bleak', 'n/a')}; "
             f"{res.get('reconnects', 0)} reconnects (bluetoothctl's runs need one each); guest script "
             f"{res.get('elapsed_s', 0):.0f} s. Logs: {os.path.relpath(out, REPO)}")
    if res.get("reads"):
        L.append("")
        rows = {}
        for t in res["reads"]:
            ok = [r for r in t["runs"] if r["value_s"] is not None and (r["rc"] == 0 or t["tool"] == "bluetoothctl")]
            rows[t["tool"]] = {
                "n": len(ok), "of": len(t["runs"]),
                "val": statistics.median([r["value_s"] for r in ok]) if ok else None,
                "val90": _pct([r["value_s"] for r in ok], 0.9),
                "exit": statistics.median([r["exit_s"] for r in ok]) if ok else None,
                "cpu": statistics.median([r["cpu_s"] for r in ok]) if ok else None,
                "cpu90": _pct([r["cpu_s"] for r in ok], 0.9)}
        ref = {"busctl": rows.get("busctl call"), "C client": rows.get("C libdbus (readvalue.c)")}
        nruns = max((r["of"] for r in rows.values()), default=0)
        L.append(f"One-shot read of 2a19 on the connected device, process start → value printed "
                 f"({nruns} runs each after one uncounted warm-up, tools interleaved):")
        L.append("")
        L.append("| tool | ok | median to value | p90 | median to exit | median CPU | p90 CPU | × busctl (time) | "
                 "× C client (time) | × busctl (CPU) | × C client (CPU) |")
        L.append("|---|---|---|---|---|---|---|---|---|---|---|")

        def x(r, peer, key):
            p = ref[peer]
            return _fmt(r[key] / p[key] if p and p[key] and r[key] else None, "", 2)
        for name, r in rows.items():
            L.append(f"| {name} | {r['n']}/{r['of']} | {_fmt(r['val'])} | {_fmt(r['val90'])} | {_fmt(r['exit'])} | "
                     f"{_fmt(r['cpu'])} | {_fmt(r['cpu90'])} | {x(r, 'busctl', 'val')} | {x(r, 'C client', 'val')} | "
                     f"{x(r, 'busctl', 'cpu')} | {x(r, 'C client', 'cpu')} |")
        L.append("")
        L.append("Rows in parentheses break bluectl's time down (not peers): `--version` is process start-up "
                 "alone, `adapters` adds the bus connection and reading BlueZ's object tree.")
        b = rows.get("bluectl read")
        busctl, cclient = ref["busctl"], ref["C client"]
        if b is not None:
            ratio = b["val"] / busctl["val"] if b["val"] and busctl and busctl["val"] else None
            c = (f"{b['val'] / cclient['val']:.2f} × the C client's {cclient['val']:.3f} s"
                 if b["val"] and cclient and cclient["val"] else "the C client: no figure")
            L.append("")
            L.append(target(f"read: bluectl median to value " + (
                f"{b['val']:.3f} s = {_x(ratio, 1.2)} × busctl's {busctl['val']:.3f} s (target ≤ 1.2; = {c})"
                if ratio else "? (no figure for bluectl or busctl)"), ratio is not None and ratio <= 1.2))
            if b["n"] < b["of"]:
                L.append(target(f"read: bluectl failed {b['of'] - b['n']} of {b['of']} runs (target: none)", False))
        L.extend(read_breakdown_report(res.get("read_breakdown"), rows))
    if res.get("notify"):
        L.append("")
        L.append("Notifications: periph.py's stream, a burst of N sequence-numbered 20-byte values as fast as "
                 "bluetoothd takes them; loss by sequence number as a set, order checked; rate between the first "
                 "and the last value; consumer CPU from the burst's start to its end:")
        _table_head(L, ["consumer", "N", "runs", "received (worst)", "lost (all runs)", "out of order",
                        "rate median (min–max)", "CPU/value median", "peripheral sent"])
        groups = _group(res["notify"], lambda r: (r["tool"], r["n"]))
        summary = {}
        for (tool, n), runs in groups.items():
            good = [r for r in runs if "error" not in r or r.get("valid")]
            rates = [r["rate"] for r in good if r.get("rate")]
            cpus = [r["cpu_per_value_us"] for r in good if r.get("cpu_per_value_us")]
            lost = sum(r.get("missing", n) + r.get("corrupt", 0) for r in runs)
            worst = min((r.get("valid", 0) for r in runs), default=0)
            ooo = sum(r.get("out_of_order", 0) for r in good)
            errs = [r["error"] for r in runs if "error" in r]
            sent = sorted({r.get("peripheral", {}).get("sent") for r in runs if r.get("peripheral")} - {None})
            s = summary[(tool, n)] = {"rate": statistics.median(rates) if rates else None,
                                      "cpu": statistics.median(cpus) if cpus else None,
                                      "lost": lost, "ooo": ooo, "runs": len(runs), "errs": errs,
                                      "worst": worst}
            L.append(f"| {tool} | {n:,} | {len(runs)} | {worst:,}/{n:,} | {lost} | {ooo} | "
                     + (f"{s['rate']:,.0f}/s ({min(rates):,.0f}–{max(rates):,.0f})" if rates else "–")
                     + f" | {_fmt(s['cpu'], 'µs', 0)} | {', '.join(map(str, sent)) or '?'} |"
                     + (f" {'; '.join(errs)}" if errs else ""))
        if not res["env"].get("notify_via"):
            L.append("| bluectl --notify-via acquire | – | – | not available (no --notify-via in this bluectl) | | | | | |")
        L.append("")
        for n in sorted({n for (_, n) in summary}):
            b = summary.get(("bluectl subscribe --format raw", n))
            if not b:
                continue
            peers = {t: s for (t, m), s in summary.items() if m == n and not t.startswith(("bluectl", "("))}
            start_peers = {t: s for t, s in peers.items() if "Acquire" not in t and s["rate"]}
            c = peers.get("C libdbus StartNotify (notify.c)")
            py = peers.get("python3-dbus StartNotify")
            zero = b["lost"] == 0 and (res["env"].get("gatt_channels") != "1" or b["ooo"] == 0) and not b["errs"]
            L.append(target(f"notify N={n:,}: bluectl subscribe (StartNotify, --format raw) lost {b['lost']}, "
                            f"{b['ooo']} out of order in {b['runs']} runs{' ' + str(b['errs']) if b['errs'] else ''} "
                            f"(target: 0 lost, in order)", zero))
            fastest = max(start_peers.items(), key=lambda kv: kv[1]["rate"]) if start_peers else None
            rr = b["rate"] / fastest[1]["rate"] if fastest and b["rate"] else None
            L.append(target(f"notify N={n:,}: bluectl rate " + (
                f"{b['rate']:,.0f}/s = {_x(rr, 0.95)} × the fastest StartNotify peer's, {fastest[0]} "
                f"{fastest[1]['rate']:,.0f}/s (target ≥ 0.95)" if rr is not None else
                "? (no figure for bluectl or any StartNotify peer)"), rr is not None and rr >= 0.95))
            cr = b["cpu"] / c["cpu"] if c and c["cpu"] and b["cpu"] else None
            pr = (f"; = {b['cpu'] / py['cpu']:.2f} × python3-dbus StartNotify's {py['cpu'] / 1000:.2f} ms"
                  if py and py["cpu"] and b["cpu"] else "")
            L.append(target(f"notify N={n:,}: bluectl CPU/value " + (
                f"{b['cpu'] / 1000:.2f} ms = {_x(cr, 1.2)} × the C client's {c['cpu'] / 1000:.2f} ms (target ≤ 1.2{pr})"
                if cr is not None else f"? (no figure for bluectl or the C client notify.c{pr})"),
                cr is not None and cr <= 1.2))
            compare = res["env"].get("compare")
            for form in ("--format raw", "--json", "(default text)"):
                k = summary.get((f"{compare} subscribe {form}", n)) if compare else None
                m = summary.get((f"bluectl subscribe {form}", n))
                if k and k["cpu"] and m and m["cpu"] and c and c["cpu"]:
                    L.append(f"notify N={n:,}, subscribe {form}: CPU/value {m['cpu'] / 1000:.2f} ms = "
                             f"{m['cpu'] / c['cpu']:.2f} × the C client's; {compare} (same boot) {k['cpu'] / 1000:.2f} ms = "
                             f"{k['cpu'] / c['cpu']:.2f} ×")
            # AcquireNotify: bluectl's stays the fastest consumer of all; its losses (bluetoothd
            # drops values silently when the socket is full) are printed, not a target
            a = summary.get(("bluectl --notify-via acquire (raw)", n))
            if a and a["rate"]:
                others = {t: s for (t, m), s in summary.items() if m == n and s["rate"] and not t.startswith("(")
                          and t != "bluectl --notify-via acquire (raw)" and not t.startswith("bluectl-")}
                top = max(others.items(), key=lambda kv: kv[1]["rate"]) if others else None
                ar = a["rate"] / top[1]["rate"] if top else None
                losses = ", ".join(f"{t} {s['lost']}" for (t, m), s in summary.items()
                                   if m == n and "Acquire" in t and "acquire" not in t) or "no peer"
                L.append(target(f"notify N={n:,}: bluectl --notify-via acquire rate {a['rate']:,.0f}/s = " + (
                    f"{_x(ar, 1)} × the fastest other consumer's, {top[0]} {top[1]['rate']:,.0f}/s" if top else
                    "(no other consumer)") + f", lost {a['lost']} in {a['runs']} runs (AcquireNotify peers lost: "
                    f"{losses}), CPU/value {_fmt(a['cpu'], 'µs', 0)} (target: the fastest, ≥ 1.00)",
                    ar is None or ar >= 1))
    L.extend(process_report(res.get("notify")))
    L.extend(devices_report(res.get("devices")))
    L.extend(throughput.report(res.get("throughput"), target, _x))
    for note in res.get("notes", []):
        L.append(f"- {note}")
    return "\n".join(L) + "\n"


PROCESS_TOOLS = ("bluectl subscribe (default text)", "bluectl subscribe --json", "bluectl subscribe --format raw",
                 "C libdbus StartNotify (notify.c)", "python3-dbus StartNotify")
PROCESS_FORMS = ("subscribe (default text)", "subscribe --json", "subscribe --format raw")
PROCESS_PEER = "python3-dbus StartNotify"


def process_report(runs):
    """The whole process as people run it (issue 26): each notify run's CPU from
    exec to exit (wait4), start-up, finding the device, subscribing and exit
    included, against a bare python3-dbus consumer handed the characteristic's
    path; target: `subscribe` (default text and --json) <= 0.6 x its CPU."""
    if not runs:
        return []
    L = ["", "The whole process, start-up to exit (wait4 CPU of each run above that ended by itself with every value; "
         "python3-dbus is handed the characteristic's D-Bus path, bluectl finds the device and the characteristic by "
         "address and UUID):"]
    _table_head(L, ["consumer", "N", "runs", "process CPU median (min–max)", "process wall median",
                    f"× {PROCESS_PEER} (CPU)"])
    rows = {}
    compared = lambda t: t.split(" ", 1)[0].startswith("bluectl-") and t.split(" ", 1)[-1] in PROCESS_FORMS
    for (tool, n), rs in _group(runs, lambda r: (r["tool"], r["n"])).items():
        done = [r for r in rs if r.get("process_cpu_s") and r.get("missing") == 0]
        if tool in PROCESS_TOOLS or compared(tool):
            rows[(tool, n)] = (rs, sorted(r["process_cpu_s"] for r in done), [r["process_s"] for r in done])
    med = {k: statistics.median(cpus) if cpus else None for k, (_, cpus, _) in rows.items()}
    order = lambda t: PROCESS_TOOLS.index(t) if t in PROCESS_TOOLS else PROCESS_FORMS.index(t.split(" ", 1)[1]) + 0.5
    for (tool, n) in sorted(rows, key=lambda k: (k[1], order(k[0]))):
        rs, cpus, walls = rows[(tool, n)]
        cpu, peer = med[(tool, n)], med.get((PROCESS_PEER, n))
        L.append(f"| {tool} | {n:,} | {len(cpus)}/{len(rs)} | "
                 + (f"{cpu:.2f} s ({cpus[0]:.2f}–{cpus[-1]:.2f})" if cpu else "–")
                 + f" | {_fmt(statistics.median(walls) if walls else None, 's', 2)} | "
                 + (_fmt(cpu / peer, "", 2) if cpu and peer else "–") + " |")
    L.append("")
    for (tool, n) in sorted(k for k in rows if k[0] in PROCESS_TOOLS[:2]):
        cpu, peer = med[(tool, n)], med.get((PROCESS_PEER, n))
        ratio = cpu / peer if cpu and peer else None
        L.append(target(f"process N={n:,}: {tool} CPU start-up to exit " + (
            f"{cpu:.2f} s = {_x(ratio, 0.6)} × {PROCESS_PEER}'s {peer:.2f} s (target ≤ 0.6)" if ratio is not None
            else "? (no figure for it or for python3-dbus)"), ratio is not None and ratio <= 0.6))
    return L


BREAKDOWN_TOOLS = (("bluectl read", "bluectl"), ("busctl call", "busctl"), ("C libdbus (readvalue.c)", "C client"))


def read_breakdown_report(bd, untraced=None):
    """The stages of a one-shot read under strace (lab-guest.py read_breakdown), medians."""
    if not bd:
        return []
    L = ["", f"Where a one-shot read's time goes: {bd['runs']} runs of each under strace -f "
         f"({'only the marker syscalls stop the process: --seccomp-bpf' if bd.get('seccomp_bpf') else 'every syscall stops it'}; "
         "the tools interleaved, after a warm-up), split by syscalls and the D-Bus messages they carry; median ms "
         "per stage (a tool that does not pass a marker has its stage merged into the next):", ""]
    tools = [(name, short, [r for r in bd["tools"].get(name, []) if "error" not in r]) for name, short in BREAKDOWN_TOOLS
             if name in bd["tools"]]
    L.append("| stage | " + " | ".join(short for _, short, _ in tools) + " |")
    L.append("|---|" + "---|" * len(tools))

    def med(rs, key):
        xs = [r[key] for r in rs if r.get(key) is not None]
        return statistics.median(xs) * 1000 if xs else None
    for key, what in bd["stages"]:
        L.append(f"| {what} | " + " | ".join(_fmt(med(rs, key), "", 1) for _, _, rs in tools) + " |")
    L.append("| **execve → socket() (start-up and parsing, together)** | " + " | ".join(
        _fmt(statistics.median([((r["start"] or 0) + r["parse"]) * 1000 for r in rs]) if rs else None, "", 1)
        for _, _, rs in tools) + " |")
    L.append("| **to the value, traced** | " + " | ".join(_fmt(med(rs, "to_value"), "", 1) for _, _, rs in tools) + " |")
    if untraced:
        L.append("| (to the value untraced: the table above) | " + " | ".join(
            _fmt(untraced[name]["val"] * 1000 if untraced.get(name) and untraced[name]["val"] else None, "", 1)
            for name, _, _ in tools) + " |")
    errors = {short: len(bd["tools"].get(name, [])) - len(rs) for name, short, rs in tools}
    if any(errors.values()):
        L.append("")
        L.append("Runs without every marker (left out): " + ", ".join(f"{k} {v}" for k, v in errors.items() if v))
    L.append("| (bus connection: socket() → Hello sent: connect, auth) | "
             + " | ".join(_fmt(med(rs, "auth"), "", 1) for _, _, rs in tools) + " |")
    b = dict((short, rs) for _, short, rs in tools).get("bluectl")
    if b:
        calls = b[0].get("calls", [])
        L.append("")
        L.append(f"bluectl's bus connection, split: connect + auth {_fmt(med(b, 'auth'), 'ms', 1)}, Hello → the "
                 f"first match rule {_fmt(med(b, 'hello'), 'ms', 1)}, match rules and name-owner look-up → "
                 f"GetManagedObjects {_fmt(med(b, 'matches'), 'ms', 1)}; its calls in order (first run, ms after "
                 "execve): " + ", ".join(f"{m} {ts * 1000:.0f}" for ts, m in calls))
    return L


def devices_report(dv):
    """Two peripherals at once (lab-guest.py bench_devices): the table and the targets."""
    if not dv:
        return []
    L = [""]
    if dv.get("error"):
        return L + [target(f"devices: not measured ({dv['error']})", False)]
    n, addrs = dv["n"], dv.get("addresses", {})
    L.append(f"Two devices at once: hci0 ({addrs.get('hci0')}, bluetoothd's GATT server) and hci2 "
             f"({addrs.get('hci2')}, periph.py's ATT server) each stream {n:,} numbered values paced at one per "
             f"{dv['ms']} ms; {dv['reps']} rounds of: bluectl on each alone, bluectl on both in one process "
             f"(`subscribe A,B --json`), python3-dbus with one StartNotify consumer process per device, both at once. "
             f"Rate per device between its first and last value as the harness sees them arrive (polled every "
             f"20 ms, alike for every tool); CPU of the consumer process(es) from the trigger to their exit:")
    _table_head(L, ["run", "device", "runs", "received (worst)", "lost (all runs)", "out of order",
                    "rate median (min–max)", "CPU/value (all its processes)"])
    groups = _group(dv["runs"], lambda r: (r["tool"], tuple(r["devices"])))
    summary = {}
    for (tool, keys), runs in groups.items():
        good = [r for r in runs if "error" not in r]
        cpus = [r["cpu_per_value_us"] for r in good if r.get("cpu_per_value_us")]
        cpu = statistics.median(cpus) if cpus else None
        label = f"{tool}, {' + '.join(keys)}" + (" at once" if len(keys) > 1 else " alone")
        for i, k in enumerate(keys):
            per = [r["per_device"][k] for r in good]
            rates = [d["rate"] for d in per if d.get("rate")]
            lost = sum(d["missing"] + d["corrupt"] for d in per) + n * (len(runs) - len(good))
            ooo = sum(d["out_of_order"] for d in per)
            worst = min((d["valid"] for d in per), default=0)
            s = summary[(tool, keys, k)] = {"rate": statistics.median(rates) if rates else None, "lost": lost,
                                            "ooo": ooo, "cpu": cpu, "runs": len(runs)}
            errs = "; ".join(r["error"] for r in runs if "error" in r)
            L.append(f"| {label if i == 0 else ''} | {k} | {len(runs)} | {worst:,}/{n:,} | {lost} | {ooo} | "
                     + (f"{s['rate']:,.0f}/s ({min(rates):,.0f}–{max(rates):,.0f})" if rates else "–")
                     + f" | {_fmt(cpu, 'µs', 0) if i == 0 else ''} |" + (f" {errs}" if errs and i == 0 else ""))
    L.append("")
    bl, py = "bluectl subscribe --json", "python3-dbus StartNotify"
    both = ("hci0", "hci2")
    for k in both:
        b, p = summary.get((bl, both, k)), summary.get((py, both, k))
        rr = b["rate"] / p["rate"] if b and p and b["rate"] and p["rate"] else None
        L.append(target(f"devices N={n:,}: {k} with both streaming: bluectl " + (
            f"{b['rate']:,.0f}/s = {_x(rr, 0.95)} × python3-dbus's {p['rate']:,.0f}/s (one process per device; "
            f"target ≥ 0.95)" if rr is not None else "rate ? (no figure for bluectl or python3-dbus)"),
            rr is not None and rr >= 0.95))
        if b and (b["lost"] or b["ooo"]):
            own = sum(r.get("dropped_by_consumer", 0) for r in groups.get((bl, both), []))
            L.append(target(f"devices N={n:,}: {k} with both streaming: bluectl lost {b['lost']}, {b['ooo']} out of "
                            f"order (it reported dropping {own} itself; target: 0)", False))
    one = [summary.get((bl, (k,), k), {}).get("cpu") for k in both]
    two = summary.get((bl, both, "hci0"), {}).get("cpu")
    mean = sum(one) / 2 if all(one) else None
    ratio = two / mean if two and mean else None
    L.append(target(f"devices N={n:,}: bluectl CPU/value with two devices " + (
        f"{two / 1000:.2f} ms = {_x(ratio, 1)} × with one ({mean / 1000:.2f} ms: the mean of hci0 alone "
        f"{one[0] / 1000:.2f} ms and hci2 alone {one[1] / 1000:.2f} ms; target ≤ 1.00)" if ratio is not None
        else "? (no figure with one or with two devices)"), ratio is not None and ratio <= 1))
    return L


for item in WHAT:
    print(f"\n## {item}\n")
    if item == "lab":
        e = os.environ
        lab(reads=int(e.get("BENCH_READS", "12")), notify=e.get("BENCH_NOTIFY", "3000"),
            reps=int(e.get("BENCH_REPS", "3")), big=int(e.get("BENCH_BIG", "10000")), only=e.get("BENCH_ONLY", ""))
    elif item == "micro":
        micro(only=os.environ.get("BENCH_MICRO", ""))
    elif item == "gateway":
        import gateway  # Scripts/bench.d/gateway.py: issue 27's comparison with Theengs Gateway
        gateway.run(target, _x)
    elif item == "proxy":
        import proxy  # Scripts/bench.d/proxy.py: issue 28's advertisement forwarding through bluectl proxy
        proxy.run(target, _x)
    else:
        {"startup": startup, "scan": scan, "code": code}[item]()
if FAILED_TARGETS:
    print("\nbench: targets missed:", file=sys.stderr)
    for t in FAILED_TARGETS:
        print(f"  - {t}", file=sys.stderr)
    sys.exit(1)
