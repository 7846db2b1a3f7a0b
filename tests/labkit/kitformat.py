#!/usr/bin/python3
# kitformat.py - LAB KIT output helpers (tables, a YAML subset, kubectl-style
# JSONPath). Part of the mgmt-driver lab kit (tests/labkit/); not a real tool.
"""Lab kit: kubectl-like tables, a small YAML reader/writer and JSONPath templates."""

import json
import re


# ---------------------------------------------------------------- tables
def table(rows):
    """Align rows like kubectl's tabwriter (minwidth 6, padding 3); returns text."""
    if not rows:
        return ""
    ncol = max(len(r) for r in rows)
    widths = [0] * ncol
    for r in rows:
        for i, c in enumerate(r[:-1]):
            widths[i] = max(widths[i], len(str(c)) + 3, 6)
    lines = []
    for r in rows:
        cells = [str(c).ljust(widths[i]) for i, c in enumerate(r[:-1])]
        cells.append(str(r[-1]))
        lines.append("".join(cells).rstrip() if len(r) > 1 else str(r[0]))
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- YAML subset
class YamlError(ValueError):
    pass


def _scalar(text):
    t = text.strip()
    if t.startswith("#"):
        return None
    if t[:1] in "\"'":
        q = t[0]
        end = t.rfind(q)
        if end <= 0:
            raise YamlError("unterminated string: %s" % t)
        body = t[1:end]
        if q == '"':
            return json.loads('"' + body + '"')
        return body.replace("''", "'")
    t = re.sub(r"\s+#.*$", "", t)
    if t in ("", "~", "null", "Null", "NULL"):
        return None
    if t in ("true", "True", "TRUE"):
        return True
    if t in ("false", "False", "FALSE"):
        return False
    if t == "{}":
        return {}
    if t == "[]":
        return []
    if t[:1] in "[{":
        try:
            return json.loads(t)
        except ValueError:
            return t
    if re.fullmatch(r"-?\d+", t):
        return int(t)
    if re.fullmatch(r"-?\d+\.\d*(e[-+]?\d+)?", t):
        return float(t)
    return t


def _split_key(content):
    """'key: rest' -> (key, rest) or None if not a mapping entry."""
    if content[:1] in "\"'":
        q = content[0]
        end = content.find(q, 1)
        if end > 0 and content[end + 1:end + 2] == ":" and content[end + 2:end + 3] in ("", " "):
            return content[1:end], content[end + 2:].strip()
        return None
    m = re.match(r"([^\s:#][^:#]*?|[^\s:#]):(?:\s+(.*)|$)", content)
    if not m:
        return None
    return m.group(1).strip(), (m.group(2) or "").strip()


def yaml_load(text):
    """Load the block-style YAML subset that kubeconfigs and helm files use (or JSON)."""
    if text.lstrip()[:1] in "{[":
        return json.loads(text)
    lines = []
    for raw in text.splitlines():
        if not raw.strip() or raw.lstrip().startswith("#") or raw.strip() in ("---", "..."):
            continue
        ind = len(raw) - len(raw.lstrip(" "))
        lines.append([ind, raw.strip()])
    pos = [0]

    def is_item(c):
        return c == "-" or c.startswith("- ")

    def block(ind):
        if is_item(lines[pos[0]][1]):
            return seq(ind)
        return mapping(ind)

    def mapping(ind):
        m = {}
        while pos[0] < len(lines):
            i, c = lines[pos[0]]
            if i != ind or is_item(c):
                if i > ind:
                    raise YamlError("bad indentation: %s" % c)
                break
            kv = _split_key(c)
            if kv is None:
                raise YamlError("expected 'key: value', got: %s" % c)
            key, rest = kv
            pos[0] += 1
            if rest in ("", "|", ">") or rest.startswith("#"):
                if rest in ("|", ">"):
                    parts = []
                    while pos[0] < len(lines) and lines[pos[0]][0] > ind:
                        parts.append(lines[pos[0]][1])
                        pos[0] += 1
                    m[key] = ("\n" if rest == "|" else " ").join(parts) + "\n"
                elif pos[0] < len(lines) and (lines[pos[0]][0] > ind or
                                              (lines[pos[0]][0] == ind and is_item(lines[pos[0]][1]))):
                    m[key] = block(lines[pos[0]][0])
                else:
                    m[key] = None
            else:
                m[key] = _scalar(rest)
        return m

    def seq(ind):
        items = []
        while pos[0] < len(lines):
            i, c = lines[pos[0]]
            if i != ind or not is_item(c):
                break
            rest = c[1:].lstrip()
            if not rest:
                pos[0] += 1
                if pos[0] < len(lines) and lines[pos[0]][0] > ind:
                    items.append(block(lines[pos[0]][0]))
                else:
                    items.append(None)
            elif _split_key(rest) is not None and not rest.startswith(("{", "[")):
                lines[pos[0]] = [ind + len(c) - len(rest), rest]
                items.append(mapping(lines[pos[0]][0]))
            else:
                pos[0] += 1
                items.append(_scalar(rest))
        return items

    if not lines:
        return None
    doc = block(lines[0][0])
    if pos[0] != len(lines):
        raise YamlError("unexpected content: %s" % lines[pos[0]][1])
    return doc


