#!/usr/bin/python3
'''compare.py REFERENCE.json CANDIDATE.json: exits 0 when the two scenario
records (scenario.py) agree, else 1, naming each difference by its key path.
Records hold no addresses, object paths or payloads, so everything in them
is compared exactly.'''
import json
import sys


def diff(a, b, at, out):
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            key = f'{at}.{k}' if at else k
            if k not in a:
                out.append(f'{key}: only in the candidate ({json.dumps(b[k])})')
            elif k not in b:
                out.append(f'{key}: missing from the candidate (reference {json.dumps(a[k])})')
            else:
                diff(a[k], b[k], key, out)
    elif a != b:
        out.append(f'{at}: reference {json.dumps(a)}, candidate {json.dumps(b)}')


def main():
    if len(sys.argv) != 3:
        sys.exit('usage: compare.py REFERENCE.json CANDIDATE.json')
    ref, cand = (json.load(open(p)) for p in sys.argv[1:3])
    out = []
    diff(ref, cand, '', out)
    for line in out:
        print('DIFFERENT', line)
    print(f'{len(out)} difference(s)' if out else 'records agree')
    return 1 if out else 0


if __name__ == '__main__':
    sys.exit(main())
