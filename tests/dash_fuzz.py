"""Malformed Dash callback requests — values of the wrong type or size, broken payload structure, junk uploads — for
the HTTP test and the 1,000-request bench (bench/fuzz_dashboard.py). Deterministic for a seed."""

from __future__ import annotations

import base64
import json
import random
from collections.abc import Iterator
from typing import Any

from tests.dash_requests import payload

JUNK: tuple[Any, ...] = (
    None, 0, -1, 1, 2**63, -(2**63), 1e308, -1e308, 0.5, True, False, "", "x", "x" * 5000, "NaN", "Infinity", "-inf",
    "1e400", "../../etc/passwd", "<script>alert(1)</script>", "=cmd|' /C calc'!A0", "model:", "model:nope", "0x0",
    "99999999999999999999999x4096", "\u0000", "日本語", [], [None], [1, 2, 3], ["a"] * 500, [[["deep"]]], {},
    {"a": 1}, {"column_id": 5}, [{"colId": None, "sort": "up"}], [0, 8, 9], [8, 0], ["1", "256"], [-5, 99],
    {"M": {"type": "equals", "filter": {"x": 1}}}, {"M": "x"}, [{"sort": "asc", "sortIndex": "0", "colId": 1}],
)  # fmt: skip
NAMES = (None, 7, "", "a" * 1000, "../../x.csv", ".csv", "x.CSV", "x.parquet", "x.txt", "x.pkl", "x", "x.csv.exe")


def _junk_upload(rng: random.Random) -> tuple[Any, Any]:
    kind = rng.randrange(8)
    if kind == 0:
        raw = rng.randbytes(rng.randrange(1, 4096))
    elif kind == 1:
        raw = b"schema_version,M,N,K\n" + b"\n".join(f"{rng.random()},{rng.random()},x,".encode() for _ in range(50))
    elif kind == 2:
        raw = b"PAR1" + rng.randbytes(256) + b"PAR1"
    elif kind == 3:
        raw = "\n".join(",".join(rng.choice(["=1+1", "nan", "inf", "-0", "", "1e999"]) for _ in range(60))
                        for _ in range(20)).encode()  # fmt: skip
    else:
        raw = b""
    prefix = rng.choice(["data:text/csv;base64,", "data:;base64,", "", "data:text/csv,", "base64,"])
    body = base64.b64encode(raw).decode() if kind != 7 else "@@@not base64@@@"
    contents = rng.choice([prefix + body, None, 5, ["x"], {"a": 1}, prefix])
    return contents, rng.choice(NAMES)


def _mutate_values(spec: dict, values: dict, rng: random.Random) -> dict:
    out = dict(values)
    deps = [(d["id"], d["property"]) for d in spec["inputs"] + spec.get("state", [])]
    for dep in rng.sample(deps, k=min(len(deps), rng.randrange(1, 4))):
        out[dep] = rng.choice(JUNK)
    if ("upload", "contents") in deps:
        out[("upload", "contents")], out[("upload", "filename")] = _junk_upload(rng)
    return out


def _break_structure(body: dict, rng: random.Random) -> Any:
    kind = rng.randrange(7)
    broken = dict(body)
    if kind == 0:
        broken.pop(rng.choice(["inputs", "output", "outputs"]), None)
    elif kind == 1:
        broken["inputs"] = {"not": "a list"}
    elif kind == 2:
        broken["output"] = "no-such-component.figure"
    elif kind == 3:
        broken["inputs"] = broken.get("inputs", [])[:1]
    elif kind == 4:
        broken["changedPropIds"] = [rng.choice(JUNK)]
    elif kind == 5:
        return rng.choice(JUNK)
    else:
        broken["inputs"] = [{"id": 5, "property": None, "value": "x"}]
    return broken


def fuzz_bodies(app: Any, values: dict, n: int, seed: int = 0) -> Iterator[tuple[str, bytes]]:
    """n (label, request body) pairs: 80 % type/value fuzz of one callback's inputs, 20 % broken structure; every
    server-side callback, the upload one included, gets its share."""
    rng = random.Random(seed)
    keys = [c["output"] for c in app._callback_list if not c.get("clientside_function")]
    upload_keys = [k for k in keys if "upload-message" in k]
    for i in range(n):
        key = upload_keys[0] if upload_keys and i % 4 == 0 else rng.choice(keys)
        spec = app.callback_map[key]
        body = payload(app, key, _mutate_values(spec, values, rng), [spec["inputs"][0]["id"] + "." +
                                                                        spec["inputs"][0]["property"]])  # fmt: skip
        if rng.random() < 0.2:
            body = _break_structure(body, rng)
            label = "structure"
        else:
            label = "upload" if key in upload_keys else "values"
        try:
            data = json.dumps(body, allow_nan=True).encode()
        except (TypeError, ValueError):
            data = b"{not json"
        if rng.random() < 0.02:
            data = data[: rng.randrange(1, max(2, len(data)))]  # truncated JSON
        yield label, data
