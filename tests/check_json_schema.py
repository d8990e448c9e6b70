#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Validate JSON texts against a JSON Schema, independently of Fucina.

    python3 tests/check_json_schema.py SCHEMA SAMPLES   # one JSON text a line
    python3 tests/check_json_schema.py --check          # is the validator here?

Uses the `jsonschema` module (Debian: python3-jsonschema) with format
checking for date, time, date-time and uuid. Some builds of jsonschema check
'time' and 'date-time' only when the optional rfc3339-validator module is
installed (Debian's lacks it); then this script registers its own strict
RFC 3339 checkers for them (a regular expression plus the calendar, via
datetime) and says so on stderr, so that those formats are never silently
unchecked. A line that is not JSON, or holds an object with a repeated key,
is a failure too.

Prints each failure; exit 0 only if every sample is valid, 1 if one is not,
2 on bad usage or an unreadable file, 77 (with a message) when the
jsonschema module is missing: the C test then skips, which is not a pass.
"""
import datetime
import json
import re
import sys

FORMATS = ("date", "time", "date-time", "uuid")

_TIME = re.compile(r"^([01][0-9]|2[0-3]):([0-5][0-9]):([0-5][0-9]|60)(\.[0-9]+)?"
                   r"([zZ]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$")


def _is_time(s):
    if not isinstance(s, str):
        return True
    m = _TIME.match(s)
    return bool(m) and (m.group(3) != "60" or (m.group(1) == "23" and m.group(2) == "59"))


def _is_date_time(s):
    if not isinstance(s, str):
        return True
    if len(s) < 11 or s[10] not in "Tt":
        return False
    day, t = s[:10], s[11:]
    if not re.match(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$", day):
        return False
    try:
        datetime.date.fromisoformat(day)
    except ValueError:
        return False
    return _is_time(t)


def _checker(jsonschema, validator_class):
    checker = getattr(validator_class, "FORMAT_CHECKER", None) or jsonschema.FormatChecker()
    own = []
    for name, fn in (("time", _is_time), ("date-time", _is_date_time)):
        if name not in checker.checkers:
            checker.checks(name)(fn)
            own.append(name)
    missing = [f for f in FORMATS if f not in checker.checkers]
    return checker, own, missing


def _no_duplicates(pairs):
    keys = [k for k, _ in pairs]
    if len(keys) != len(set(keys)):
        raise ValueError("repeated key in an object: %r" % keys)
    return dict(pairs)


def main(argv):
    try:
        import jsonschema
    except ImportError as e:
        print("the Python module jsonschema is missing (apt-get install python3-jsonschema): %s" % e)
        return 77
    validator_class = getattr(jsonschema, "Draft202012Validator", None)
    if validator_class is None:
        print("this jsonschema has no Draft 2020-12 validator (version too old)")
        return 77
    checker, own, missing = _checker(jsonschema, validator_class)
    if missing:
        print("jsonschema cannot check the formats %s" % ", ".join(missing))
        return 77
    if len(argv) == 2 and argv[1] == "--check":
        print("ok" + (" (own RFC 3339 checkers for %s)" % ", ".join(own) if own else ""))
        return 0
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[2])
        return 2
    if own:
        sys.stderr.write("check_json_schema: jsonschema lacks %s checkers; using this script's own\n" % ", ".join(own))
    try:
        with open(argv[1], encoding="utf-8") as f:
            schema = json.load(f)
        with open(argv[2], encoding="utf-8") as f:
            lines = f.read().split("\n")
    except (OSError, ValueError) as e:
        print("cannot read: %s" % e)
        return 2
    if lines and lines[-1] == "":
        lines.pop()
    validator_class.check_schema(schema)
    v = validator_class(schema, format_checker=checker)
    bad = 0
    for i, line in enumerate(lines, 1):
        try:
            inst = json.loads(line, object_pairs_hook=_no_duplicates)
        except ValueError as e:
            print("line %d: not JSON (%s): %s" % (i, e, line))
            bad += 1
            continue
        errors = sorted(v.iter_errors(inst), key=lambda e: list(e.path))
        if errors:
            bad += 1
            print("line %d: %s: %s" % (i, "; ".join(e.message for e in errors[:3]), line))
    print("%d of %d valid" % (len(lines) - bad, len(lines)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
