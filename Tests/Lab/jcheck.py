#!/usr/bin/python3 -I
"""Assertions over a command's JSON-lines output, for Tests/Lab/lib.sh.

usage: jcheck.py FILE CODE

CODE is Python, run with:
  lines   every non-empty line of FILE parsed as JSON (a line that is not
          JSON fails the check, naming the line)
  text    FILE's whole text
  env     os.environ; CENTRAL, CENTRAL_ADDR, PERIPH_ADDR, ... also as names
  check(cond, msg)            fail with msg unless cond
  one(pred, what)             the first line with pred(line) true, else fail
  u16(x)                      '2a19' -> '00002a19-0000-1000-8000-00805f9b34fb'
  is_hex(s, nbytes=None)      lowercase hex string (of nbytes bytes)
  fields(l, k=v, ...)         line l has these values (booleans: exactly true/false)
  say(*a)                     print to the check's log
Exit 0 when CODE completes, 1 with the message on stderr otherwise.
"""
import json
import os
import re
import sys


class CheckFailed(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise CheckFailed(msg)


def u16(x):
    return '0000%s-0000-1000-8000-00805f9b34fb' % x.lower()


def is_hex(s, nbytes=None):
    return isinstance(s, str) and re.fullmatch(r'(?:[0-9a-f]{2})*', s) is not None \
        and (nbytes is None or len(s) == 2 * nbytes)


def fields(l, **want):
    return isinstance(l, dict) and all(
        (l.get(k) is v) if isinstance(v, bool) else (l.get(k) == v and not isinstance(l.get(k), bool))
        for k, v in want.items())


def main():
    path, code = sys.argv[1], sys.argv[2]
    try:
        text = open(path, encoding='utf-8', errors='replace').read()
    except OSError as e:
        print('cannot read output: %s' % e, file=sys.stderr)
        return 1
    lines = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            lines.append(json.loads(line))
        except ValueError:
            print('stdout line %d is not JSON: %.120s' % (n, line), file=sys.stderr)
            return 1

    def one(pred, what):
        for l in lines:
            try:
                if pred(l):
                    return l
            except (KeyError, TypeError, AttributeError):
                pass
        raise CheckFailed('no output line with %s (%d lines)' % (what, len(lines)))

    g = dict(os.environ)
    g.update(lines=lines, text=text, env=os.environ, check=check, one=one, u16=u16,
             is_hex=is_hex, fields=fields, json=json, re=re, say=print)
    try:
        exec(compile(code, '<check>', 'exec'), g)
    except CheckFailed as e:
        print(str(e), file=sys.stderr)
        return 1
    except Exception as e:  # a bug in the check itself, or an unexpected shape
        print('%s: %s' % (type(e).__name__, e), file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
