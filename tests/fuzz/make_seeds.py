#!/usr/bin/env python3
"""make_seeds.py: (re)writes the seed corpora of tests/fuzz/seeds/{config,tokens,verify,api}.

Run from the top of the tree: python3 tests/fuzz/make_seeds.py.  The seeds are
committed; this script says where each comes from, and rewrites them when a
source changes:

  config  systemd/config.example.json and one document per key at and past its
          limits, flags after "#argv" (fuzz_config.c's input format);
  tokens  systemd/tokens.example, a file whose token "hello" matches, and the
          line-reading edge cases (long lines, CRLF, NUL, 1025 tokens);
  verify  every document of tests/fixtures/mtplx_verdict_vectors.json, the
          documents of tests/e2e/test_verdict.sh and test_verify_api.sh, and
          hand-made hostile ones;
  api     the requests of tests/e2e/test_serve.sh's walk, in fuzz_api.c's
          input format, against the fixtures fuzz_api links as "fix/".

Every target also gets the hostile cases of issue 11: 1e300 numbers, invalid
UTF-8, \\u0000 in strings, deep nesting and huge arrays.
"""
import hashlib
import json
import os
import re
import shutil
import sys

SEEDS = "tests/fuzz/seeds"


def reset(target):
    d = os.path.join(SEEDS, target)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    return d


def write(d, name, data):
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogateescape")
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def deep(n, inner="1"):
    return "[" * n + inner + "]" * n


def deep_obj(n, inner="1"):
    return '{"a":' * n + inner + "}" * n


BAD_UTF8 = b"\xff\xfe\xc3\x28\xed\xa0\x80\xf4\x90\x80\x80".decode("utf-8", "surrogateescape")


# ---- config ----

def config_seeds():
    d = reset("config")
    with open("systemd/config.example.json") as f:
        write(d, "example.json", f.read())
    write(d, "empty_object.json", "{}")
    write(d, "not_object.json", "[1, 2]")
    limits = {
        "workers": [0, 256, 257, -1, 1.5, 1e300, -1e300, "3", "1e300", 9007199254740993],
        "max_body_bytes": [1024, 1023, 1 << 30, (1 << 30) + 1, 1e300, "-5"],
        "queue_cap": [1, 0, 1000000, 1000001, 1e19, -9.3e18, 2147483648],
        "drain_seconds": [0, 3600, 3601, 4294967296, 1e300],
        "max_attempts": [1, 100, 101, 0.5, -0.0, 1e300],
        "etag_ttl_seconds": [0, 31536000, 31536001, 1e300, 5e-324],
        "collapse_threshold": [0.05, 0, 1, 1e-300, 0.9999999999999999, 1e300, -1e300, "0.05", "nan", "inf", "0x1p-3"],
    }
    for key, values in limits.items():
        for i, v in enumerate(values):
            write(d, f"{key}_{i}.json", json.dumps({key: v}))
    for i, v in enumerate(["127.0.0.1:8470", "[::1]:0", ":8470", "[::1]", "host:99999", "a:", "a:-1",
                           "x" * 70 + ":1", "[" + "f" * 70 + "]:1", "0.0.0.0:65535", "::1:80"]):
        write(d, f"listen_{i}.json", json.dumps({"listen": v}))
    write(d, "roots_17.json", json.dumps({"allow_roots": [f"/srv/r{i}" for i in range(17)]}))
    write(d, "hosts_long.json", json.dumps({"allow_hosts": ["h" * 255, "h" * 256, "", "127.0.0.1:9"]}))
    write(d, "hosts_not_strings.json", '{"allow_hosts": ["a", 1, null, {"b": 2}]}')
    write(d, "roots_not_array.json", '{"allow_roots": "/srv/models"}')
    write(d, "paths.json", json.dumps({"state_dir": "/s" * 2100, "artifacts_dir": "", "tokens_file": "x"}))
    write(d, "state_dir_long.json", json.dumps({"state_dir": "/" + "s" * 4090}))
    write(d, "nul_in_string.json", '{"state_dir": "/var/lib/forged\\u0000/etc", "listen": "127.0.0.1\\u0000:1"}')
    write(d, "bad_utf8.json", '{"state_dir": "/var/' + BAD_UTF8 + '", "allow_roots": ["' + BAD_UTF8 + '"]}')
    write(d, "unknown_key.json", '{"workers": 2, "wokers": 3}')
    write(d, "duplicate_keys.json", '{"workers": 2, "workers": 300, "allow_roots": ["/a"], "allow_roots": ["/b"]}')
    write(d, "wrong_types.json", '{"workers": true, "listen": null, "queue_cap": [1], "collapse_threshold": {}}')
    write(d, "deep.json", '{"workers": ' + deep(2000) + "}")
    write(d, "deep_obj.json", deep_obj(1500))
    write(d, "huge_array.json", '{"allow_roots": [' + ",".join(['"/a"'] * 3000) + "]}")
    write(d, "trailing.json", '{"workers": 2} {"workers": 3}')
    write(d, "nul_byte.json", b'{"workers": 2}\x00')
    # Flags after the file (fuzz_config.c: a line "#argv", then one flag a line).
    write(d, "argv_basic.txt", '{"workers": 2}\n#argv\n--workers=3\n--listen\n[::1]:0\n--allow-roots=/a\n'
          "--allow-roots\n/b\n--collapse-threshold=0.05\n--state-dir=/tmp/s")
    write(d, "argv_bad.txt", "{}\n#argv\n--workers=1e300\n--queue-cap=99999999999999999999\n--nope\n"
          "--max-body-bytes\n")
    write(d, "argv_lists.txt", '{"allow_hosts": ["a"]}\n#argv\n' + "".join(f"--allow-hosts=h{i}\n" for i in range(17)))
    write(d, "argv_config_twice.txt", '{}\n#argv\n--config\n/nonexistent\n--config=/proc/self/fd/0\n--x')


