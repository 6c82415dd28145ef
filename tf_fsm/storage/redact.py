"""Secret redaction for everything tf_fsm writes (journal lines, artifacts, state files).

Pure: text in, text out. One combined compiled regex does the work, so a megabyte of agent
output costs one pass. The rules it keeps:

* Output that was already redacted is left alone (redacting twice equals redacting once): no
  pattern can match inside or start at the `[REDACTED]` marker.
* Text that is JSON-encoded (once or twice, e.g. a transcript inside a journal line) is still
  redacted, and a match never cuts a JSON escape sequence in half, so valid JSON stays valid.
* Prose and code are left alone where a secret is unlikely: a key name needs a separator and a
  plausible value (`token budget`, `token: str`, `password = get_password()` are untouched).

Speed on text that comes back: no pattern but the PEM block (and a literal value holding a
newline) can match across a line break, so a multi-line text is redacted line by line and each
line's result is remembered. The views tf_fsm rewrites (retry-state.json, chain-context.json,
the prompts of each attempt) are mostly lines redacted before; only new lines reach the regex.
A journal line is one line of compact JSON: it is cut at its structural `,"` instead, and only
the parts not seen before reach the regex (`Redactor.json_line`).
"""

from __future__ import annotations

import functools
import itertools
import json
import re
from collections.abc import Iterable, Mapping

MARKER = "[REDACTED]"

# Speed: every alternative of the combined regex starts with one literal character, so `re` gets a
# table of possible first characters and skips everything else in C. Checks on what comes before
# a match are lookbehinds placed right after that first character (hence the `.` in them), or,
# for token formats, after the second one: most places where a token's first letter occurs are
# then rejected by a plain character comparison, before any lookbehind runs.


def _starts_word(after: int) -> str:
    r"""Lookbehind, `after` characters into a match: the match starts a word, or follows a JSON
    escape such as `\n` (a secret on its own line reads `...\nghp_...` once the text is
    JSON-encoded). `]` counts as part of a word so that a token glued to an earlier `[REDACTED]`
    is not redacted on a second pass only (redaction is idempotent)."""
    dots = "." * after
    return rf"(?:(?<![A-Za-z0-9_\]]{dots})|(?<=\\[nrt]{dots}))"


def _outside_escape(after: int) -> str:
    r"""Lookbehind, `after` characters into a match: its first character is not the letter of a
    JSON escape (`\n`, `\r`, ...). In `\npm_...` the `n` belongs to the escape, and redacting
    from it would leave `\[REDACTED]`, which is not JSON. An escaped backslash before it
    (`\\npm_...`) is fine."""
    return rf"(?<![^\\]\\{'.' * after})"


_WORD_START = _starts_word(1)
# Letters that end a JSON escape (`\b \f \n \r \t \u`): a token starting with one of them
# also needs _outside_escape.
_ESCAPE_LETTERS = "bfnrtu"
# A quote, possibly escaped once or more (`"`, `\"`, `\\\"`): JSON inside JSON.
_QUOTE = r"\\*[\"']"
# Characters of an unquoted value: stops at whitespace, quotes, backslashes (so a JSON escape is
# never split), brackets (so `[REDACTED]` is never a value) and the usual delimiters of code/URLs.
_VAL = r"[^\s\"'\\`,;&<>(){}\[\]]"

# Key names that announce a secret, as they end: `OPENAI_API_KEY`, `x-api-key`, `githubToken`,
# `db.password`, `client_secret`. `key` alone is not one ("the key: insight"), nor is `auth`.
_KEY_ENDINGS = (
    "token", "secret", "password", "passwd", "passphrase", "authorization",
    "api[_-]key", "apikey", "access[_-]key", "secret[_-]key", "private[_-]key",
)  # fmt: skip


def _after_key(gaps: tuple[str, ...]) -> str:
    """Lookbehind (after the first character of the match): a key ending, then one of `gaps`."""
    last_letters = "".join({e[-1] + e[-1].upper() for e in _KEY_ENDINGS})
    quick = "|".join(f"(?<=[{last_letters}]{gap}.)" for gap in gaps)
    exact = "|".join(f"(?<=(?i:{end}){gap}.)" for end in _KEY_ENDINGS for gap in gaps)
    return f"(?:{quick})(?:{exact})"


