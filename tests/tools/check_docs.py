#!/usr/bin/env python3
"""check_docs.py: fail when docs/interfaces.md no longer says what the code says.

    check_docs.py            check every marked table (make check-docs, make test)
    check_docs.py --print T  print table T as the code has it, ready to paste
                             (T: verdicts, errors, exits, routes, problems,
                             config, env)

docs/interfaces.md marks each checked table with a comment line right above
it, `<!-- check_docs: NAME -->`.  What is compared, and against what:

    verdicts  code, severity, kind, meaning    forge/model/verdicts.h (FG_VERDICT_CODES)
    errors    code, value, kind, exit          forge/core/error.h, error.c
    exits     exit status, enum names          daemon/cli.h (enum fg_exit)
    routes    method, path, auth, statuses     api/routes.c (fg_routes), docs/openapi.json
    problems  type, status                     fg_problem(...) calls in api/*.c
    config    key, flag                        daemon/config.c (settings[])
    env       variable                         getenv("...") in forge/ store/ api/ daemon/
    commands  one `### \\`forged NAME\\`` heading per command, and every
              subcommand named as `forged NAME SUB`   daemon/cmd_*.c

Columns not listed (a route's description, a problem's "when", a key's
default) are prose and not compared.  The sources are read as text, so
nothing needs to be built first.
"""
import json
import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
DOC = "docs/interfaces.md"


def read(rel):
    with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
        return f.read()


def sources(folders, exts=(".c", ".h")):
    for top in folders:
        for d, _, files in os.walk(os.path.join(ROOT, top)):
            for name in sorted(files):
                if name.endswith(exts):
                    yield os.path.relpath(os.path.join(d, name), ROOT)


def function_body(text, name):
    """The text of C function name's body (from its opening brace to the matching one)."""
    m = re.search(r"\b" + re.escape(name) + r"\s*\([^;{]*\)\s*\{", text)
    if not m:
        return None
    depth, i = 1, m.end()
    while i < len(text) and depth:
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        i += 1
    return text[m.end():i - 1]


def switch_map(body, value_re):
    """case LABEL: ... return VALUE; -> {LABEL: VALUE}, with "default" for default:."""
    out, pending = {}, []
    for line in body.splitlines():
        for lab in re.findall(r"\bcase\s+(\w+)\s*:", line):
            pending.append(lab)
        if re.search(r"\bdefault\s*:", line):
            pending.append("default")
        m = re.search(r"\breturn\s+" + value_re + r"\s*;", line)
        if m and pending:
            for lab in pending:
                out[lab] = m.group(1)
            pending = []
    return out


class Fail(Exception):
    pass


# ---- what the code says ------------------------------------------------------------------


def code_verdicts():
    text = read("forge/model/verdicts.h")
    m = re.search(r"#define FG_VERDICT_CODES\(X\)((?:.*\\\n)*.*\n)", text)
    if not m:
        raise Fail("forge/model/verdicts.h: no FG_VERDICT_CODES(X) list found")
    block = m.group(1).replace("\\\n", " ")
    rows = []
    for mm in re.finditer(r'X\(\s*(\w+)\s*,\s*"([^"]*)"\s*,\s*FG_SEV_(\w+)\s*,\s*FG_VK_(\w+)\s*,'
                          r'\s*((?:"(?:[^"\\]|\\.)*"\s*)+)\)', block):
        meaning = "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', mm.group(5)))
        rows.append([mm.group(2), mm.group(3).lower(), mm.group(4).lower(), meaning])
    if not rows:
        raise Fail("forge/model/verdicts.h: FG_VERDICT_CODES holds no X(...) rows this script can read")
    return rows


def code_errors():
    enum = re.search(r"enum fg_errcode\s*\{(.*?)\};", read("forge/core/error.h"), re.S)
    if not enum:
        raise Fail("forge/core/error.h: no enum fg_errcode found")
    codes = re.findall(r"\b(FG_\w+)\s*=\s*(-?\d+)\s*,", enum.group(1))  # aliases (= FG_X) skipped
    c = read("forge/core/error.c")
    exits = switch_map(function_body(c, "fg_err_exit_code") or "", r"(\d+)")
    kinds = switch_map(function_body(c, "fg_err_kind") or "", r'"([^"]*)"')
    if not codes or "default" not in exits or "default" not in kinds:
        raise Fail("forge/core/error.c: fg_err_exit_code or fg_err_kind is not a switch this script can read")
    return [[name, value, kinds.get(name, kinds["default"]), exits.get(name, exits["default"])]
            for name, value in codes]


