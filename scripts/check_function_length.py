#!/usr/bin/env python3
"""Fails when a function in src/, cli/ or bench/ is longer than a limit.

    check_function_length.py [ROOT] [--limit N] [--allowlist FILE] [--all]

A function's length is the lines from its opening brace's line to its closing
brace's, both included. Every function over the limit (80 lines unless told)
fails the check unless scripts/function_length_allowlist.txt lists it (its
path and name, one a line); a listed function that is no longer over the
limit, or no longer found, fails it too, so the list only shrinks. Device
functions (__global__ and __device__) count as host functions do: kernels
are split into their steps as FlashAttention-3 splits its own, only where
the machine code stays the same (scripts/same-kernel-code).

The scan is a brace matcher, not a C++ parser: comments, string and char
literals (raw strings too) and preprocessor lines are blanked first; then a
brace block at file, namespace, extern "C" or class scope is a function when
the text before it has a parameter list, ')' followed only by qualifiers
(const, noexcept, override, final, & ...), a trailing return type '-> T', a
requires clause or a constructor's initializer list. Everything inside a
function (lambdas, local classes) counts toward that function.
"""
import argparse
import pathlib
import re
import sys

DIRS = ("src", "cli", "bench")
SUFFIXES = (".h", ".cc", ".cu", ".cuh")
DEFAULT_LIMIT = 80
ALLOWLIST = "scripts/function_length_allowlist.txt"

QUALIFIERS = {"const", "noexcept", "override", "final", "volatile", "mutable", "&", "&&",
              "__host__", "__device__", "__forceinline__", "constexpr"}
ACCESS = re.compile(r"^(?:(?:public|private|protected)\s*:(?!:)\s*)+")
TOKEN = re.compile(r"""
    (?P<id>[A-Za-z_]\w*)
  | (?P<num>\.?\d(?:[eEpP][+-]|[\w.'])*)
  | (?P<punct>::|->|&&|\|\||<<=|>>=|<=>|[<>=!+\-*/%&|^]=|\+\+|--|\.\.\.|[^\s\w])
""", re.X)
NAME = re.compile(r"""
    (?:(?:[A-Za-z_]\w*(?:\s*<[^<>;{}]*>)?\s*::\s*)*      # Class:: or ns::Class<T>::
       (?:~\s*[A-Za-z_]\w*                               # destructor
        | operator\s*(?:\(\s*\)|\[\s*\]|[^\s\w(]+|\s[\w:<>*&\s]+?)  # operator()...
        | [A-Za-z_]\w*(?:\s*<[^<>;{}]*>)?))               # plain name, f<T>
    \s*$""", re.X)


class Function:
    def __init__(self, name, line, end, device):
        self.name, self.line, self.end, self.device = name, line, end, device

    @property
    def length(self):
        return self.end - self.line + 1

    def __repr__(self):
        return "Function(%r, %d-%d%s)" % (self.name, self.line, self.end,
                                          ", device" if self.device else "")


def blank(text):
    """The text with comments, literals and preprocessor lines turned to spaces.

    Newlines are kept (so offsets and line numbers still match); a string
    literal keeps its quotes ("" and '') so `extern "C"` stays recognisable.
    """
    out = []
    i, n = 0, len(text)
    line_start = True  # only whitespace since the last newline
    while i < n:
        c = text[i]
        if c == "\n":
            out.append(c)
            i += 1
            line_start = True
            continue
        if line_start and c == "#":
            # A preprocessor line, with its backslash continuations.
            j = i
            while j < n:
                if text[j] == "\n" and text[j - 1] != "\\":
                    break
                if text.startswith("//", j):
                    j = text.find("\n", j)
                    j = n if j < 0 else j
                    break
                if text.startswith("/*", j):
                    k = text.find("*/", j + 2)
                    j = n if k < 0 else k + 2
                    continue
                j += 1
            out.append(_spaces(text[i:j]))
            i = j
            continue
        if not c.isspace():
            line_start = False
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(_spaces(text[i:j]))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(_spaces(text[i:j]))
            i = j
        elif c == '"' or c == "'":
            raw = c == '"' and i > 0 and text[i - 1] == "R" and _raw_prefix(text, i - 1)
            if raw:
                m = re.compile(r'"([^()\\\s]{0,16})\(').match(text, i)
                end = text.find(")" + m.group(1) + '"', m.end()) if m else -1
                j = n if end < 0 else end + len(m.group(1)) + 2
            else:
                j = i + 1
                while j < n and text[j] != c and text[j] != "\n":
                    j += 2 if text[j] == "\\" else 1
                j = min(j + 1, n)
            out.append(c + _spaces(text[i + 1:j - 1]) + c)
            i = j
        elif c.isdigit() or (c == "." and i + 1 < n and text[i + 1].isdigit()):
            # A number, whose digit separators (1'000) are not char literals.
            m = TOKEN.match(text, i)
            out.append(m.group(0))
            i = m.end()
        elif c.isalpha() or c == "_":
            m = re.compile(r"\w+").match(text, i)
            out.append(m.group(0))
            i = m.end()
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _spaces(s):
    return re.sub(r"[^\n]", " ", s)