# Values, each in the last capturing group of its alternative (the part that is replaced).
_SCHEMED = rf"[ \t]*((?i:bearer|basic|token|bot|digest)[ \t]+{_VAL}{{8,}}+)"
# `password=value` is an assignment, unless the value is code: `get()`, `env["X"]`, None, `==`.
_EQ_VALUE = (
    r"[ \t]*((?!(?i:none|null|nil|true|false|undefined)(?![A-Za-z0-9_]))"
    rf"(?![=$*]){_VAL}++)(?![(\[])"
)
# `token: value` is also prose ("Token: the unit of text"), so the value must look like a
# credential: 6 characters or more, one of them a digit or a symbol.
_COLON_VALUE = rf"[ \t]*((?={_VAL}{{6}})(?=[A-Za-z]*+[0-9_./+=!@#$%^*~:?-]){_VAL}++)"
_quote_names = itertools.count()


def _quoted() -> str:
    """A quoted value; the closing quote must match the opening one, escapes included, so that
    the end of one JSON-in-JSON string is not read as the start of a value."""
    q = f"q{next(_quote_names)}"
    return rf"[ \t]*(?P<{q}>{_QUOTE})((?!\[REDACTED\])(?:(?!(?P={q}))[^\\\r\n])++)(?=(?P={q}))"


def _after_eq() -> str:
    return f"(?:{_quoted()}|{_SCHEMED}|{_EQ_VALUE})"


def _after_colon() -> str:
    return f"(?:{_quoted()}|{_SCHEMED}|{_COLON_VALUE})"


def _sep_and_value() -> str:
    return rf"[ \t]*(?:={_after_eq()}|:{_after_colon()})"


_KEY_BEFORE = _after_key(("",))
_KEY_OR_KEY_SPACE_BEFORE = _after_key(("", "[ \t]"))

