#!/usr/bin/env python3
"""Checks the output of `aftp send --json`, `aftp get --json` or `aftp recv --json` against
its schema (cli/JSON.md).

Usage: json_check.py [--recv] OUTPUT EXIT_STATUS [ERROR_NAME]
Every line must be one JSON object of schema version 1, with its "time"
and the fields its type requires (aftp send's, or with --recv aftp
recv's), of their types;
the objects must come in the documented order (start first, per file
file_start (send), progress..., done, and a "file" object per entry that
ended (send); an error object exactly when the run failed; the summary
last, with the send's figures once it ran), and the exit status in the error and summary
objects must be the process's. With ERROR_NAME, the error object must
carry that aftp_error name. Prints what is wrong and exits 1, else exits 0.
"""
import json
import re
import sys

NUMBER = (int, float)
NULLABLE_NUMBER = (int, float, type(None))
NULLABLE_STRING = (str, type(None))
# The fields each object type must have, and their types (cli/JSON.md):
# the objects both programs write, then each one's own.
COMMON = {
    "progress": {"index": int, "name": str, "size": int, "bytes_done": int,
                 "seconds": NUMBER, "goodput_bps": NUMBER, "eta_seconds": NULLABLE_NUMBER,
                 "rate_bps": int, "loss": NUMBER, "rtt_ms": NUMBER, "min_rtt_ms": NUMBER,
                 "queue_ms": NUMBER},
    "error": {"code": int, "name": NULLABLE_STRING, "message": str, "exit": int},
    "summary": {"ok": bool, "exit": int, "files": int, "delivered": int, "bytes": int,
                "seconds": NUMBER},
}
SEND = dict(COMMON, **{
    "start": {"program": str, "version": str, "peer": str, "files": list},
    "file_start": {"index": int, "source": str, "name": str, "size": int},
    "done": {"index": int, "source": str, "name": str, "size": int, "bytes": int,
             "seconds": NUMBER, "goodput_bps": NUMBER, "digest_algorithm": str,
             "digest": str, "retransmitted": NUMBER, "cipher": str, "rate_cap_bps": int},
    "file": {"result": str, "kind": str, "index": int, "source": str, "path": str,
             "name": str, "size": int, "bytes": int, "resumed_bytes": int, "seconds": NUMBER},
})
# aftp send's summary: the send's figures, once the send ran.
SEND_SUMMARY = {"entries": int, "sent": int, "resumed": int, "skipped": int, "failed": int,
                "dirs": int, "links": int, "skipped_locally": int, "file_bytes": int,
                "bytes_sent": int, "resumed_bytes": int, "skipped_bytes": int,
                "send_seconds": NUMBER, "retransmitted": NUMBER}
RESULTS = {"sent", "resumed", "skipped", "failed"}
KINDS = {"file", "dir", "symlink"}
RECV = dict(COMMON, **{
    "start": {"program": str, "version": str, "listen": str, "server_key": NULLABLE_STRING,
              "fingerprint": NULLABLE_STRING},
    "done": {"index": int, "name": str, "path": str, "root": str, "size": int, "bytes": int,
             "seconds": NUMBER, "session_seconds": NUMBER, "goodput_bps": NUMBER,
             "digest_algorithm": str, "digest": str, "duplicate": NUMBER, "cipher": str,
             "rate_cap_bps": int,
             "client": str, "client_key": NULLABLE_STRING, "client_comment": str},
    "session_error": {"code": int, "name": NULLABLE_STRING, "message": str},
    "notice": {"kind": str, "message": str},
})
PROGRAMS = {"aftp send": SEND, "aftp get": SEND, "aftp recv": RECV}  # get: send's objects (JSON.md)
NOTICE_KINDS = {"warning", "hello_dropped", "rate_cap", "partial_swept", "reloaded",
                "session_started", "session_ended", "draining"}
# Every object's "time": when it was written, ISO 8601 in UTC to the ms.
TIME = re.compile(r"\d{4}-[01]\d-[0-3]\dT[0-2]\d:[0-5]\d:[0-6]\d\.\d{3}Z")
CIPHERS = {"aes-256-gcm", "chacha20-poly1305", "unencrypted"}


class Bad(Exception):
    pass


def check_fields(n, obj, schema):
    kind = obj.get("type")
    if obj.get("v") != 1 or kind not in schema:
        raise Bad(f"line {n}: not a version 1 object of a known type: {obj}")
    if not isinstance(obj.get("time"), str) or not TIME.fullmatch(obj["time"]):
        raise Bad(f"line {n}: time {obj.get('time')!r} is not YYYY-MM-DDTHH:MM:SS.mmmZ")
    for field, types in schema[kind].items():
        if field not in obj:
            raise Bad(f"line {n}: {kind} lacks '{field}'")
        value = obj[field]
        # bool is an int in Python: a count must not be true or false
        if not isinstance(value, types) or (types is not bool and isinstance(value, bool)):
            raise Bad(f"line {n}: {kind}.{field} is {value!r}, not {types}")


