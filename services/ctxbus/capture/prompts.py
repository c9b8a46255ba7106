"""What a user's prompt says beyond its task (pure): an explicit ``remember:``, or a correction or rule about the
assistant's previous turn that would apply again ("no, use pnpm", "never commit to main", "we use X here, not Y").

A one-off redirection ("no, the other file"), small talk ("never mind", "no thanks") and questions are not rules.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ctxbus.redact.engine import strip_private

REMEMBER = re.compile(r"^\s*(?:please\s+)?remember\s*:\s*(?P<text>\S.*)", re.I | re.S)
#: how a clause that states a standing rule begins (after "no,", "please", "and" ...): an instruction, not a story
#: ("the cookie never gets set" is no rule; "never set cookies by hand" is)
_OPENER = re.compile(
    r"^(?:(?:and|also|so|but|please|then|here|just|from now on|going forward|in (?:this|our) (?:repo|project|codebase|"
    r"team|code)|in our \w+|around here)[,:]?\s+)*"
    r"(?:always|never|(?:don'?t|do not)(?! (?:want|need|know|think|see|understand|care|mind|remember|like)\b)|"
    r"stop (?:using|doing|adding|calling|writing|putting|running|committing)|avoid|every \w+(?: \w+){0,3} "
    r"(?:is|are|must|should|goes|go|needs?|has to|have to)\b|"
    r"use (?!(?:the|that|this|these|those|it|a|an|my|your|one)\b)|prefer|"
    r"only (?:use|run|format|touch|edit|change|commit|push|deploy|install|import|call|add|write)\b|"
    r"we (?:always|never|use|don'?t|do not|prefer|only|keep|run|put|write|name|should|must|need to)|"
    r"(?:you|everyone|everything|all \w+) (?:should|must|need to|has to|have to)(?:n'?t| not)?|"
    r"make sure (?:to|you) always|(?:the|our) (?:rule|convention|policy|standard)(?: here)? is (?!in\b|at\b))",
    re.I,
)
#: a standing rule anywhere in a clause: "migrations must never be edited", "X is not allowed", "from now on"
_ANYWHERE = re.compile(
    r"\b(?:(?:should|must|need to|has to|have to) (?:always|never)|must not|mustn'?t|we (?:always|never) \w+|"
    r"(?:is|are) (?:not allowed|forbidden|banned)|from now on|going forward|we \w+\b[^.]{0,80}\beverywhere|"
    r"\bno [\w`'\"][^!?]{0,80}?,? ever|"
    # a scope, then the rule: "in this plugin always use wp_date()", "across the repo never import from tests"
    r"^(?:in|for|across|throughout) (?:this|our|the) [\w-]+(?: [\w-]+)?,? (?:we )?(?:always|never) "
    r"(?!(?:returns?|works?|happens?|fails?|passes?|runs?|gets?|shows?)\b)[a-z]+)\b",
    re.I,
)
#: "X, not Y" / "instead of Y": a preference stated anywhere in the clause
_PREFERENCE = re.compile(r"\b(?:instead of|rather than|over)\b|,\s*not\s+[\w@./:+-]+", re.I)
_CLAUSE = re.compile(
    r"\s*(?:[,;:]|\s[-\u2013\u2014]+\s)\s*|\s+(?:and|so|but)\s+(?=(?:we|you|always|never|don'?t|do not)\b)", re.I
)
#: things in general (a bare plural, no article) that never or always do something: "secrets never go into the image"
_THINGS_NEVER = re.compile(
    r"^(?!(?:the|a|an|this|that|these|those|my|your|our|its|his|her|their|it|some|all)\b)"
    r"(?:[a-z][\w-]* )?[a-z][\w-]*s (?:never|always) [a-z]+\b",
    re.I,
)
#: a reply that opens by rejecting the previous turn
_REJECT = re.compile(r"^\s*(?:actually[\s,]+)?(?:no|nope|nah|wrong|stop|hold on|wait)\b[\s,.!:;-]+", re.I)
#: one-off redirections and small talk: not rules
_ONE_OFF = re.compile(
    r"\b(?:never ?mind|no (?:thanks|worries|problem|need)|the other (?:one|file|function|test)|that one|this one|"
    r"this time|just this|for now|right now|line \d+|"
    r"that file(?! (?:is|gets|will|must|should|has)\b)|wrong file|not that|the previous|go back|undo that|"
    r"revert (?:that|it|this)|don'?t (?:worry|bother|forget)|just (?:the|this|that)|for this (?:one|task|pr|change)|"
    r"(?:on|with) this (?:box|machine|laptop|computer|host|token|password|key)|(?:don'?t|do not) [^.]{0,60}\beither|"
    r"hold off|just tell me|until (?:the )?\d{1,2}(?:st|nd|rd|th)\b)\b",
    re.I,
)
_NEGATIVE = re.compile(
    r"\b(?:never|don'?t|do not|must(?:n'?t| not)|should(?:n'?t| not)|avoid|stop using|no more)\b", re.I
)
#: a sentence ends at . ! or ? and a space, not after an abbreviation (``i.e. shfmt -i 2``)
_SENTENCE = re.compile(r"(?<![\s(]i\.e\.)(?<![\s(]e\.g\.)(?<!\setc\.)(?<!\svs\.)(?<=[.!?])\s+|\n+")
QUOTE_CHARS = 400
#: a rejection sentence this short that opens a prompt says what the rule after it is about
OPENING_CHARS = 80


#: a prompt that only says to go on (after a pause, a compaction, a question): no task of its own
_BARE_GO_ON = re.compile(
    r"^\s*(?:please\s+)?(?:continue|go on|go ahead|proceed|carry on|keep going|resume|next|ok(?:ay)?|yes|yep|sure|"
    r"do it|sounds good|thanks?(?: you)?|lgtm|y)\s*(?:please)?[.!]*\s*$",
    re.I,
)


def bare_go_on(prompt: str) -> bool:
    """Whether a prompt only says to go on ("continue", "ok") or holds no word at all (a thumbs-up, "?"): it names
    no task."""
    return bool(_BARE_GO_ON.match(prompt)) or not any(c.isalnum() for c in prompt)


@dataclass(frozen=True, slots=True)
class Rule:
    """A standing rule the user stated, in the user's words."""

    quote: str
    #: a prohibition ("never", "don't"): a warning; else a principle
    negative: bool