# Provider token formats, after gitleaks' rules (config/gitleaks.toml) and, for AI providers it
# lacks, trufflehog's detectors: a literal prefix and the token's own alphabet and length, so a
# prefix in prose ("hf_hub_download", "npm_config_cache", "the SG. abbreviation") is left alone.
# Lengths are minimums where a longer token would otherwise leave its tail unredacted. The first
# two characters of every format are literal (see _by_first_character).
_TOKEN_FORMATS: tuple[str, ...] = (
    # OpenAI (sk-, sk-proj-, sk-or-v1- of OpenRouter, ...) and Anthropic (sk-ant-). A digit is
    # required, so that words joined by hyphens ("sk-learn-style-...") are not keys.
    r"sk-(?:proj-|ant-|svcacct-|admin-)?(?=[A-Za-z_-]*+[0-9])[A-Za-z0-9_-]{20,}+",
    r"sk_(?:live|test|prod)_[A-Za-z0-9]{10,}+",  # Stripe
    r"rk_(?:live|test|prod)_[A-Za-z0-9]{10,}+",
    r"whsec_[A-Za-z0-9+/]{24,}+={0,2}",  # Stripe (and Standard Webhooks) signing secrets
    r"r8_[A-Za-z0-9_-]{37,}+",  # Replicate
    r"gh[pousr]_[A-Za-z0-9]{30,}+",  # GitHub
    r"github_pat_[A-Za-z0-9_]{30,}+",
    # GitLab: personal, deploy, runner, feed, feature flag, SCIM, mail, agent, OAuth, trigger and
    # CI job tokens; the routable ones end in `.<2 chars><7 chars>` (a runner's `glrt-t1_...`).
    r"gl(?:pat|dt|rt|ft|ffct|soat)-[A-Za-z0-9_-]{20,}+(?:\.[0-9a-z]{9,}+)?",
    r"glimt-[A-Za-z0-9_-]{25,}+",
    r"glagent-[A-Za-z0-9_-]{50,}+",
    r"gloas-[A-Za-z0-9_-]{64,}+",
    r"glptt-[0-9a-f]{40,}+",
    r"glcbt-[0-9a-zA-Z]{1,5}_[A-Za-z0-9_-]{20,}+",
    r"GR1348941[A-Za-z0-9_-]{20,}+",  # GitLab runner registration
    r"glc_[A-Za-z0-9+/]{32,}+={0,3}",  # Grafana Cloud
    r"glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}",  # Grafana service account
    r"gsk_[A-Za-z0-9]{52,}+",  # Groq
    # Hugging Face user and organization tokens: 34 characters, both cases (a snake_case name
    # such as hf_cachedmodeldownloads... has one).
    r"hf_(?=[a-z0-9]*+[A-Z])(?=[A-Z0-9]*+[a-z])[A-Za-z0-9]{34,}+(?![_\[])",
    r"api_org_(?=[a-z0-9]*+[A-Z])(?=[A-Z0-9]*+[a-z])[A-Za-z0-9]{34,}+(?![_\[])",
    # Slack: bot, user, workspace, legacy and configuration tokens, app tokens, webhook URLs
    # (the host is kept).
    r"xox[abposre]-(?=[A-Za-z-]*+[0-9])[A-Za-z0-9-]{10,}+",
    r"xoxe\.xox[bp]-[0-9]-[A-Za-z0-9]{160,}+",
    r"xapp-[0-9]-[A-Za-z0-9]++-[0-9]++-[A-Za-z0-9]++",
    r"hooks\.slack\.com/(?:services|workflows|triggers)/([A-Za-z0-9+/]{43,}+)",
    r"xai-[A-Za-z0-9_]{80,}+",  # xAI
    # AWS access key ids: exactly 20 characters (`[`: see _starts_word).
    *(rf"{p}[A-Z0-9]{{16}}(?![A-Za-z0-9[])" for p in ("AKIA", "ASIA", "ABIA", "ACCA")),
    r"A3T[A-Z0-9]{17}(?![A-Za-z0-9[])",
    r"AIza[0-9A-Za-z_-]{35,}+",  # Google
    r"ATATT3[A-Za-z0-9_=-]{186,}+",  # Atlassian
    r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58,}+",  # age
    r"eyJ[A-Za-z0-9_-]{8,}+\.eyJ[A-Za-z0-9_-]{8,}+\.[A-Za-z0-9_-]*+",  # JWT
    r"eyJrIjoi[A-Za-z0-9]{70,}+={0,3}",  # Grafana API key
    r"npm_[A-Za-z0-9]{36,}+(?![_\[])",  # npm
    r"pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}+",  # PyPI upload
    r"pplx-[A-Za-z0-9]{48,}+",  # Perplexity
    r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32,}+",  # Shopify
    r"sntryu_[a-f0-9]{64,}+",  # Sentry user and organization tokens
    r"sntrys_eyJpYXQiO[A-Za-z0-9+/=_]{60,}+",
    r"do[opr]_v1_[a-f0-9]{64,}+",  # DigitalOcean
    r"dp\.(?:pt|st|ct|sa|scim|audit)\.(?:[a-z0-9_-]{2,35}\.)?[A-Za-z0-9]{40,}+",  # Doppler
    r"dapi[a-f0-9]{32}(?:-[0-9])?(?![A-Za-z0-9_[])",  # Databricks
    r"lin_api_[A-Za-z0-9]{40,}+",  # Linear
    r"lsv2_(?:pt|sk)_[a-f0-9]{32}_[a-f0-9]{10,}+",  # LangSmith
    r"SG\.[A-Za-z0-9_-]{22,}+\.[A-Za-z0-9_-]{43,}+",  # SendGrid
    r"SK(?=[a-fA-F]*+[0-9])[0-9a-fA-F]{32}(?![A-Za-z0-9_[])",  # Twilio API key
    r"PMAK-[a-fA-F0-9]{24}-[a-fA-F0-9]{34,}+",  # Postman
    r"NRAK-[A-Za-z0-9]{27,}+",  # New Relic user and insert keys
    r"NRII-[A-Za-z0-9-]{32,}+",
    r"hvs\.[A-Za-z0-9_-]{90,}+",  # HashiCorp Vault service and batch tokens
    r"hvb\.[A-Za-z0-9_-]{138,}+",
)


def _token_start(first: str) -> str:
    """What may come before a token starting with `first` (placed after its second character)."""
    if first in _ESCAPE_LETTERS:
        return _starts_word(2) + _outside_escape(2)
    return _starts_word(2)


def _by_first_character(formats: Iterable[str]) -> list[str]:
    """One alternative per first character, `X(?:Y{start}rest|Z{start}rest|...)`: where the
    text has X, the engine compares the next character with each format's second one (a literal
    in every format) and runs the start check only for the format that goes on matching."""
    rests: dict[str, list[str]] = {}
    for pattern in formats:
        rests.setdefault(pattern[0], []).append(pattern[1] + _token_start(pattern[0]) + pattern[2:])
    return [f"{re.escape(first)}(?:{'|'.join(alts)})" for first, alts in rests.items()]