def _raw_prefix(text, r):
    """Whether the R at r starts a raw string's prefix (R, LR, uR, UR, u8R)."""
    k = r
    while k > 0 and (text[k - 1].isalnum() or text[k - 1] == "_"):
        k -= 1
    return text[k:r] in ("", "L", "u", "U", "u8")


def tokens(header):
    return [m.group(0) for m in TOKEN.finditer(header)]


def _close(toks, i, opening, closing):
    depth = 0
    for j in range(i, len(toks)):
        if toks[j] == opening:
            depth += 1
        elif toks[j] == closing:
            depth -= 1
            if depth == 0:
                return j
    return -1


def _strip_template(toks):
    """The tokens without leading `template <...>` clauses and attributes."""
    while toks:
        if toks[0] == "template" and len(toks) > 1 and toks[1] == "<":
            depth, j = 0, 1
            while j < len(toks):
                if toks[j] == "<":
                    depth += 1
                elif toks[j] == ">":
                    depth -= 1
                elif toks[j] == ">>":
                    depth -= 2
                if depth <= 0:
                    break
                j += 1
            toks = toks[j + 1:]
        elif toks[0] == "[" and len(toks) > 1 and toks[1] == "[":
            toks = toks[_close(toks, 0, "[", "]") + 1:]
        else:
            break
    return toks


def _suffix_ok(rest):
    """Whether the tokens after a parameter list are those of a function."""
    i = 0
    while i < len(rest):
        t = rest[i]
        if t in QUALIFIERS:
            i += 1
        elif t in ("->", ":", "requires", "try"):
            return True  # trailing return, initializer list, constraint
        elif t == "(" and i > 0 and rest[i - 1] in ("noexcept", "__launch_bounds__"):
            i = _close(rest, i, "(", ")") + 1
            if i == 0:
                return False
        elif t == "[" and i + 1 < len(rest) and rest[i + 1] == "[":
            i = _close(rest, i, "[", "]") + 1
            if i == 0:
                return False
        elif t == "__attribute__" and i + 1 < len(rest) and rest[i + 1] == "(":
            i = _close(rest, i + 1, "(", ")") + 1
            if i == 0:
                return False
        else:
            return False
    return True


def classify(header):
    """What the text before a '{' at scope level opens.

    Returns ("scope", None) for a namespace, extern "C" block or class (whose
    braces are looked into), ("function", (name, rest)) for a function body
    where rest are the tokens after its parameter list, or ("other", None).
    """
    header = ACCESS.sub("", header.strip())
    toks = _strip_template(tokens(header))
    if not toks:
        return "other", None
    if toks[0] in ("namespace", "inline") and "namespace" in toks[:2]:
        return "scope", None
    if toks[0] == "extern" and toks[1:] in (['"', '"'],):
        return "scope", None
    lead = [t for t in toks[:3] if t not in ("typedef", "static", "inline", "constexpr")]
    if lead and lead[0] == "enum":
        return "other", None
    if lead and lead[0] in ("class", "struct", "union"):
        if "(" not in toks or _class_head(toks):
            return "scope", None
    # The parameter list: the first top-level (...) after a name that only
    # qualifiers, a trailing return type or an initializer list follow.
    i = 0
    while i < len(toks):
        if toks[i] == "(":
            j = _close(toks, i, "(", ")")
            if j < 0:
                return "other", None
            if _suffix_ok(toks[j + 1:]):
                name = _name_before(header, toks, i)
                if name is not None:
                    return "function", (name, toks[j + 1:])
            i = j + 1
        else:
            i += 1
    return "other", None


def _class_head(toks):
    """Whether `struct ...(...)` is a class head (alignas(16), a base's args)."""
    j = toks.index("(")
    return j > 0 and toks[j - 1] in ("alignas", "__align__", "__declspec", "__attribute__")


def _name_before(header, toks, i):
    """The function's name before token i (its '('), or None if it has none."""
    # Rebuild the text of the tokens before the parameter list.
    before = " ".join(toks[:i])
    before = re.sub(r"\s*::\s*", "::", before)
    before = re.sub(r"~\s+", "~", before)
    m = NAME.search(before)
    if not m:
        return None
    name = re.sub(r"\s+", " ", m.group(0).strip())
    name = re.sub(r"\s*([<>(),\[\]*&])\s*", r"\1", name)
    name = re.sub(r"operator\s+(?=[^\w\s])", "operator", name)
    first = name.split("::")[-1]
    if first in ("if", "for", "while", "switch", "return", "sizeof", "decltype", "alignof",
                 "catch", "static_assert", "alignas", "__launch_bounds__"):
        return None
    return name