def rejects(prompt: str) -> bool:
    """Whether a prompt opens by rejecting what the assistant just did ("no, don't paper over it ...")."""
    return bool(_REJECT.match(strip_private(prompt)))


def remembered(prompt: str) -> str | None:
    """The text of a ``remember:`` prompt, else None."""
    match = REMEMBER.match(prompt)
    return " ".join(match.group("text").split()) if match else None


#: "don't touch it", "stop doing that": an order about the thing at hand, not a rule for later
_AT_HAND = re.compile(
    r"^\s*(?:please\s+)?(?:don'?t|do not|stop|never)\s+\w+(?:\s+\w+)?\s+(?:it|that|this|them|those|these)"
    r"(?:\s+(?:yet|now|again|for now))?\s*[.!]*\s*$|"
    r"^\s*(?:please\s+)?(?:don'?t|do not)\s+\w+\s+anything(?:\s+(?:yet|now|else|either))?\s*[.!]*\s*$",
    re.I,
)


def _is_rule(sentence: str) -> bool:
    if sentence.rstrip().endswith("?") or _ONE_OFF.search(sentence) or _AT_HAND.match(sentence):
        return False
    clauses = [c for c in _CLAUSE.split(sentence) if c]
    if any(_OPENER.match(c) and not _AT_HAND.match(c) for c in clauses) or _ANYWHERE.search(sentence):
        return True
    return bool(_PREFERENCE.search(sentence)) and any(re.match(r"^(?:we |use |\w+ is )", c, re.I) for c in clauses)


def rule_in(prompt: str) -> Rule | None:
    """The standing rule a prompt after an assistant turn states, else None. The quote is the sentences that
    state it (the rejection that opens it included) and the sentence after each (its reason or the alternative),
    clipped."""
    text = strip_private(prompt).strip()  # what the user marked private is never learned from
    if not text or remembered(text) is not None:
        return None
    sentences = [s.strip() for s in _SENTENCE.split(text) if s.strip()]
    chosen: list[int] = []
    rejected = bool(_REJECT.match(text))
    for i, sentence in enumerate(sentences[:8]):
        body = _REJECT.sub("", sentence, count=1) if i == 0 else sentence
        # after a rejection, what things never or always do is the rule broken ("no, components never inject X")
        if body and (_is_rule(body) or (rejected and _THINGS_NEVER.match(body) and not _ONE_OFF.search(body))):
            chosen.append(i)
    if not chosen:
        return None
    # a rule's next sentence says why, or what to do instead ("... we pin it to a fixed date"): the user's words
    # in full are what a later reader needs, not the imperative alone
    kept = sorted({j for i in chosen for j in (i, i + 1) if j < len(sentences) and not sentences[j].endswith("?")})
    if kept[0] == 1 and _REJECT.match(sentences[0]) and len(sentences[0]) <= OPENING_CHARS:
        kept.insert(0, 0)  # "no floats in lib/ please." opens the rule that follows: what was wrong
    negative = bool(_NEGATIVE.search(" ".join(sentences[i] for i in chosen)))
    quote = " ".join(" ".join(sentences[i] for i in kept).split())[:QUOTE_CHARS]
    return Rule(quote, negative=negative)