_PATTERNS: tuple[str, ...] = (
    # PEM private keys, the whole block; lines end in real or JSON-escaped newlines. A block cut
    # off before its END line is redacted to the end of its base64.
    r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
    r"(?:[A-Za-z0-9+/=:,\s]|-(?!----)|\\+[nrt])*+"
    r"(?:-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----)?",
    *_by_first_character(_TOKEN_FORMATS),
    # Bearer <token>: the scheme is kept. A digit and 16 characters: not "Bearer authentication".
    rf"B{_WORD_START}earer[ \t]+((?=[A-Za-z._~+/-]*+[0-9])[A-Za-z0-9._~+/-]{{16,}}+=*+)",
    # https://user:password@host: the user is kept.
    r"://[^/\s:@\"'\\\[\]]++:((?!\[REDACTED\])[^/\s@\"'\\\[\]]++)(?=@)",
    # Assignments to a secret key name, matched from the character after the name:
    # "apiKey": "v" / \"apiKey\": \"v\" (JSON, JSON in JSON) / password=v / token = v / token: v.
    rf"\"{_KEY_BEFORE}{_sep_and_value()}",
    rf"'{_KEY_BEFORE}{_sep_and_value()}",
    rf"\\{_KEY_BEFORE}\\*[\"']{_sep_and_value()}",
    rf"={_KEY_OR_KEY_SPACE_BEFORE}{_after_eq()}",
    rf":{_KEY_OR_KEY_SPACE_BEFORE}{_after_colon()}",
)

# Line by line (Redactor._line_by_line) from this many characters: below, one pass costs less.
_BY_LINE_MIN = 256
_MEMO_LINES = 4096  # lines remembered, at most (then forgotten, all at once)
_MEMO_LINE_CHARS = 1024  # a longer line is not remembered
_MEMO_TEXT_CHARS = 64 * 1024  # a longer text is not remembered whole
_MEMO_PATTERNS = 8  # redactors with different literal values remembered, at most
_LINES: dict[str, dict[str, str]] = {}
#: where `json_line` cuts a line of compact JSON: a raw `,"` is always structure there (a quote
#: inside a string is escaped), before an object's next key or an array's next string
_JSON_CUT = ',"'
_MEMO_PARTS = 16384  # parts of JSON lines remembered clean, at most (then forgotten at once)
_CLEAN_PARTS: dict[str, set[str]] = {}
#: the only pattern that spans lines starts so
_PEM_START = "-----BEGIN"

_SECRET_NAME_RE = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH", re.IGNORECASE)
_MIN_LITERAL = 8


def _overlaps_marker(value: str) -> bool:
    """True if redacting `value` could eat into a marker written earlier, which would break
    idempotence: the value occurs in the marker, contains it, or can straddle its edges."""
    if value in MARKER or MARKER in value:
        return True
    edges = range(1, len(MARKER))
    return any(value.startswith(MARKER[i:]) or value.endswith(MARKER[:i]) for i in edges)


_EDGE = " \t\r\n\"'\\"


def _literal_forms(value: str) -> set[str]:
    """The value as it appears in text, in JSON text and in JSON inside JSON. Quotes,
    backslashes and blanks at its ends are left out (a value set as `"abc..."`): in JSON text
    they would match the quote that ends a string, or half of an escape, and break the JSON."""
    core = value.strip(_EDGE)
    forms = {core}
    for ensure_ascii in (False, True):
        once = json.dumps(core, ensure_ascii=ensure_ascii)[1:-1]
        forms.add(once)
        forms.add(json.dumps(once, ensure_ascii=ensure_ascii)[1:-1])
    return {f for f in forms if len(f) >= _MIN_LITERAL and not _overlaps_marker(f)}