# ---- tokens ----

def sha(s):
    return hashlib.sha256(s.encode()).hexdigest()


def tokens_seeds():
    d = reset("tokens")
    with open("systemd/tokens.example") as f:
        write(d, "example", f.read())
    write(d, "valid", f"# hello\nwrite ci-farm {sha('hello')}\nread dash {sha('world')}\n\n  \t# indented comment\n"
          f"\tread tabbed {sha('tab').upper()}\n")
    write(d, "empty", "")
    write(d, "crlf", f"write ci {sha('hello')}\r\nread dash {sha('x')}\r\n")
    write(d, "no_newline", f"write ci {sha('hello')}")
    write(d, "bad_role", f"admin ci {sha('hello')}\n")
    write(d, "short_hex", f"write ci {sha('hello')[:63]}\n")
    write(d, "long_hex", f"write ci {sha('hello')}0\n")
    write(d, "bad_hex", f"write ci {'g' * 64}\n")
    write(d, "extra_field", f"write ci {sha('hello')} extra\n")
    write(d, "two_fields", "write ci\n")
    write(d, "name_63", f"write {'n' * 63} {sha('hello')}\n")
    write(d, "name_64", f"write {'n' * 64} {sha('hello')}\n")
    write(d, "name_300", f"write {'n' * 300} {sha('hello')}\n")
    write(d, "long_line", f"write ci {sha('hello')}" + " " * 600 + "\n")
    write(d, "long_line_split", "# " + "c" * 509 + f"write ci {sha('hello')}\n")
    write(d, "nul_in_line", f"write ci\x00x {sha('hello')}\nread d {sha('hello')}\n".encode())
    write(d, "bad_utf8_name", ("write " + BAD_UTF8 + f" {sha('hello')}\n").encode("utf-8", "surrogateescape"))
    write(d, "duplicate_hash", f"read first {sha('hello')}\nwrite second {sha('hello')}\n")
    write(d, "max_tokens", "".join(f"read t{i} {sha(str(i))}\n" for i in range(1024)))
    write(d, "too_many_tokens", "".join(f"read t{i} {sha(str(i))}\n" for i in range(1025)))
    write(d, "only_comments", "#\n# a\n#write ci 00\n")
    write(d, "vertical_ws", f"\x0bwrite ci {sha('hello')}\n\x0c\n")