_PLAIN = re.compile(r"^[A-Za-z0-9_./][A-Za-z0-9_./:@+=-]*$")
_SPECIAL = {"true", "false", "null", "yes", "no", "on", "off", "~", "y", "n"}


def _yscalar(v):
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, (int, float)):
        return json.dumps(v)
    s = str(v)
    try:
        float(s)
        numeric = True
    except ValueError:
        numeric = False
    if (_PLAIN.match(s) and s.lower() not in _SPECIAL and not numeric
            and not s.endswith(":") and not re.match(r"\d{4}-\d\d-\d\d", s)):
        return s
    return json.dumps(s, ensure_ascii=False)


def yaml_dump(obj, indent=0):
    """Block YAML like `kubectl -o yaml` (sorted keys, list items at the key's indent)."""
    pad = " " * indent
    lines = []
    if isinstance(obj, dict):
        if not obj:
            return pad + "{}\n"
        for k in sorted(obj):
            v = obj[k]
            key = _yscalar(k)
            if isinstance(v, dict) and v:
                lines.append("%s%s:\n%s" % (pad, key, yaml_dump(v, indent + 2)))
            elif isinstance(v, list) and v:
                lines.append("%s%s:\n%s" % (pad, key, yaml_dump(v, indent)))
            elif isinstance(v, dict):
                lines.append("%s%s: {}\n" % (pad, key))
            elif isinstance(v, list):
                lines.append("%s%s: []\n" % (pad, key))
            else:
                lines.append("%s%s: %s\n" % (pad, key, _yscalar(v)))
        return "".join(lines)
    if isinstance(obj, list):
        if not obj:
            return pad + "[]\n"
        for item in obj:
            if isinstance(item, (dict, list)) and item:
                sub = yaml_dump(item, indent + 2)
                lines.append(pad + "- " + sub[indent + 2:])
            else:
                lines.append(pad + "- " + yaml_dump(item, 0).strip() + "\n")
        return "".join(lines)
    return pad + _yscalar(obj) + "\n"


# ---------------------------------------------------------------- JSONPath
class JsonPathError(ValueError):
    pass


def _parse_template(tpl):
    """Split a kubectl JSONPath template into ('text', s) / ('expr', s) parts."""
    parts, i, buf = [], 0, ""
    while i < len(tpl):
        c = tpl[i]
        if c == "{":
            if buf:
                parts.append(("text", buf))
                buf = ""
            j, depth, quote = i + 1, 1, None
            while j < len(tpl):
                ch = tpl[j]
                if quote:
                    if ch == "\\":
                        j += 1
                    elif ch == quote:
                        quote = None
                elif ch in "\"'":
                    quote = ch
                elif ch == "{":
                    depth += 1
                elif ch == "}":
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            if j >= len(tpl):
                raise JsonPathError("unclosed action")
            parts.append(("expr", tpl[i + 1:j].strip()))
            i = j + 1
        else:
            buf += c
            i += 1
    if buf:
        parts.append(("text", buf))
    return parts


