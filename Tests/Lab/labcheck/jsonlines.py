"""Assertions over a command's JSON-lines output (what jcheck.py did for the
bash tier): parse the lines, find one, compare fields."""
import json
import re


class CheckFailed(Exception):
    """A check's assertion failed: the message is the FAIL line's reason."""


def check(cond, msg):
    """Fail the check with msg unless cond."""
    if not cond:
        raise CheckFailed(msg)


def parse(text):
    """Every non-empty line parsed as JSON; a line that is not JSON fails,
    naming it."""
    lines = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            lines.append(json.loads(line))
        except ValueError:
            raise CheckFailed('stdout line %d is not JSON: %.120s' % (n, line))
    return lines


def one(lines, pred, what):
    """The first line with pred(line) true (a line of another shape does not
    match), else fail."""
    for l in lines:
        try:
            if pred(l):
                return l
        except (KeyError, TypeError, AttributeError):
            pass
    raise CheckFailed('no output line with %s (%d lines)' % (what, len(lines)))


def u16(x):
    """'2a19' -> '00002a19-0000-1000-8000-00805f9b34fb'"""
    return '0000%s-0000-1000-8000-00805f9b34fb' % x.lower()


def is_hex(s, nbytes=None):
    """A lowercase hex string (of nbytes bytes)."""
    return isinstance(s, str) and re.fullmatch(r'(?:[0-9a-f]{2})*', s) is not None \
        and (nbytes is None or len(s) == 2 * nbytes)


def fields(l, **want):
    """Line l has these values (booleans: exactly true/false; other values
    equal and not a boolean)."""
    return isinstance(l, dict) and all(
        (l.get(k) is v) if isinstance(v, bool) else (l.get(k) == v and not isinstance(l.get(k), bool))
        for k, v in want.items())


def seq_of(value_hex):
    """The lab stream's sequence number: the value's first 4 bytes, LE."""
    return int.from_bytes(bytes.fromhex(value_hex)[:4], 'little')


def stream_value_ok(value_hex):
    """A lab stream value: 20 bytes, seq then (seq + i) & 0xff for i = 4..19."""
    v = bytes.fromhex(value_hex)
    s = int.from_bytes(v[:4], 'little')
    return len(v) == 20 and v[4:] == bytes((s + i) & 0xff for i in range(4, 20))
