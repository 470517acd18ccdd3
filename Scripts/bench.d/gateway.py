"""The host half of `Scripts/bench gateway` (issue 27's item 9): one lab boot
running Scripts/bench.d/gateway-guest.py, which measures `bluectl gateway` and
Theengs Gateway 1.8 side by side (same broker, same advertisers), and the
table of what it measured, with issue 27's targets:
  CPU per advertisement published <= 1/4 of Theengs',
  peak RSS <= 1/2 of Theengs',
  100 % of the readings heard during a broker outage delivered, in order (Theengs' figure recorded).
Theengs Gateway runs from .lab/venv-theengs, made from
Scripts/bench.d/theengs-requirements.txt (pinned)."""
import os
import subprocess

import labrun

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
VENV = os.path.join(REPO, ".lab", "venv-theengs")


def ensure_theengs_venv():
    """.lab/venv-theengs with Theengs Gateway and its pinned dependencies (made once)."""
    py = os.path.join(VENV, "bin", "python")
    req = os.path.join(HERE, "theengs-requirements.txt")
    stamp = os.path.join(VENV, "requirements.txt")
    fresh = os.access(py, os.X_OK) and os.path.exists(stamp) and open(stamp).read() == open(req).read()
    if not fresh:
        subprocess.run(["/usr/bin/python3", "-m", "venv", "--clear", VENV], check=True)
        subprocess.run([py, "-m", "pip", "install", "-q", "--no-deps", "-r", req], check=True)
        subprocess.run([py, "-c", "import TheengsGateway, bleak, paho.mqtt"], check=True)
        with open(stamp, "w") as f:
            f.write(open(req).read())
    return py


def run(target, x):
    """Boots the lab once, prints the table; `target(line, ok)` records a missed target."""
    py = ensure_theengs_venv()
    e = os.environ
    res, out, rc = labrun.boot("gateway", "gateway-guest.py", [
        "--theengs", os.path.relpath(py, REPO), "--advertisers", e.get("BENCH_GW_ADVERTISERS", "3"),
        "--rate", e.get("BENCH_GW_RATE", "10"), "--window", e.get("BENCH_GW_WINDOW", "60"),
        "--outage", e.get("BENCH_GW_OUTAGE", "60"), "--settle", e.get("BENCH_GW_SETTLE", "60")])
    text = report(res, target, x)
    with open(os.path.join(out, "table.md"), "w") as f:
        f.write(text + "\n")
    print(text)
    if rc != 0:
        target(f"the guest script exited {rc} (see {out}/check.log)", False)


def _ms(v):
    return f"{v:.2f} ms" if v is not None else "?"


def report(res, target, x):
    env = res["env"]
    L = [f"bluectl {env.get('bluectl')} vs Theengs Gateway (TheengsGateway, bleak, TheengsDecoder: "
         f"{env.get('theengs', 'missing')}); {env['advertisers']} advertisers × {env['rate_per_advertiser']:g} "
         f"readings/s; steady window {env['window_s']:g} s, broker outage {env['outage_s']:g} s, "
         f"then {env['settle_s']:g} s", "",
         "| gateway | messages published (window) | readings on air / heard / delivered (window) | CPU/message "
         "| CPU/reading heard | CPU/s | peak RSS | outage: readings on air / heard / delivered | in order | exit |",
         "|---|---|---|---|---|---|---|---|---|---|"]
    runs = {r["tool"]: r for r in res["runs"]}
    for tool, r in runs.items():
        if "error" in r:
            L.append(f"| {tool} | {r['error'][:200]} | | | | | | | | |")
            continue
        L.append(f"| {tool} | {r['messages']:,} | {r['readings_on_air']:,} / {r['readings_heard']:,} / {r['readings_delivered']:,} "
                 f"({100 * r['readings_delivered'] / max(1, r['readings_heard']):.1f} %) | "
                 f"{_ms(r['cpu_ms_per_message'])} | {_ms(r['cpu_ms_per_reading'])} | {_ms(1000 * r['cpu_s'] / r['window_s'])} | "
                 f"{labrun.peak_rss(r)} | {r['outage_on_air']:,} / {r['outage_heard']:,} / {r['outage_delivered']:,} "
                 f"({100 * r['outage_delivered'] / max(1, r['outage_heard']):.1f} % of those heard) | "
                 f"{'yes' if r['outage_in_order'] else 'no'} | {r['exit']} |")
    L.append("")
    sent = "; ".join("%s's run %s in the window, %s in the outage" % (t, r.get("readings_sent", "?"), r.get("outage_sent", "?"))
                     for t, r in runs.items())
    L.append(f"(readings sent: {sent}; on air: in hci1's advertising reports (btmon); heard: in bluetoothd's "
             f"PropertiesChanged for the device, what a BlueZ client can deliver (none while a gateway is not scanning); "
             f"CPU/s: the process's CPU per second of the window, idle costs included; {labrun.PEAK_RSS_NOTE}; "
             f"exit 143 is SIGTERM's, at the end)")
    L.append("")
    b, t = runs.get("bluectl", {}), runs.get("theengs", {})
    ok = "error" not in b and "error" not in t and b and t
    cpu = b["cpu_ms_per_message"] / t["cpu_ms_per_message"] if ok and t.get("cpu_ms_per_message") else None
    L.append(target("gateway: bluectl's CPU per message published " + (
        f"= {x(cpu, 0.25)} × Theengs' (target ≤ 0.25)" if cpu is not None else "? (no figure for one of them)"),
        cpu is not None and cpu <= 0.25))
    rss = b["peak_rss_kib"] / t["peak_rss_kib"] if ok and t.get("peak_rss_kib") else None
    L.append(target("gateway: bluectl's peak RSS " + (
        f"= {x(rss, 0.5)} × Theengs' (target ≤ 0.5)" if rss is not None else "? (no figure for one of them)"),
        rss is not None and rss <= 0.5))
    whole = ok and b["outage_heard"] > 0 and b["outage_delivered"] == b["outage_heard"] and b["outage_in_order"]
    L.append(target("gateway: bluectl delivered " + (
        f"{b['outage_delivered']:,} of the {b['outage_heard']:,} readings heard during the outage"
        f"{', in order' if b['outage_in_order'] else ', NOT in order'} (target: all, in order)" if ok
        else "? (a run failed)"), bool(whole)))
    return "\n".join(L)