def functions(text):
    """Every function defined at file, namespace or class scope in text."""
    src = blank(text)
    found = []
    line_of = _line_index(src)
    # Each open scope: the offset where the current declaration's header
    # starts. Function bodies and other blocks are skipped whole.
    header_start = [0]
    i, n = 0, len(src)
    pending_init = []  # header pieces already consumed by an init-list brace
    while i < n:
        c = src[i]
        if c in ";":
            header_start[-1] = i + 1
            pending_init = []
        elif c == "}":
            if len(header_start) > 1:
                header_start.pop()
            header_start[-1] = i + 1
            pending_init = []
        elif c == "{":
            header = "".join(pending_init) + src[header_start[-1]:i]
            kind, what = classify(header)
            if kind == "function":
                name, rest = what
                if ":" in rest and rest[0] != "->" and _member_brace_init(header):
                    # `Foo() : x_{1} {`: the first brace initialises a member.
                    j = _match(src, i)
                    pending_init.append(src[header_start[-1]:i] + "{}")
                    header_start[-1] = j + 1
                    i = j + 1
                    continue
                j = _match(src, i)
                toks = tokens(header)
                device = "__global__" in toks or "__device__" in toks
                found.append(Function(name, line_of(i), line_of(j), device))
                header_start[-1] = j + 1
                pending_init = []
                i = j + 1
                continue
            if kind == "scope":
                header_start.append(i + 1)
                pending_init = []
            else:
                j = _match(src, i)
                i = j + 1
                continue
        i += 1
    return found


def _member_brace_init(header):
    """Whether a '{' after this header (with an initializer list) is a member's."""
    stripped = header.rstrip()
    return bool(stripped) and (stripped[-1].isalnum() or stripped[-1] in "_>")


def _match(src, i):
    """The offset of the '}' closing the '{' at i (the end if unbalanced)."""
    depth = 0
    for j in range(i, len(src)):
        if src[j] == "{":
            depth += 1
        elif src[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return len(src) - 1


def _line_index(src):
    starts = [0] + [m.end() for m in re.finditer("\n", src)]

    def line_of(offset):
        lo, hi = 0, len(starts)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if starts[mid] <= offset:
                lo = mid
            else:
                hi = mid
        return lo + 1
    return line_of


def read_allowlist(path):
    """The (path, name) pairs of the allowlist; '#' starts a comment."""
    entries = []
    if not path.exists():
        return entries
    for n, line in enumerate(path.read_text().splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split(None, 1)
        if len(parts) != 2:
            raise SystemExit("%s:%d: expected 'path name'" % (path, n))
        entries.append((parts[0], parts[1].strip()))
    return entries


def source_files(root):
    return sorted(p for d in DIRS for p in (root / d).rglob("*")
                  if p.suffix in SUFFIXES and p.is_file())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("root", nargs="?", default=".")
    ap.add_argument("--limit", type=int, default=DEFAULT_LIMIT)
    ap.add_argument("--allowlist", help="default: ROOT/" + ALLOWLIST)
    ap.add_argument("--all", action="store_true",
                    help="list every function over the limit, allowlisted or not, longest first")
    args = ap.parse_args(argv)
    root = pathlib.Path(args.root).resolve()
    allow_path = pathlib.Path(args.allowlist) if args.allowlist else root / ALLOWLIST
    allowed = read_allowlist(allow_path)

    files = source_files(root)
    long = []
    for path in files:
        rel = path.relative_to(root).as_posix()
        for f in functions(path.read_text(errors="replace")):
            if f.length > args.limit:
                long.append((rel, f))

    if args.all:
        for rel, f in sorted(long, key=lambda x: -x[1].length):
            print("%s:%d: %s (%d lines)%s" % (rel, f.line, f.name, f.length,
                                             " [device]" if f.device else ""))
        return 0

    allowed_set = set(allowed)
    bad = [(rel, f) for rel, f in long if (rel, f.name) not in allowed_set]
    over = {(rel, f.name) for rel, f in long}
    stale = [e for e in allowed if e not in over]
    for rel, f in bad:
        print("%s:%d: %s (%d lines)%s" % (rel, f.line, f.name, f.length,
                                          " [device]" if f.device else ""))
    for rel, name in stale:
        print("%s: %s is listed in %s but is not over %d lines: remove it from the list"
              % (rel, name, ALLOWLIST, args.limit))
    print("function length: %d files, %d functions over %d lines (%d allowed, %d of them "
          "device code), %s"
          % (len(files), len(long), args.limit, len(long) - len(bad),
             sum(1 for _, f in long if f.device),
             "ok" if not bad and not stale else
             "%d not allowed, %d stale allowlist entries" % (len(bad), len(stale))))
    return 1 if bad or stale else 0


if __name__ == "__main__":
    sys.exit(main())
