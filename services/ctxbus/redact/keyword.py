"""The keyword rule: values named by a word that says secret, and high-entropy tokens right after one in prose.

``DB_PASSWORD=…``, ``"api_key": "…"``, ``--token …``, ``password: …``, "the api key is 8f3a…", "the db password is
garbage, use Hx7$mN2!qR9s". Pure and linear time like the rules of :mod:`ctxbus.redact.engine`, which runs it after
them (a value they already replaced is left alone).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from ctxbus.redact.engine import MARK_PREFIX, PRIVATE_MARK, marker, shannon_entropy

#: words in a name that make any value of it a secret
STRONG_WORDS = (
    "passw",
    "pwd",
    "passphrase",
    "secret",
    "private_key",
    "privatekey",
    "private-key",
    "authtoken",
    "auth_token",
    "access_token",
    "refresh_token",
    "id_token",
    "session_token",
    "private_token",
    "api_key",
    "apikey",
    "api-key",
)
#: where a name may say secret (a literal alternation: the regex engine's fast path); ``_is_word`` refines it.
#: Any other of these words (token, key, auth, credential) makes a value a secret when it looks like one: not a
#: word, a path, code or a number, and high-entropy
_WORD = re.compile(r"pass|pwd|secret|token|auth|credential|key")


def _is_word(lowered: str, at: int, word: str) -> bool:
    """Whether ``word`` found at ``at`` says secret: not "tokenizer", "author", "keyboard", "monkey", "passage"."""
    after = lowered[at + len(word) : at + len(word) + 1]
    before = lowered[at - 1 : at] if at else ""
    if word == "token":
        return not lowered.startswith("tokeniz", at)
    if word == "auth":
        return not lowered.startswith("author", at)
    if word == "key":
        return not after.isalpha() and (not before.isalpha() or lowered.endswith(_KEY_PREFIXES, 0, at))
    if word == "pass":
        if lowered.startswith(("passw", "passphrase"), at):
            return True
        return not after.isalpha() and not before.isalpha()
    return True


_KEY_PREFIXES = ("api", "access", "secret", "private", "signing", "encryption", "master", "account")
_IDENT_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-"
_IDENT_AFTER = re.compile(r"[A-Za-z0-9_.-]{0,64}")
#: after a name: optional closing quote, an assignment, the value (quoted, or bare up to a delimiter)
_ASSIGN = re.compile(
    r"""\\?["']?[ \t]{0,4}(?:=>|:=|=|:|[ \t])[ \t]{0,4}(?:"""
    r"""\\?"(?P<dq>[^"\\\n]{1,512})\\?"|'(?P<sq>[^'\n]{1,512})'|(?P<bare>[^\s"'`,;}{)(\]\[<>&|]{1,512}))"""
)
#: a token in prose right after a secret word ("the api key is 8f3a…", "token: abc…")
_NEAR_TOKEN = re.compile(r"(?<![A-Za-z0-9+/=_.~-])[A-Za-z0-9+/=_.~-]{16,512}")
#: a password as people make them up: letters of both cases, a digit and a symbol, 8 to 64 characters, one word
_PASSWORD_SHAPED = re.compile(
    r"(?<![^\s'\"`(])(?=[^\s'\"`]*[a-z])(?=[^\s'\"`]*[A-Z])(?=[^\s'\"`]*\d)(?=[^\s'\"`]*[!@#$%^&*?~+=])"
    r"[^\s'\"`,;)]{8,64}(?![^\s'\"`,;).])"
)
#: names after which a password-shaped token anywhere in the sentence is taken as the password
_PASSWORD_WORD = re.compile(r"passw|pwd|passphrase")
_SENTENCE_END = re.compile(r"[\n.!?]\s")
#: how far into the sentence after a password word a password-shaped token is looked for
_SENTENCE_REACH = 120
_PLACEHOLDER = re.compile(
    r"(?i)none|null|nil|true|false|undefined|empty|redacted|required|optional|string|str|bytes|int|bool|"
    r"secretstr|any|object|number|boolean|password|secret|token|x{3,}|\*+|\.{2,}|-+|_+|\[[^\]]*\]|"
    r"<[^>]*>?|\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|\{\{.*\}\}|%[sd]|\{[^}]*\}?|os\.environ.*|process\.env.*|env\(.*"
)
#: a word of prose after a password word: what may be a made-up password (``Kettle-Otter-3311``, ``copper.lantern.73``)
_PROSE_WORD = re.compile(r"[^\s'\"`,;()<>\[\]{}]+")
#: how many words may stand between a password word and the password ("password for staging is …")
_WORDS_BETWEEN = 3
_SEPARATORS = frozenset("-_.!@#$%^&*?~+=")
_PASS_NAME = re.compile(r"(?:.*[_.-])?pass(?:[_.-].*)?|-{1,2}pass")
_CODE_LIKE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+\(?|[A-Za-z_][A-Za-z0-9_]*\(.*")
#: names whose values are hashes or ids, not secrets (``TOKENIZER_SHA256``, ``private_key_id``)
_NOT_SECRET_NAME = re.compile(
    r"sha\d*|hash|digest|checksum|fingerprint|uuid|_id$|-id$|\.id$|_ids?_|_size|_bytes|_count|_len"
)
#: names a prose token may follow ("the api key is …"; not "pass" or a bare "key": too common in prose)
_PROSE_NAME = re.compile(
    rf"secret|token|{_PASSWORD_WORD.pattern}|credential|auth|(?:api|access|signing|private|hmac|encryption)[ _-]?key"
)
#: a bare "key" said to be a value ("the Resend key is …"): the words between
_KEY_IS = re.compile(r"[ \t]+is[ \t]+")
_LINE_START = re.compile(r"(?:^|\n)[ \t]*(?:-[ \t]+|export[ \t]+|\$[ \t]+)?$")
_LOWER_RUN = re.compile(r"[a-z]+")
_NUMBER = re.compile(r"[-+]?(?:0[xob])?[0-9][0-9_.eE+-]*")
_IDENTIFIER = re.compile(r"[A-Z][A-Z0-9_]*[A-Z_]|[A-Za-z]+(?:[-_.][A-Za-z]+)*|[A-Z][a-z]+(?:[A-Z][a-z]+)+")
_SNAKE = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)+|[a-z]+[A-Z][A-Za-z]*")
_HEX = frozenset("0123456789abcdefABCDEF")
#: an environment variable of any name and its bare value, as a shell, a ``.env`` file, a compose list, a YAML
#: ``env:`` block or a JSON ``env`` object writes it (``FURY_PUSH=…``, ``ALGOLIA_ADMIN: …``, ``"X": "…"``); the name
#: starts a line or follows a space, a quote or a parenthesis, the value ends at a space, a quote or the end; with a
#: colon, the name has an underscore or quotes (a one-word name and a colon is a tool's label: ``FAIL: Test…``)
_ENV_ANY = re.compile(
    # (the name's first capital comes first, its look-behind after it: the engine skips to capitals by their class;
    # a look-behind first made the scan four times slower)
    r"""(?P<name>[A-Z](?<![^\s"'(][A-Z])[A-Z0-9_]{2,63})(?P<q>"?)(?P<sep>=|:[ \t]{1,4})"?"""
    r"""(?P<value>[A-Za-z0-9+/=_.~-]{16,512})(?=["'`]?(?:[\s,;)}]|$))""",
    re.MULTILINE,
)
#: parts of a variable's name that say its value is an id, a revision, a place, an option or a label, not a
#: credential (``GIT_SHA``, ``VERCEL_PROJECT_ID``, ``REQUEST_TRACE``, ``JAVA_HOME``, ``NODE_OPTIONS``)
_ENV_PLAIN_PARTS = frozenset(
    {
        "ID",
        "IDS",
        "UUID",
        "GUID",
        "SHA",
        "SHA1",
        "SHA256",
        "SHA512",
        "HASH",
        "DIGEST",
        "CHECKSUM",
        "COMMIT",
        "REV",
        "REVISION",
        "VERSION",
        "TAG",
        "REF",
        "BRANCH",
        "TRACE",
        "SPAN",
        "STAMP",
        "BUILD",
        "RUN",
        "JOB",
        "PIPELINE",
        "PATH",
        "HOME",
        "DIR",
        "ROOT",
        "FILE",
        "URL",
        "URI",
        "HOST",
        "DOMAIN",
        "IMAGE",
        "REGION",
        "ZONE",
        "NAME",
        "USER",
        "USERNAME",
        "EMAIL",
        "CHANNEL",
        "LOCALE",
        "LANG",
        "OPTIONS",
        "OPTS",
        "FLAGS",
        "ARGS",
        "MODE",
        "ENV",
        "LEVEL",
        "FORMAT",
        "TZ",
        "SEED",
    }
)


def _made_up(word: str) -> bool:
    """A password as people make them up from words and digits (``Kettle-Otter-3311``, ``copper.lantern.73``,
    ``Quill-9pine``): 8-64 characters with a small letter, a digit and a separator, and either both cases or two
    separators; not an algorithm (``PBKDF2-SHA256``: no small letter), a setting (``bcrypt-12``), an identifier
    (``reset_flow_v2``), code, a path or a reference."""
    if not 8 <= len(word) <= 64 or word.startswith(("/", "~", ".", "-", "$", "%", MARK_PREFIX)) or "://" in word:
        return False
    if not any(c.islower() for c in word) or not any(c.isdigit() for c in word):
        return False
    separators = sum(1 for c in word if c in _SEPARATORS)
    if not separators or not (any(c.isupper() for c in word) or separators >= 2):
        return False
    return not (_PLACEHOLDER.fullmatch(word) or _CODE_LIKE.fullmatch(word) or _SNAKE.fullmatch(word))


#: the sentence after one naming a password says its value: "the current value is X", "it's currently X"
_VALUE_SAID = re.compile(
    r"(?:the |its )?(?:current |old |new |actual |real )?value is |it'?s (?:currently |now )?|"
    r"it is (?:currently |now )?|(?:currently|right now),? it'?s ",
    re.I,
)
#: how far the sentence naming the password may run on before the one that says its value
_NEXT_SENTENCE_REACH = 240


def _value_in_next_sentence(text: str, end: int) -> tuple[int, int, str] | None:
    """A made-up password the next sentence gives as the value of the password just named ("... db_password into
    common.eyaml. the current value is Hollyhock-Tarn-2291")."""
    stop = _SENTENCE_END.search(text, end, min(len(text), end + _NEXT_SENTENCE_REACH))
    if stop is None or text[stop.start()] == "\n":
        return None
    said = _VALUE_SAID.match(text, stop.end())
    word = _PROSE_WORD.match(text, said.end()) if said is not None else None
    if word is None:
        return None
    value = word.group().rstrip(".:!?")
    return (word.start(), word.start() + len(value), "password-in-prose") if _made_up(value) else None


def _made_up_password(text: str, lowered: str, end: int) -> tuple[int, int, str] | None:
    """A made-up password (:func:`_made_up`) among the first words after a password word (``lowered``, ending at
    ``end``) in the same sentence: "(user claims, password Kettle-Otter-3311)", "the password is copper.lantern.73";
    else the one the next sentence gives as its value (:func:`_value_in_next_sentence`)."""
    if not _PASSWORD_WORD.search(lowered) or lowered.endswith("."):
        return None  # (``password.`` ends its sentence)
    pos = end
    for _ in range(_WORDS_BETWEEN + 1):
        word = _PROSE_WORD.search(text, pos, min(len(text), pos + 80))
        if word is None or "\n" in text[pos : word.start()]:
            return None
        value = word.group().rstrip(".:!?")
        if _made_up(value):
            return word.start(), word.start() + len(value), "password-in-prose"
        if word.group().endswith((".", "!", "?")) and len(value) < len(word.group()):
            break  # the sentence ended
        pos = word.end()
    return _value_in_next_sentence(text, end)


def _random_case(value: str) -> bool:
    """Letters whose case changes as random letters' does (``KxVbGqTm…``): many one- or two-letter lower-case runs
    after a capital, where names (``CamelCase``, ``getHTTPResponse``, ``user_id``) have words."""
    short = sum(
        1 for m in _LOWER_RUN.finditer(value) if len(m.group()) <= 2 and m.start() and value[m.start() - 1].isupper()
    )
    return short >= max(3, len(value) // 8)


@dataclass(frozen=True, slots=True)
class KeywordRule:
    """Values of names that say secret (``DB_PASSWORD=…``, ``"api_key": "…"``, ``--token …``, ``password: …``) and
    high-entropy tokens right after a secret word in prose. ``entropy`` measures a candidate (detect-secrets'
    Shannon entropy in the default redactor); ``base64_limit``/``hex_limit`` are its thresholds at 40 characters
    and more (shorter tokens cannot reach them: the limit scales with ``log2(len)``)."""

    entropy: Callable[[str], float] = shannon_entropy
    base64_limit: float = 4.5
    hex_limit: float = 3.0
    #: how far after the name a prose token may start
    near: int = 24

    def apply(self, text: str, found: Counter[str]) -> str:
        text = self._env_values(text, found)
        lowered = text.lower()
        if not _WORD.search(lowered):
            return text
        out: list[str] = []
        kept = pos = 0
        while (hit := _WORD.search(lowered, pos)) is not None:
            pos = hit.end()
            if not _is_word(lowered, hit.start(), hit.group()):
                continue
            left = max(0, hit.start() - 64)
            start = left + len(text[left : hit.start()].rstrip(_IDENT_CHARS))
            end = _IDENT_AFTER.match(text, hit.end()).end()  # type: ignore[union-attr]
            if start < kept or text.endswith(MARK_PREFIX, 0, start):
                continue
            span = self._secret_span(text, text[start:end], end)
            if span is None:
                continue
            s, e, label = span
            out.append(text[kept:s])
            out.append(marker(label))
            found[label] += 1
            kept = pos = e
        if not out:
            return text
        out.append(text[kept:])
        return "".join(out)

    def _env_values(self, text: str, found: Counter[str]) -> str:
        """High-entropy values of environment variables whatever their names (a tool's own credential convention:
        ``BUNDLE_GEM__FURY__IO``, ``SONAR_LOGIN``, ``MEILI_MASTER``), but of names that say id, revision, path or
        option (``_ENV_PLAIN_PARTS``)."""
        if "=" not in text and ":" not in text:
            return text

        def replace(match: re.Match[str]) -> str:
            name, value = match.group("name"), match.group("value")
            if set(name.split("_")) & _ENV_PLAIN_PARTS or value.startswith(("-", ".", "/", "~")):
                return match.group(0)
            if match.group("sep") != "=" and not match.group("q") and "_" not in name:
                return match.group(0)  # ``FAIL: TestParseDuration/1d``, ``WARNING: …``: a word and a colon
            if value.startswith(MARK_PREFIX) or not self._high_entropy(value):
                return match.group(0)
            found["env-secret"] += 1
            start, end = match.span("value")
            return (
                match.group(0)[: start - match.start()] + marker("env-secret") + match.group(0)[end - match.start() :]
            )

        return _ENV_ANY.sub(replace, text)

    def _secret_span(self, text: str, name: str, end: int) -> tuple[int, int, str] | None:
        """Where the secret named by ``name`` (ending at ``end``) is, and its label; None when there is none."""
        lowered = name.lower()
        if _NOT_SECRET_NAME.search(lowered):
            return None
        strong = any(w in lowered for w in STRONG_WORDS) or _PASS_NAME.fullmatch(lowered) is not None
        start = end - len(name)
        assigned = _ASSIGN.match(text, end)
        if assigned is not None:
            group = next(g for g in ("dq", "sq", "bare") if assigned.group(g) is not None)
            value = assigned.group(group)
            operator = text[end : assigned.start(group)]
            by_space = "=" not in operator and ":" not in operator
            at_line_start = _LINE_START.search(text, max(0, start - 16), start) is not None
            # ``KEY=VALUE`` as a shell writes it: at a line's start, or after a space in prose ("push it.
            # GEM_HOST_API_KEY=rubygems_…")
            spaced = start == 0 or text[start - 1].isspace()
            env = (at_line_start or spaced) and name.isupper() and operator == "="
            # a strong name, a space and a quoted value: a key and its value as a command's arguments
            # (``pulumi config set dbPassword 'Wz4!…'``)
            spaced_quote = by_space and strong and group != "bare"
            if not by_space or name.startswith("--") or spaced_quote:
                quoted = group != "bare"
                if not quoted and "=" not in operator and not at_line_start and not name.startswith("--"):
                    strong = False  # "one pass: …", "secret: the gateway's": prose after a colon
                if self._is_secret_value(value, lowered, strong=strong, env=env, quoted=quoted):
                    return assigned.start(group), assigned.end(group), "secret-assignment"
                if not quoted and _PASSWORD_WORD.search(lowered) and _made_up(value.rstrip(".")):
                    # "user app, password: Kettle-Otter-3311": prose after a colon, a made-up password
                    return assigned.start(group), assigned.start(group) + len(value.rstrip(".")), "password-in-prose"
                return None
        # prose: "the api key is 8f3a…", "token abc…": a high-entropy token close after the name
        before = text[max(0, start - 12) : start].lower()
        named = _PROSE_NAME.search(lowered) is not None or _PROSE_NAME.search(before + lowered) is not None
        # "the Algolia key is Xy7…": a bare key said to be a token, only the token right after "is" and not a hash
        said = _KEY_IS.match(text, end) if not named and lowered.endswith("key") else None
        if not named and said is None:
            return None
        near = _NEAR_TOKEN.search(text, end, min(len(text), end + self.near + 512))
        if said is not None and (near is None or near.start() != said.end() or set(near.group()) <= _HEX):
            return None
        if near is None or near.start() - end > self.near:
            # a password-shaped token later in the same sentence ("the db password is garbage, use Hx7$mN2!qR9s")
            shaped = _PASSWORD_SHAPED.search(text, end, min(len(text), end + _SENTENCE_REACH))
            if shaped is None or not _PASSWORD_WORD.search(lowered) or _SENTENCE_END.search(text, end, shaped.start()):
                return _made_up_password(text, lowered, end)
            return shaped.start(), shaped.end(), "password-in-prose"
        between = text[end : near.start()]
        if "\n" in between or len(between.split()) > 3 or not self._high_entropy(near.group()):
            return _made_up_password(text, lowered, end)
        return near.start(), near.end(), "high-entropy-secret"

    def _is_secret_value(self, value: str, name: str, *, strong: bool, env: bool, quoted: bool) -> bool:
        value = value.strip()
        if len(value) < 3 or value.startswith((MARK_PREFIX, PRIVATE_MARK)) or _PLACEHOLDER.fullmatch(value):
            return False
        if not quoted and value.startswith("-"):
            return False  # the next option, not a value: ``--secret --stack dev``
        if "://" in value and "@" not in value:
            return False  # a plain URL (one with a password in it is the url-password rule's)
        if _NUMBER.fullmatch(value) and not (env and strong):
            return False  # ``max_tokens=1024``, ``SECRET_FILE_MODE = 0o600``
        if env:
            return not (value.isupper() and value.replace("_", "").isalpha())  # ``KEY=VALUE``: a placeholder
        if not quoted and (_CODE_LIKE.fullmatch(value) or value.lower() == name.lstrip("-") or _SNAKE.fullmatch(value)):
            return False  # code: ``token=self.token``, ``password=new_password``, ``key=get_key()``
        if _IDENTIFIER.fullmatch(value) and not _random_case(value):
            return False  # a name, not a secret: ``SECRET_ENV = "CTXBUS_GATEWAY_SECRET"``, ``secret: Callable``
        if strong:
            return True
        return self._high_entropy(value, min_len=12)

    def _high_entropy(self, token: str, min_len: int = 16) -> bool:
        token = token.rstrip(".")
        if len(token) < min_len or not any(c.isalpha() for c in token):
            return False
        if not any(c.isdigit() for c in token) and all(len(run) >= 3 for run in _LOWER_RUN.findall(token)):
            return False  # words: CamelCase, snake_case (random letters have short lower-case runs)
        if set(token) <= _HEX:
            return self.entropy(token) >= self.hex_limit
        limit = min(self.base64_limit, 0.85 * math.log2(len(token)))
        return self.entropy(token) >= limit