def check_values(n, obj):
    kind = obj["type"]
    if kind == "progress" and not 0 <= obj["bytes_done"] <= obj["size"]:
        raise Bad(f"line {n}: bytes_done {obj['bytes_done']} outside 0..{obj['size']}")
    if kind == "progress" and not 0 <= obj["loss"] <= 1:
        raise Bad(f"line {n}: loss {obj['loss']} outside 0..1")
    if kind == "done":
        digest = obj["digest"]
        if len(digest) != 32 or any(c not in "0123456789abcdef" for c in digest):
            raise Bad(f"line {n}: digest {digest!r} is not 32 hex digits")
        if obj["cipher"] not in CIPHERS or obj["bytes"] != obj["size"]:
            raise Bad(f"line {n}: done with cipher {obj['cipher']!r}, bytes {obj['bytes']}")
    if kind in ("error", "session_error"):
        if obj["code"] >= 0 or not obj["message"] or not obj["name"].startswith("AFTP_ERR_"):
            raise Bad(f"line {n}: error object without a failure: {obj}")
    if kind == "notice" and (obj["kind"] not in NOTICE_KINDS or not obj["message"]):
        raise Bad(f"line {n}: notice of an unknown kind or empty: {obj}")
    if kind == "start" and obj["program"] not in PROGRAMS:
        raise Bad(f"line {n}: start of an unknown program: {obj}")
    if kind == "file":
        if obj["result"] not in RESULTS or obj["kind"] not in KINDS:
            raise Bad(f"line {n}: file of an unknown result or kind: {obj}")
        failed = obj["result"] == "failed"
        if failed != ("error" in obj) or (failed and not obj.get("message")):
            raise Bad(f"line {n}: a failed file needs error and message, no other: {obj}")
        if obj["bytes"] + obj["resumed_bytes"] > obj["size"]:
            raise Bad(f"line {n}: bytes and resumed_bytes beyond the size: {obj}")
    if kind == "summary" and "entries" in obj:
        for field, types in SEND_SUMMARY.items():
            if not isinstance(obj.get(field), types) or isinstance(obj.get(field), bool):
                raise Bad(f"line {n}: summary.{field} is {obj.get(field)!r}, not {types}")


def check_order(objs, exit_status, error_name):
    kinds = [o["type"] for o in objs]
    if not kinds or kinds[-1] != "summary" or kinds.count("summary") != 1:
        raise Bad(f"the summary must be the one last object: {kinds}")
    summary = objs[-1]
    if summary["exit"] != exit_status or summary["ok"] != (exit_status == 0):
        raise Bad(f"summary says exit {summary['exit']} ok {summary['ok']}, status {exit_status}")
    errors = [o for o in objs if o["type"] == "error"]
    if (exit_status != 0) != (len(errors) == 1) or len(errors) > 1:
        raise Bad(f"{len(errors)} error objects for exit status {exit_status}")
    if errors and (kinds[-2] != "error" or errors[0]["exit"] != exit_status):
        raise Bad(f"the error object must precede the summary, exit {exit_status}: {errors[0]}")
    if error_name is not None and (not errors or errors[0]["name"] != error_name):
        raise Bad(f"expected error {error_name}, got {errors}")
    if "start" in kinds and kinds[0] != "start":
        raise Bad(f"start is not first: {kinds}")
    done = sum(k == "done" for k in kinds)
    # a send's summary counts its files (a tree's may be more than its
    # SRC arguments, "files"); without it, each SRC is one file
    whole = summary["sent"] + summary["resumed"] if "entries" in summary else summary["files"]
    if done != summary["delivered"] or (exit_status == 0 and done != whole):
        raise Bad(f"{done} done objects, summary says {summary['delivered']} delivered")
    files = [o for o in objs if o["type"] == "file"]
    if "entries" in summary and len(files) != summary["entries"]:
        raise Bad(f"{len(files)} file objects, summary says {summary['entries']} entries")
    if exit_status == 0 and any(o["result"] == "failed" for o in files):
        raise Bad("a failed file in a run that succeeded")
    last = -1
    for o in objs:  # a file's progress never goes back
        if o["type"] == "file_start":
            last = -1
        elif o["type"] == "progress":
            if o["bytes_done"] < last:
                raise Bad(f"progress goes back: {o['bytes_done']} after {last}")
            last = o["bytes_done"]


def main():
    args = sys.argv[1:]
    schema = SEND
    if args and args[0] == "--recv":
        schema = RECV
        args = args[1:]
    path, exit_status = args[0], int(args[1])
    error_name = args[2] if len(args) > 2 else None
    objs = []
    try:
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                try:
                    obj = json.loads(line)
                except ValueError as e:
                    raise Bad(f"line {n} is not JSON ({e}): {line!r}")
                if not isinstance(obj, dict):
                    raise Bad(f"line {n} is not an object: {line!r}")
                check_fields(n, obj, schema)
                if obj["type"] == "start" and PROGRAMS.get(obj["program"]) is not schema:
                    raise Bad(f"line {n}: start of {obj['program']}, not the program checked")
                check_values(n, obj)
                objs.append(obj)
        check_order(objs, exit_status, error_name)
    except (Bad, UnicodeDecodeError) as e:
        print(f"{path}: {e}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
