#!/usr/bin/python3 -I
"""Run a command, send it a signal after a delay, report its status the way a
shell would (128+N when the signal killed it). The child starts with default
SIGINT/SIGTERM handling (a non-interactive shell's background job would
inherit SIGINT ignored).

usage: sigrun.py INT|TERM DELAY GRACE STDOUT STDERR CMD [ARGS...]
Exit: the child's status; 124 if it was still running GRACE s after the signal
(then it is killed)."""
import signal
import subprocess
import sys


def main(a):
    sig = getattr(signal, 'SIG' + a[0])
    delay, grace = float(a[1]), float(a[2])

    def pre():
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    with open(a[3], 'wb') as out, open(a[4], 'wb') as err:
        p = subprocess.Popen(a[5:], stdin=subprocess.DEVNULL, stdout=out, stderr=err, preexec_fn=pre)
        try:
            rc = p.wait(delay)
            print('exited before the signal', file=sys.stderr)
        except subprocess.TimeoutExpired:
            p.send_signal(sig)
            try:
                rc = p.wait(grace)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
                return 124
    return 128 - rc if rc < 0 else rc


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