def code_exits():
    enum = re.search(r"enum fg_exit\s*\{(.*?)\};", read("daemon/cli.h"), re.S)
    if not enum:
        raise Fail("daemon/cli.h: no enum fg_exit found")
    by_value = {}
    for name, value in re.findall(r"\b(FG_EXIT_\w+)\s*=\s*(\d+)", enum.group(1)):
        by_value.setdefault(value, []).append(name)
    return [[v, ", ".join(by_value[v])] for v in sorted(by_value, key=int)]


def code_routes():
    text = read("api/routes.c")
    table = re.search(r"fg_routes\[\]\s*=\s*\{(.*?)\n\};", text, re.S)
    if not table:
        raise Fail("api/routes.c: no fg_routes[] table found")
    api = json.loads(read("docs/openapi.json"))
    rows = []
    for method, path, role in re.findall(r'\{\s*"([A-Z]+)"\s*,\s*"([^"]+)"\s*,\s*FG_ROLE_(\w+)\s*,', table.group(1)):
        op = api.get("paths", {}).get(path, {}).get(method.lower())
        if op is None:
            raise Fail("docs/openapi.json has no operation %s %s (api/routes.c has it)" % (method, path))
        statuses = ", ".join(sorted(op.get("responses", {}), key=lambda s: (not s.isdigit(), s)))
        rows.append([method, path, role.lower(), statuses, op.get("summary", "")])
    return rows


def code_problems():
    pairs = set()
    for rel in sources(["api"]):
        for status, slug in re.findall(r'fg_problem\(\s*\w+\s*,\s*\w+\s*,\s*(\d+)\s*,\s*"([a-z0-9-]+)"', read(rel)):
            pairs.add((slug, status))
    if not pairs:
        raise Fail("api/*.c: no fg_problem(resp, req, STATUS, \"slug\", ...) calls found")
    by_slug = {}
    for slug, status in pairs:
        by_slug.setdefault(slug, set()).add(status)
    return [["urn:forged:problem:" + s, ", ".join(sorted(by_slug[s]))]
            for s in sorted(by_slug, key=lambda s: (min(by_slug[s]), s))]


def code_config():
    table = re.search(r"struct setting settings\[\]\s*=\s*\{(.*?)\n\};", read("daemon/config.c"), re.S)
    if not table:
        raise Fail("daemon/config.c: no settings[] table found")
    keys = re.findall(r'\{\s*"(\w+)"\s*,\s*K_', table.group(1))
    return [[k, "--" + k.replace("_", "-")] for k in keys]


def code_env():
    names = set()
    for rel in sources(["forge", "store", "api", "daemon"]):
        names.update(re.findall(r'\bgetenv\(\s*"(\w+)"\s*\)', read(rel)))
    return [[n] for n in sorted(names)]


def code_commands():
    cmds, subs = [], {}
    for rel in sources(["daemon"], (".c",)):
        if not os.path.basename(rel).startswith("cmd_"):
            continue
        text = read(rel)
        groups = {}
        for var, body in re.findall(r"struct fg_subcmd (\w+)\[\]\s*=\s*\{(.*?)\n\};", text, re.S):
            groups[var] = re.findall(r'\{\s*"([\w-]+)"\s*,', body)
        for body in re.findall(r"const struct fg_cmd fg_cmd_\w+\s*=\s*\{(.*?)\n\};", text, re.S):
            name = re.search(r'\.name\s*=\s*"([\w-]+)"', body)
            if not name:
                continue
            cmds.append(name.group(1))
            sub = re.search(r"\.subs\s*=\s*(\w+)", body)
            subs[name.group(1)] = groups.get(sub.group(1), []) if sub else []
    if not cmds:
        raise Fail("daemon/cmd_*.c: no `const struct fg_cmd` with a .name found")
    return cmds, subs


# ---- what the document says --------------------------------------------------------------


def split_row(line):
    cells = re.split(r"(?<!\\)\|", line.strip())[1:-1]
    out = []
    for c in cells:
        c = c.strip().replace("\\|", "|")
        if len(c) >= 2 and c.startswith("`") and c.endswith("`") and c.count("`") == 2:
            c = c[1:-1]
        out.append(c)
    return out