def _tokens(path):
    """'.items[*].metadata.name' -> list of steps."""
    steps, i = [], 0
    if path.startswith(("$", "@")):
        i = 1
    while i < len(path):
        c = path[i]
        if c == ".":
            if path[i + 1:i + 2] == ".":
                raise JsonPathError("recursive descent is not supported by the lab kit")
            j, name = i + 1, ""
            while j < len(path) and path[j] not in ".[":
                if path[j] == "\\" and j + 1 < len(path):
                    name += path[j + 1]
                    j += 2
                    continue
                name += path[j]
                j += 1
            if name == "*":
                steps.append(("all",))
            elif name:
                steps.append(("key", name))
            i = j
        elif c == "[":
            j = path.index("]", i) if not path.startswith("[?", i) else path.index(")]", i) + 1
            inner = path[i + 1:j].strip()
            i = j + 1
            if inner == "*":
                steps.append(("all",))
            elif inner[:1] in "'\"":
                steps.append(("key", inner[1:-1]))
            elif inner.startswith("?(") and inner.endswith(")"):
                m = re.fullmatch(r"\?\(\s*@((?:\.[\w\-/\\.]+)+)\s*(==|!=)\s*(.+?)\s*\)", inner)
                if not m:
                    raise JsonPathError("unsupported filter %s" % inner)
                lit = m.group(3)
                val = lit[1:-1] if lit[:1] in "'\"" else _scalar(lit)
                steps.append(("filter", m.group(1), m.group(2), val))
            elif re.fullmatch(r"-?\d*:-?\d*", inner):
                a, b = inner.split(":")
                steps.append(("slice", int(a) if a else None, int(b) if b else None))
            elif re.fullmatch(r"-?\d+", inner):
                steps.append(("index", int(inner)))
            else:
                raise JsonPathError("unsupported subscript [%s]" % inner)
        else:
            raise JsonPathError("unrecognized character in action: %r" % c)
    return steps


def _walk(values, steps):
    for st in steps:
        nxt = []
        for v in values:
            kind = st[0]
            if kind == "key":
                if isinstance(v, dict) and st[1] in v:
                    nxt.append(v[st[1]])
            elif kind == "all":
                if isinstance(v, list):
                    nxt.extend(v)
                elif isinstance(v, dict):
                    nxt.extend(v[k] for k in sorted(v))
            elif kind == "index":
                if isinstance(v, list) and -len(v) <= st[1] < len(v):
                    nxt.append(v[st[1]])
            elif kind == "slice":
                if isinstance(v, list):
                    nxt.extend(v[st[1]:st[2]])
            elif kind == "filter":
                if isinstance(v, list):
                    for item in v:
                        got = _walk([item], _tokens(st[1]))
                        match = bool(got) and got[0] == st[3]
                        if match == (st[2] == "=="):
                            nxt.append(item)
        values = nxt
    return values


def _fmt(v):
    if isinstance(v, str):
        return v
    if v is True:
        return "true"
    if v is False:
        return "false"
    if v is None:
        return ""
    if isinstance(v, (int, float)):
        return json.dumps(v)
    return json.dumps(v, separators=(",", ":"), sort_keys=True)


def jsonpath(template, obj):
    """Render a kubectl -o jsonpath template (missing keys print nothing)."""
    parts = _parse_template(template)
    outbuf = []

    def run(seq, cur):
        i = 0
        while i < len(seq):
            kind, s = seq[i]
            if kind == "text":
                outbuf.append(s)
            elif s.startswith("range "):
                depth, j = 1, i + 1
                while j < len(seq):
                    if seq[j][0] == "expr" and seq[j][1].startswith("range "):
                        depth += 1
                    elif seq[j] == ("expr", "end"):
                        depth -= 1
                        if depth == 0:
                            break
                    j += 1
                if j >= len(seq):
                    raise JsonPathError("not in range, nothing to end")
                for item in _walk([cur], _tokens(s[6:].strip())):
                    run(seq[i + 1:j], item)
                i = j
            elif s == "end":
                raise JsonPathError("not in range, nothing to end")
            elif s[:1] in "\"'":
                outbuf.append(json.loads('"' + s[1:-1].replace('"', '\\"') + '"') if s[0] == '"'
                              else s[1:-1])
            else:
                root = obj if s.startswith("$") else cur
                vals = _walk([root], _tokens(s))
                outbuf.append(" ".join(_fmt(v) for v in vals))
            i += 1

    run(parts, obj)
    return "".join(outbuf)
