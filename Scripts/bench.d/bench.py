#!/usr/bin/python3
"""bluectl benchmarks (see Scripts/bench). Prints figures; asserts nothing timed."""
import os, resource, signal, statistics, subprocess, sys, tempfile, time

BIN = sys.argv[1]
WHAT = " ".join(sys.argv[2:]).split()
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(REPO, "Tests", "BusTierTests", "Fixtures")


def run_timed(args, env=None):
    """Wall seconds and peak RSS (KiB) of one child."""
    start = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.execve(args[0], args, env or os.environ)
    _, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"bench: {' '.join(args)} failed")
    return wall, usage.ru_maxrss


def startup():
    rows = []
    for args in (["--version"], ["--help"]):
        samples = [run_timed([BIN] + args) for _ in range(30)]
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


def peak_rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def scan(devices=10_000, updates=100_000):
    bus = PrivateBus()
    try:
        bus.mock("AddAdapter", "sssb", "hci0", "00:AA:01:00:00:01", "bench", "true")
        out_path = os.path.join(bus.dir, "scan.jsonl")
        with open(out_path, "w") as out:
            scan = subprocess.Popen([BIN, "scan", "--json", "--duplicates", "--adapter", "hci0"],
                                    env=bus.env, stdout=out, stderr=subprocess.PIPE)
        bus._wait(lambda: "true" in bus.busctl("get-property", "org.bluez", "/org/bluez/hci0", "org.bluez.Adapter1",
                                                 "Discovering").stdout, "Discovering")
        cpu0 = _cpu(scan.pid)
        start = time.perf_counter()
        bus.mock("EmitAdvertisementBurst", "suu", "hci0", devices, updates)
        emitted = time.perf_counter() - start
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
        elapsed = last_change - start
        cpu = _cpu(scan.pid) - cpu0
        rss = peak_rss_kib(scan.pid)
        scan.send_signal(signal.SIGINT)
        rc = scan.wait(timeout=10)
        print("| events | received | stand-in emit time | bluectl done after | events/s | bluectl CPU | peak RSS | exit |")
        print("|---|---|---|---|---|---|---|---|")
        print(f"| {expected:,} | {last_count:,} | {emitted:.2f} s | {elapsed:.2f} s | {last_count / elapsed:,.0f} | "
              f"{cpu:.2f} s | {rss / 1024:.1f} MB | {rc} |")
        if last_count != expected:
            print(f"bench: {expected - last_count} events missing", file=sys.stderr)
            sys.exit(1)
    finally:
        bus.close()


def _lines(path):
    with open(path, "rb") as f:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))


def _cpu(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


for item in WHAT:
    print(f"\n## {item}\n")
    {"startup": startup, "scan": scan}[item]()
