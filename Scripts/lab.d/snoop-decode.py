#!/usr/bin/python3 -I
"""Decode a btsnoop file with `btmon -T -r`, surviving btmon's crashes.

btmon 5.66 dies (NULL call, SIGSEGV) on some BlueZ-to-BlueZ ATT frames (seen:
Read By Type Request for 0x2803, i.e. characteristic discovery). When
it does, the frame it was printing is skipped and decoding resumes from the
next frame in a fresh btmon (which then lacks the earlier connection
context, so some ATT names may be missing after that point). btmon runs with
line-buffered output (stdbuf -oL) so that its text reaches the crash.

usage: snoop-decode.py SNOOP > TEXT
"""
import datetime
import os
import re
import struct
import subprocess
import sys
import tempfile

EPOCH_DELTA = 0x00E03AB44A676000
Y2K = 946684800
HEADER_RE = re.compile(rb'^[<>@=] .*?(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6})\s*$')


def records(data):
    out, off = [], 16
    while off + 24 <= len(data):
        orig, incl, flags, drops, ts = struct.unpack('>IIIIq', data[off:off + 24])
        out.append((ts, data[off:off + 24 + incl]))
        off += 24 + incl
    return out


def epoch_us(ts):
    return ts - EPOCH_DELTA + Y2K * 1000000


def main(path):
    data = open(path, 'rb').read()
    if len(data) < 16 or not data.startswith(b'btsnoop\0'):
        print('snoop-decode: not a btsnoop file: %s' % path, file=sys.stderr)
        return 1
    header, recs = data[:16], records(data)
    start, crashes = 0, 0
    out = sys.stdout.buffer
    with tempfile.TemporaryDirectory() as tmp:
        seg = os.path.join(tmp, 'seg.snoop')
        while start < len(recs):
            with open(seg, 'wb') as f:
                f.write(header)
                for _, raw in recs[start:]:
                    f.write(raw)
            p = subprocess.run(['stdbuf', '-oL', 'btmon', '-T', '-r', seg], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL, timeout=300)
            text = p.stdout
            if p.returncode == 0:
                out.write(text)
                break
            crashes += 1
            lines = text.split(b'\n')
            last = None
            for n in range(len(lines) - 1, -1, -1):
                m = HEADER_RE.match(lines[n])
                if m:
                    last = n
                    break
            if last is None or crashes > 500:
                out.write(text)
                out.write(b'\n[snoop-decode: btmon failed (status %d); giving up]\n' % p.returncode)
                break
            stamp = HEADER_RE.match(lines[last]).group(1).decode()
            dt = datetime.datetime.strptime(stamp, '%Y-%m-%d %H:%M:%S.%f')
            want = int(dt.timestamp()) * 1000000 + dt.microsecond
            k = next((i for i in range(start, len(recs)) if epoch_us(recs[i][0]) == want), None)
            out.write(b'\n'.join(lines[:last]) + b'\n')
            if k is None:
                out.write(b'[snoop-decode: btmon crashed (status %d) and its frame was not found; giving up]\n'
                          % p.returncode)
                break
            out.write(lines[last] + b'\n')
            out.write(b'        [snoop-decode: btmon crashed (status %d) decoding this frame; skipped, '
                      b'decoding resumes with a fresh btmon]\n' % p.returncode)
            start = k + 1
    out.flush()
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1]))