class Redactor:
    """Replaces secrets with `[REDACTED]`: known token shapes, `key=value` assignments of secret
    key names, and any extra literal values (e.g. the values of secret environment variables)."""

    def __init__(self, literals: Iterable[str] = ()) -> None:
        forms: set[str] = set()
        for value in literals:
            forms |= _literal_forms(value)
        self.literal_count = len(forms)
        parts = list(_PATTERNS)
        if forms:
            # Longest first, so an escaped form wins over the raw value it starts with. A literal
            # right after a lone backslash would split an escape (`\n` + `nsecret...`): skipped.
            ordered = sorted(forms, key=lambda f: (-len(f), f))
            parts += [re.escape(f[0]) + _outside_escape(1) + re.escape(f[1:]) for f in ordered]
        pattern = "|".join(parts)
        self._regex = re.compile(pattern)
        # A literal value with a newline in it can match across lines: no line by line then.
        self._by_line = not any("\n" in f for f in forms)
        # A line (not a text's first) -> that line redacted; shared by the redactors with the
        # same patterns (each run's store builds one from the same environment).
        if pattern not in _LINES and len(_LINES) >= _MEMO_PATTERNS:
            _LINES.clear()  # never the lines of a redactor made again: it is the common case
        self._lines = _LINES.setdefault(pattern, {})
        # A literal value with `,"` in it could match across `json_line`'s cuts: none then.
        self._by_part = not any(_JSON_CUT in f for f in forms)
        if pattern not in _CLEAN_PARTS and len(_CLEAN_PARTS) >= _MEMO_PATTERNS:
            _CLEAN_PARTS.clear()
        self._clean_parts = _CLEAN_PARTS.setdefault(pattern, set())

    @classmethod
    def from_environ(cls, environ: Mapping[str, str], extra: Iterable[str] = ()) -> Redactor:
        """Add the values of environment variables whose name looks secret (`*_TOKEN`,
        `*API_KEY*`, `DB_PASSWORD`, ...). Short or all-digit values are skipped: they would
        redact ordinary text. Absolute paths too (`SSH_AUTH_SOCK`, `XAUTHORITY`)."""
        values = [
            value
            for name, value in environ.items()
            if _SECRET_NAME_RE.search(name)
            and len(value) >= _MIN_LITERAL
            and not value.isdigit()
            and not value.startswith("/")
        ]
        return cls([*values, *extra])

    def __call__(self, text: str) -> str:
        if len(text) < _BY_LINE_MIN or "\n" not in text or _PEM_START in text:
            return self._regex.sub(self._replace, text)
        return self._line_by_line(text) if self._by_line else self._regex.sub(self._replace, text)

    def _line_by_line(self, text: str) -> str:
        """The same result as one pass over `text` (see the module docstring). A line is
        remembered as it is redacted after a newline, so a text's first line never is: it
        starts the one pass that redacts the lines not remembered, joined as they were."""
        memo = self._lines
        if (whole := memo.get(text)) is not None:  # a text redacted just before (a prompt,
            return whole  # then its copy) is remembered whole (a key with a newline in it)
        lines = text.split("\n")
        done = [None, *map(memo.get, lines[1:])]
        todo = [i for i, line in enumerate(done) if line is None]  # todo[0] == 0
        fresh = self._regex.sub(self._replace, "\n".join(lines[i] for i in todo)).split("\n")
        if len(fresh) != len(todo):  # cannot happen (no match spans a newline): one pass
            return self._regex.sub(self._replace, text)
        if len(memo) > _MEMO_LINES:
            memo.clear()
        for i, line in zip(todo, fresh, strict=True):
            done[i] = line
            if i and len(lines[i]) <= _MEMO_LINE_CHARS:
                memo[lines[i]] = line
        redacted = "\n".join(done)  # type: ignore[arg-type]  # every None is filled in
        if len(text) <= _MEMO_TEXT_CHARS:
            memo[text] = memo[redacted] = redacted  # redacting it again changes nothing
        return redacted

    def json_line(self, text: str) -> str:
        """One line of compact JSON (a journal line) redacted: the same result as one pass.
        A journal line is mostly the keys and values of the lines before it, so it is cut at
        its structural `,"`, the parts found clean are remembered, and only parts not seen
        before reach the regex. A match reaches past such a cut only through a quoted value
        (no lookaround looks further than the cut's two characters): one opened by `'`, in
        which a `"` is no end, or by the `"` that closes a string ending in `key:` or `key=`.
        A line with a `'`, or a part ending so, gets the one pass; so does a line with
        anything to redact."""
        if not self._by_part or "'" in text:
            return self(text)
        clean = self._clean_parts
        fresh = [part for part in text.split(_JSON_CUT) if part not in clean]
        if fresh:
            if any(map(_may_cross, fresh)) or self._regex.search(_JSON_CUT.join(fresh)):
                return self._regex.sub(self._replace, text)
            if len(clean) > _MEMO_PARTS:
                clean.clear()
            clean.update(part for part in fresh if len(part) <= _MEMO_LINE_CHARS)
        return text

    def _replace(self, match: re.Match[str]) -> str:
        # Alternatives that keep a prefix (a separator, "Bearer ", a URL's user) capture the value
        # in their last group; the others have no group and are replaced whole.
        if match.lastindex is None:
            return MARKER
        kept = match.string[match.start() : match.start(match.lastindex)]
        # The kept part is redacted too: a URL's user may be a token (https://ghp_...@host).
        return self(kept) + MARKER


def _may_cross(part: str) -> bool:
    """Could a quoted value opened in this part of a JSON line run on past its end: is its
    last `"` a quote after `:` or `=` (blanks and backslashes between)?"""
    quote = part.rfind('"')
    return quote > 0 and part[:quote].rstrip(" \t\\").endswith((":", "="))


@functools.cache
def _default() -> Redactor:
    # Built on first use, not at import: compiling the combined regex costs ~20 ms, and most
    # processes that import this module (via tf_fsm.storage.store) build their own Redactor instead.
    return Redactor()


def redact(text: str) -> str:
    """Redact with the known patterns only (no environment values)."""
    return _default()(text)