# ---- verify ----

def heredocs(path):
    """The bodies of cat >"$TMP/NAME.json" <<'EOF' ... EOF blocks, by NAME."""
    out = {}
    text = open(path).read()
    for m in re.finditer(r"""cat >"\$TMP/([A-Za-z0-9_]+)\.json" <<'EOF'\n(.*?)\nEOF\n""", text, re.S):
        out[m.group(1)] = m.group(2) + "\n"
    return out


def verify_seeds():
    d = reset("verify")
    vectors = json.load(open("tests/fixtures/mtplx_verdict_vectors.json"))["vectors"]
    for v in vectors:
        if "document" in v:
            write(d, f"vector_{v['id']}.json", json.dumps(v["document"]))
    for src in ("tests/e2e/test_verdict.sh", "tests/e2e/test_verify_api.sh", "tests/e2e/test_client.sh"):
        base = os.path.basename(src)[5:-3]
        for name, body in heredocs(src).items():
            if "$" not in body:
                write(d, f"e2e_{base}_{name}.json", body)
    v1 = lambda rows, **kw: json.dumps(dict({"schema": "forged.verification.v1"}, **kw, rows=rows))
    write(d, "v1_wins.json", v1([{"depth": 0, "tok_s": 10}, {"depth": 1, "tok_s": 14, "acceptance": [0.8, 0.6],
                                  "quality_passed": True}], hardware="M4 Max", runtime="mtplx-2.12"))
    write(d, "v1_1e300.json", '{"schema": "forged.verification.v1", "rows": [{"depth": 0, "tok_s": 1e-300}, '
          '{"depth": 1, "tok_s": 1e300, "acceptance": [1e-300]}, {"depth": 2, "tok_s": 1e308}]}')
    write(d, "v1_1e999.json", '{"schema": "forged.verification.v1", "rows": [{"depth": 0, "tok_s": 1e999}, '
          '{"depth": 1e300, "tok_s": -1e999}]}')
    write(d, "v1_depth_edges.json", v1([{"depth": 0, "tok_s": 5}, {"depth": 16, "tok_s": 6}, {"depth": 17, "tok_s": 7}]))
    write(d, "v1_depth_float.json", '{"schema": "forged.verification.v1", "rows": [{"depth": 0.0, "tok_s": 5}, '
          '{"depth": 1.0000000000000002, "tok_s": 6}, {"depth": -0, "tok_s": 7}]}')
    write(d, "v1_accept_17.json", v1([{"depth": 0, "tok_s": 5}, {"depth": 1, "tok_s": 6, "acceptance": [0.5] * 17}]))
    write(d, "v1_rows_65.json", v1([{"depth": i % 17, "tok_s": 5 + i} for i in range(65)]))
    write(d, "v1_huge_rows.json", v1([{"depth": 0, "tok_s": 1}] * 3000))
    write(d, "v1_huge_acceptance.json", v1([{"depth": 0, "tok_s": 1}, {"depth": 1, "tok_s": 2, "acceptance": [0.01] * 5000}]))
    write(d, "v1_nul_strings.json", '{"schema": "forged.verification.v1", "hardware": "M4\\u0000Max", '
          '"runtime": "mtplx\\u0000", "rows": [{"depth": 0, "tok_s": 5}]}')
    write(d, "v1_nul_schema.json", '{"schema": "forged.verification.v1\\u0000x", "rows": [{"depth": 0, "tok_s": 5}]}')
    write(d, "v1_bad_utf8.json", '{"schema": "forged.verification.v1", "hardware": "' + BAD_UTF8 +
          '", "runtime": "' + BAD_UTF8 * 10 + '", "rows": [{"depth": 0, "tok_s": 5}]}')
    write(d, "v1_long_labels.json", v1([{"depth": 0, "tok_s": 5}], hardware="h" * 200, runtime="r" * 100))
    write(d, "v1_deep.json", '{"schema": "forged.verification.v1", "rows": [' + deep(900) + "]}")
    write(d, "v1_deep_obj.json", deep_obj(2000))
    write(d, "v1_unknown_fields.json", '{"schema": "forged.verification.v1", "rowz": 1, "rows": [{"depth": 0, '
          '"tok_s": 5, "x": 1, "\\u0000": 2, "' + BAD_UTF8 + '": 3}]}')
    write(d, "v1_quality_types.json", v1([{"depth": 0, "tok_s": 5, "quality_passed": None},
                                          {"depth": 1, "tok_s": 9, "quality_passed": 1}]))
    mrow = lambda d_, t, **kw: dict({"depth": d_, "tok_s": t}, **kw)
    write(d, "mtplx_verify_full.json", json.dumps({
        "rows": [mrow(0, 15.0, multiplier_vs_ar=1.0, acceptance_by_position=[], verify_time_s=1.0),
                 mrow(1, 20.0, multiplier_vs_ar=1e300, acceptance_by_position=[0.5, None, 0.04],
                      hit_token_budget=True, hit_token_budget_count=1e15, quality_passed=False,
                      finish_reasons={"stop": 3, "length": 1e300, "x": {"y": [None, "\u0000"]}},
                      validations_total=3, validations_passed=2),
                 mrow(2, 21.0, elapsed_s=1e-300, acceptance_by_depth=[0.01], quality_passed=None)],
        "verdict": "no_quality_passed_mtp_depth_beat_ar",
        "failure_reasons": ["quality_failed_fast_mtp", "no_mtp_depth_beat_ar"]}))
    write(d, "mtplx_finish_long.json", json.dumps({"rows": [mrow(0, 1.0, multiplier_vs_ar=1.0),
                                                           mrow(1, 2.0, finish_reasons={"k" * 240: 1})]}))
    write(d, "mtplx_finish_deep.json", '{"rows": [{"depth": 0, "tok_s": 1, "multiplier_vs_ar": 1}, '
          '{"depth": 1, "tok_s": 2, "finish_reasons": ' + deep_obj(40, "{}") + "}]}")
    write(d, "mtplx_hit_count.json", '{"rows": [{"depth": 0, "tok_s": 1, "verify_time_s": 0}, {"depth": 1, "tok_s": 2, '
          '"hit_token_budget_count": 1e300}, {"depth": 2, "tok_s": 3, "hit_token_budget_count": 9007199254740993}]}')
    write(d, "mtplx_reasons_many.json", json.dumps({"rows": [mrow(0, 1.0, multiplier_vs_ar=1.0)],
                                                   "verdict": "v" * 100, "failure_reasons": ["r" * 70] * 12}))
    write(d, "outcome.json", json.dumps({"verify_rows": [mrow(0, 10.0, multiplier_vs_ar=1.0), mrow(1, 12.0)],
                                        "speed_evidence": {"depth": 1, "forge_verify_rows": [], "verdict": "mtp_depth_wins"},
                                        "phase": "verify", "message": "ok", "verdict": "mtp_depth_wins",
                                        "failure_reasons": []}))
    write(d, "evidence.json", json.dumps({"forge_verify_rows": [mrow(0, 10.0), mrow(2, 9.0, acceptance_by_position=[0.02])],
                                         "verdict": "mtp_acceptance_collapsed", "depth": 0,
                                         "failure_reasons": ["mtp_acceptance_collapsed", "no_mtp_depth_beat_ar"]}))
    write(d, "runtime.json", json.dumps({"mtplx_version": "2.12", "verified_on": {"hardware": "M4 Max"},
                                        "speed_evidence": {"forge_verify_rows": [mrow(0, 10.0), mrow(1, 11.0)]}}))
    write(d, "tune.json", json.dumps({"results": [{"mode": "AR", "depth": None, "tok_s": 10.0},
                                                  {"mode": "D1", "depth": 1, "tok_s": 11.0, "acceptance_by_depth": [0.6]},
                                                  {"mode": "D2", "depth": 2, "error": "oom"},
                                                  {"mode": "D3", "depth": 3, "decode_tok_s": 1e300}],
                                      "best_multiplier": {"verdict": "mtp_depth_wins"}}))
    write(d, "tune_skipped_many.json", json.dumps({"results": [{"mode": "AR", "depth": None, "tok_s": 10.0}] +
                                                  [{"mode": f"D{i}", "depth": i, "error": "x" * 100} for i in range(1, 17)]}))
    write(d, "trailing_garbage.json", v1([{"depth": 0, "tok_s": 5}]) + " \t\r\n\x0b")
    write(d, "nul_byte.json", v1([{"depth": 0, "tok_s": 5}]).encode() + b"\x00")
    write(d, "two_docs.json", v1([{"depth": 0, "tok_s": 5}]) + "\n{}")