def doc_table(doc, name):
    lines = doc.splitlines()
    marker = "<!-- check_docs: %s -->" % name
    for i, line in enumerate(lines):
        if line.strip() == marker:
            rows = []
            for row in lines[i + 1:]:
                if not row.strip().startswith("|"):
                    break
                rows.append(split_row(row))
            if len(rows) < 2:
                raise Fail("%s: the table after '%s' is missing" % (DOC, marker))
            return rows[2:]  # header and separator
    raise Fail("%s: no '%s' line (it marks the table to check)" % (DOC, marker))


def render(header, rows, code_cols=(0,)):
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in rows:
        out.append("| " + " | ".join("`%s`" % c if i in code_cols and c else c.replace("|", "\\|")
                                     for i, c in enumerate(r)) + " |")
    return "\n".join(out)


TABLES = {
    # name: (extractor, header, columns compared, columns in backticks)
    "verdicts": (code_verdicts, ["code", "severity", "kind", "meaning"], 4, (0,)),
    "errors": (code_errors, ["code", "value", "kind", "exit", "HTTP answer"], 4, (0,)),
    "exits": (code_exits, ["exit", "enum fg_exit", "meaning"], 2, ()),
    "routes": (code_routes, ["method", "path", "auth", "statuses", "does"], 4, (1,)),
    "problems": (code_problems, ["type", "status", "when"], 2, (0,)),
    "config": (code_config, ["key", "flag", "default", "meaning"], 2, (0, 1)),
    "env": (code_env, ["variable", "read by", "meaning"], 1, (0,)),
}


def compare(doc, name):
    extract, header, ncols, _ = TABLES[name]
    want = [r[:ncols] for r in extract()]
    have = [r[:ncols] for r in doc_table(doc, name)]
    problems = []
    if name == "exits":
        # the names cell may list them in any order
        want = [[v, ", ".join(sorted(n.split(", ")))] for v, n in want]
        have = [[r[0], ", ".join(sorted(x.strip("` ") for x in r[1].split(","))) if len(r) > 1 else ""]
                for r in have]
    if name == "problems":
        have = [[r[0], ", ".join(sorted(x.strip() for x in r[1].split(",")))] if len(r) > 1 else r for r in have]
    keyed_want = {r[0] if name not in ("routes",) else (r[0], r[1]): r for r in want}
    keyed_have = {r[0] if name not in ("routes",) else (r[0], r[1]): r for r in have}
    for k, r in keyed_want.items():
        if k not in keyed_have:
            problems.append("missing row: " + " | ".join(r))
        elif keyed_have[k] != r:
            problems.append("row %s says: %s\n      the code says: %s"
                            % (k, " | ".join(keyed_have[k]), " | ".join(r)))
    for k, r in keyed_have.items():
        if k not in keyed_want:
            problems.append("row the code does not have: " + " | ".join(r))
    if name == "verdicts" and not problems and [r[0] for r in have] != [r[0] for r in want]:
        problems.append("rows are not in the order of FG_VERDICT_CODES")
    return ["%s table: %s" % (name, p) for p in problems]


def compare_commands(doc):
    cmds, subs = code_commands()
    problems = []
    headings = set(re.findall(r"^### `forged ([\w-]+)`", doc, re.M))
    for c in cmds:
        if c not in headings:
            problems.append("commands: no '### `forged %s`' heading" % c)
        for s in subs[c]:
            if not re.search(r"forged %s %s\b" % (re.escape(c), re.escape(s)), doc):
                problems.append("commands: 'forged %s %s' is never named" % (c, s))
    for h in sorted(headings - set(cmds)):
        problems.append("commands: '### `forged %s`' names no command of daemon/cmd_*.c" % h)
    return problems


def main(argv):
    if len(argv) == 3 and argv[1] == "--print" and argv[2] in TABLES:
        extract, header, _, code_cols = TABLES[argv[2]]
        rows = extract()
        print("<!-- check_docs: %s -->" % argv[2])
        print(render(header, [r + [""] * (len(header) - len(r)) for r in rows], code_cols))
        return 0
    if len(argv) != 1:
        sys.stderr.write(__doc__)
        return 2
    try:
        doc = read(DOC)
        problems = []
        for name in TABLES:
            problems += compare(doc, name)
        problems += compare_commands(doc)
    except (Fail, OSError, ValueError) as e:
        print("check-docs: %s" % e)
        return 1
    if problems:
        for p in problems:
            print("check-docs: %s: %s" % (DOC, p))
        print("check-docs: failed (python3 tests/tools/check_docs.py --print TABLE prints a table as the code has it)")
        return 1
    print("check-docs: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
