"""The host half of `Scripts/bench proxy` (issue 28, item 7): one lab boot
running Scripts/bench.d/proxy-guest.py (`bluectl proxy` forwarding the
advertisements of `bluectl advertise --bthome` advertisers to aioesphomeapi),
and the table of what it measured. Figures only: the issue sets no target."""
import os

import labrun


def run(target, x):
    e = os.environ
    res, out, rc = labrun.boot("proxy", "proxy-guest.py", [
        "--advertisers", e.get("BENCH_PX_ADVERTISERS", "3"), "--rate", e.get("BENCH_PX_RATE", "10"),
        "--window", e.get("BENCH_PX_WINDOW", "60")], timeout="900")
    text = report(res)
    with open(os.path.join(out, "table.md"), "w") as f:
        f.write(text + "\n")
    print(text)
    if rc != 0 or "error" in res["run"]:
        target(f"proxy: the guest script exited {rc}: {res['run'].get('error', '')[:300]} (see {out}/check.log)", False)


def report(res):
    env, r = res["env"], res["run"]
    L = [f"bluectl {env['bluectl']} proxy on hci1, aioesphomeapi {env['aioesphomeapi']} on the guest's loopback; "
         f"{env['advertisers']} `bluectl advertise --bthome` advertisers on hci3 × {env['rate_per_advertiser']:g} "
         f"readings/s; window {env['window_s']:g} s", ""]
    if "error" in r:
        return "\n".join(L + [f"failed: {r['error']}"])
    lat = r["latency_ms"] or {}
    L += ["| advertisements forwarded | per second | of the advertisers' device | CPU/advertisement | CPU/s "
          "| readings sent / signalled by bluetoothd / reaching the client | signal → callback: median | p90 | min–max "
          "| peak RSS | exit |",
          "|---|---|---|---|---|---|---|---|---|---|---|",
          f"| {r['forwarded']:,} | {r['per_s']:.1f} | {r['forwarded_server']:,} | "
          f"{r['cpu_ms_per_advertisement']:.3f} ms | {1000 * r['cpu_s'] / r['window_s']:.1f} ms | "
          f"{r['readings_sent']:,} / {r['readings_heard']:,} / {r['readings_delivered']:,} | "
          f"{lat.get('median', 0):.1f} ms | {lat.get('p90', 0):.1f} ms | {lat.get('min', 0):.1f}–{lat.get('max', 0):.1f} ms | "
          f"{labrun.peak_rss(r)} | {r['exit']} |", "",
          "(forwarded: every raw advertisement the client's callback got in the window, all devices (the lab's "
          "peripherals advertise too); signalled: the distinct readings in bluetoothd's PropertiesChanged for the "
          "advertisers' device, seen by a python3-dbus listener in the guest; signal → callback: per reading, the "
          "client's callback minus that signal, the first of each, on the guest's clock; the proxy flushes its "
          f"batches every 100 ms as ESPHome does; {labrun.PEAK_RSS_NOTE}; exit 143 is SIGTERM's, at the end)"]
    return "\n".join(L)