# ---- api ----

def request(method, target, headers=(), body=""):
    lines = [f"{method} {target}"] + list(headers)
    return "\n".join(lines) + "\n\n" + body


W = "Authorization: Bearer $WRITE"
R = "Authorization: Bearer $READ"
J = "Content-Type: application/json"


def api_seeds():
    d = reset("api")
    n = 0

    def add(name, method, target, headers=(), body=""):
        nonlocal n
        n += 1
        write(d, f"{n:03d}_{name}", request(method, target, headers, body))

    for path in ("/livez", "/readyz", "/healthz", "/metrics", "/openapi.json", "/", "/ui/", "/ui/app.js",
                 "/ui/nope.js", "/ui/" + "a" * 80, "/v1/whoami", "/nope", "/livez/"):
        add("get" + path.replace("/", "_"), "GET", path, [R])
    add("head_ui", "HEAD", "/ui/")
    add("whoami_write", "GET", "/v1/whoami", [W])
    add("jobs_no_token", "GET", "/v1/jobs")
    add("jobs_bad_token", "GET", "/v1/jobs", ["Authorization: Bearer not-a-token"])
    add("jobs_basic", "GET", "/v1/jobs", ["Authorization: Basic YTpi"])
    add("jobs_list", "GET", "/v1/jobs?state=queued&limit=5&cursor=0", [R])
    add("jobs_list_bad", "GET", "/v1/jobs?state=nope&limit=1e300&cursor=-1", [R])
    add("jobs_list_huge", "GET", "/v1/jobs?limit=99999999999999999999&cursor=99999999999999999999", [R])
    add("jobs_list_pct", "GET", "/v1/jobs?state=que%00ued&limit=%35", [R])
    add("job_get", "GET", "/v1/jobs/1", [R])
    add("job_get_huge", "GET", "/v1/jobs/99999999999999999999", [R])
    add("job_delete", "DELETE", "/v1/jobs/1", [W])
    add("job_delete_read", "DELETE", "/v1/jobs/1", [R])
    add("job_put", "PUT", "/v1/jobs/1", [W])
    add("artifacts", "GET", "/v1/artifacts?verdict=head_double_shifted&family=qwen3_5&limit=2", [R])
    add("artifacts_cursor", "GET", "/v1/artifacts?cursor=2&limit=500", [R])
    add("artifact_1", "GET", "/v1/artifacts/1", [R])
    add("artifact_3", "GET", "/v1/artifacts/3", [R, 'If-None-Match: W/"x", *'])
    add("fleet_health", "GET", "/v1/fleet/health", [R])
    add("fleet_health_etag", "GET", "/v1/fleet/health", [R, 'If-None-Match: "0123456789abcdef0123456789abcdef"'])
    add("request_id", "GET", "/livez", ["X-Request-Id: fuzz-req.42:a_b"])
    add("request_id_bad", "GET", "/livez", ["X-Request-Id: bad id " + BAD_UTF8])
    # Inspections.
    add("inspect", "POST", "/v1/inspections", [W, J], '{"source": "fix/qwen35_hf", "runtimes": ["mlx-lm-0.32", "hf"]}')
    add("inspect_shifted", "POST", "/v1/inspections", [W, J], '{"source": "fix/qwen35_mlx_head_shifted"}')
    add("inspect_read", "POST", "/v1/inspections", [R, J], '{"source": "fix/qwen35_hf"}')
    add("inspect_text_plain", "POST", "/v1/inspections", [W, "Content-Type: text/plain"], '{"source": "fix/qwen35_hf"}')
    add("inspect_charset", "POST", "/v1/inspections", [W, "Content-Type: application/json; charset=utf-8"],
        '{"source": "fix/glm45"}')
    add("inspect_truncated", "POST", "/v1/inspections", [W, J], '{"source": "fix/qwen35_hf",')
    add("inspect_array", "POST", "/v1/inspections", [W, J], '["fix/qwen35_hf"]')
    add("inspect_empty", "POST", "/v1/inspections", [W, J], "")
    add("inspect_deep", "POST", "/v1/inspections", [W, J], deep_obj(40))
    add("inspect_deep_1000", "POST", "/v1/inspections", [W, J], deep(1000))
    add("inspect_deep_in_string", "POST", "/v1/inspections", [W, J], '{"source": "' + "[" * 100 + '", "x": "\\"["}')
    add("inspect_source_int", "POST", "/v1/inspections", [W, J], '{"source": 7}')
    add("inspect_runtime_bad", "POST", "/v1/inspections", [W, J], '{"source": "fix/qwen35_hf", "runtimes": ["vllm-9", 1]}')
    add("inspect_runtimes_many", "POST", "/v1/inspections", [W, J],
        json.dumps({"source": "fix/qwen35_hf", "runtimes": ["hf"] * 40}))
    add("inspect_etc", "POST", "/v1/inspections", [W, J], '{"source": "/etc"}')
    add("inspect_dotdot", "POST", "/v1/inspections", [W, J], '{"source": "fix/../fix/qwen35_hf"}')
    add("inspect_missing", "POST", "/v1/inspections", [W, J], '{"source": "no_such_fixture"}')
    add("inspect_url", "POST", "/v1/inspections", [W, J], '{"source": "http://$HUB/org/model"}')
    add("inspect_url_other", "POST", "/v1/inspections", [W, J], '{"source": "https://example.com/model"}')
    add("inspect_hf", "POST", "/v1/inspections", [W, J], '{"source": "hf://org/name@main"}')
    add("inspect_nul", "POST", "/v1/inspections", [W, J], '{"source": "fix/qwen35_hf\\u0000/../../etc"}')
    add("inspect_nul_byte", "POST", "/v1/inspections", [W, J], '{"source": "fix/qwen35_hf"}\x00')
    add("inspect_bad_utf8", "POST", "/v1/inspections", [W, J], '{"source": "fix/' + BAD_UTF8 + '"}')
    add("inspect_huge_array", "POST", "/v1/inspections", [W, J],
        '{"source": "fix/qwen35_hf", "x": [' + ",".join(["1e300"] * 2500) + "]}")
    add("inspect_too_large", "POST", "/v1/inspections", [W, J], '{"source": "' + "a" * 17000 + '"}')
    add("inspect_1e300", "POST", "/v1/inspections", [W, J], '{"source": 1e300, "runtimes": 1e999}')
    # Jobs.
    add("job", "POST", "/v1/jobs", [W, J], '{"kind": "forge", "source": "fix/qwen35_hf", "target": "mtplx-2.12"}')
    add("job_full", "POST", "/v1/jobs", [W, J, "Idempotency-Key: fuzz-key-1"],
        '{"kind": "forge", "source": "fix/qwen35_hf", "backbone": "fix/qwen35_hf", "target": "mlx-lm-0.32", '
        '"quant": "affine:4:64", "out": "out1"}')
    add("job_key_other", "POST", "/v1/jobs", [W, J, "Idempotency-Key: fuzz-key-1"],
        '{"kind": "forge", "source": "fix/qwen35_mlx_sidecar"}')
    add("job_key_long", "POST", "/v1/jobs", [W, J, "Idempotency-Key: " + "k" * 300], '{"kind": "forge", "source": "fix/qwen35_hf"}')
    add("job_key_empty", "POST", "/v1/jobs", [W, J, "Idempotency-Key:"], '{"kind": "forge", "source": "fix/qwen35_hf"}')
    add("job_inspect_kind", "POST", "/v1/jobs", [W, J], '{"kind": "inspect", "source": "fix/qwen35_hf"}')
    add("job_bad_target", "POST", "/v1/jobs", [W, J], '{"kind": "forge", "source": "fix/qwen35_hf", "target": "vllm-9"}')
    add("job_bad_quant", "POST", "/v1/jobs", [W, J], '{"kind": "forge", "source": "fix/qwen35_hf", "quant": "affine:7:64"}')
    add("job_mxfp4", "POST", "/v1/jobs", [W, J], '{"kind": "forge", "source": "fix/glm45", "quant": "mxfp4", "target": "hf"}')
    add("job_match", "POST", "/v1/jobs", [W, J], '{"kind": "forge", "source": "fix/qwen35_mlx_q4", "quant": "match"}')
    add("job_out_outside", "POST", "/v1/jobs", [W, J], '{"kind": "forge", "source": "fix/qwen35_hf", "out": "/var/tmp/x"}')
    add("job_url_no_backbone", "POST", "/v1/jobs", [W, J], '{"kind": "forge", "source": "http://$HUB/m"}')
    add("job_url_backbone", "POST", "/v1/jobs", [W, J],
        '{"kind": "forge", "source": "http://$HUB/m", "backbone": "fix/qwen35_hf"}')
    add("job_hf", "POST", "/v1/jobs", [W, J], '{"kind": "forge", "source": "hf://org/name@' + "r" * 200 + '", "backbone": "fix/qwen35_hf"}')
    add("job_types", "POST", "/v1/jobs", [W, J], '{"kind": "forge", "source": "fix/qwen35_hf", "target": 1, "quant": null, "out": []}')
    add("job_nul", "POST", "/v1/jobs", [W, J], '{"kind": "forge\\u0000", "source": "fix/qwen35_hf"}')
    # Verifications.
    v306 = ('{"schema": "forged.verification.v1", "hardware": "M4 Max", "runtime": "mtplx-2.12", "rows": '
            '[{"depth": 0, "tok_s": 15.04}, {"depth": 1, "tok_s": 13.46, "acceptance": [0.067]}, '
            '{"depth": 2, "tok_s": 12.1, "acceptance": [0.05, 0.01]}]}')
    add("verify_306", "POST", "/v1/artifacts/1/verifications", [W, J], v306)
    add("verify_missing_artifact", "POST", "/v1/artifacts/99999/verifications", [W, J], v306)
    add("verify_no_depth0", "POST", "/v1/artifacts/2/verifications", [W, J], '{"rows": [{"depth": 1, "tok_s": 13.46}]}')
    add("verify_mtplx", "POST", "/v1/artifacts/3/verifications", [W, J],
        '{"rows": [{"depth": 0, "tok_s": 15.0, "multiplier_vs_ar": 1.0, "acceptance_by_position": []}, '
        '{"depth": 1, "tok_s": 20.0, "acceptance_by_position": [0.5, null], "quality_passed": false, '
        '"finish_reasons": {"stop": 2}}], "verdict": "no_quality_passed_mtp_depth_beat_ar"}')
    add("verify_1e300", "POST", "/v1/artifacts/1/verifications", [W, J],
        '{"schema": "forged.verification.v1", "rows": [{"depth": 0, "tok_s": 1e-300}, {"depth": 1, "tok_s": 1e300}]}')
    add("verify_nul", "POST", "/v1/artifacts/1/verifications", [W, J],
        '{"schema": "forged.verification.v1", "hardware": "\\u0000", "rows": [{"depth": 0, "tok_s": 1}]}')
    add("verify_tune", "POST", "/v1/artifacts/2/verifications", [W, J],
        '{"results": [{"mode": "AR", "depth": null, "tok_s": 10}, {"mode": "D1", "depth": 1, "tok_s": 12, '
        '"acceptance_by_depth": [0.7]}]}')
    add("verify_huge_id", "POST", "/v1/artifacts/9223372036854775808/verifications", [W, J], v306)
    # Fleet reports.
    add("report", "POST", "/v1/fleet/reports", [W, J],
        '{"host": "gpu-a.example", "artifact": 1, "runtime": "mlx-lm-0.31", "observed": {"tok_s": 12.1}}')
    add("report_fingerprint", "POST", "/v1/fleet/reports", [W, J],
        '{"host": "gpu-b.example", "artifact": "93850b707585e404e4951a3ddc1f05a34b3d4f5fc081d616f46d8a2e8f1c8e68", '
        '"runtime": "mtplx-2.12", "observed": {"tok_s": 47.2}}')
    add("report_unknown_fp", "POST", "/v1/fleet/reports", [W, J],
        '{"host": "gpu-c", "artifact": "' + "0" * 64 + '", "runtime": "ollama"}')
    add("report_bad_runtime", "POST", "/v1/fleet/reports", [W, J], '{"host": "gpu-c", "artifact": 1, "runtime": "vllm-9"}')
    add("report_no_host", "POST", "/v1/fleet/reports", [W, J], '{"artifact": 1, "runtime": "ollama"}')
    add("report_1e300", "POST", "/v1/fleet/reports", [W, J], '{"host": "h", "artifact": 1e300, "runtime": "ollama"}')
    add("report_big_id", "POST", "/v1/fleet/reports", [W, J], '{"host": "h", "artifact": 9.3e18, "runtime": "ollama"}')
    add("report_frac_id", "POST", "/v1/fleet/reports", [W, J], '{"host": "h", "artifact": 1.5, "runtime": "hf"}')
    add("report_missing_artifact", "POST", "/v1/fleet/reports", [W, J], '{"host": "h", "artifact": 4000, "runtime": "hf"}')
    add("report_host_long", "POST", "/v1/fleet/reports", [W, J], json.dumps({"host": "h" * 256, "artifact": 1, "runtime": "hf"}))
    add("report_host_nul", "POST", "/v1/fleet/reports", [W, J], '{"host": "a\\u0000b", "artifact": 2, "runtime": "hf"}')
    add("report_host_utf8", "POST", "/v1/fleet/reports", [W, J], '{"host": "' + BAD_UTF8 + '", "artifact": 2, "runtime": "hf"}')
    add("report_observed", "POST", "/v1/fleet/reports", [W, J],
        '{"host": "h2", "artifact": 2, "runtime": "ollama", "observed": {"deep": ' + deep(30) + ', "n": 1e300}}')
    add("report_observed_array", "POST", "/v1/fleet/reports", [W, J], '{"host": "h", "artifact": 1, "runtime": "hf", "observed": []}')
    add("health_after", "GET", "/v1/fleet/health", [R])


def main():
    if not os.path.isdir(SEEDS):
        sys.exit("run from the top of the tree")
    config_seeds()
    tokens_seeds()
    verify_seeds()
    api_seeds()


if __name__ == "__main__":
    main()
