"""Reading what people and the assistant say for the outcome rules (pure, no I/O): the user's next prompt about the
previous turn ("that worked", "still failing", "not quite") and the final assistant message admitting a failure
or a partial result (claims of success are not evidence). The rules are named in
:data:`ctxbus.core.outcome_rules.RULES`."""

from __future__ import annotations

import re

from ctxbus.contract.payloads import Outcome

#: only the head of a prompt is read for feedback (the rest is usually a new request or a pasted log)
FEEDBACK_HEAD_CHARS = 300
_META = re.compile(r"^\s*(?:<[a-z][\w-]*>|\[Request interrupted|Caveat:|/[a-z]|This session is being continued)")
_PARTIAL = re.compile(
    r"\bnot quite\b|\balmost\b|\bclose,? but\b|\bcloser\b|\b(?:partly|partially|half) (?:works|working|fixed|there|"
    r"done)\b|\bmostly (?:works|working|fixed|there|good)\b|\b(?:only )?(?:half|part) of (?:it|this|that|them)\b"
)
_POSITIVE = re.compile(r"\b(?:works|worked|working|fixed|better|passes|passing|good|great|progress|builds|compiles)\b")
_BUT = re.compile(r"\b(?:but|except|although|however|though)\b")
_REQUEST = re.compile(r"^\W*(?:can you|could you|please|also|now|let'?s|i'?d like|would you|maybe|let me)\b")
_NEGATED = re.compile(r"(?:\bnot|n't|\bnever|\bno longer)\s+(?:\w+\s+)?$")
_FAILURE = re.compile(
    "|".join(
        (
            r"\bstill\b[^.!?\n]{0,40}\b(?:fail\w*|broken|break\w*|error\w*|crash\w*|wrong|not work\w*|"
            r"doesn'?t work|does not work|same)\b",
            r"\b(?:it|this|that|they|tests?|the build|build|app|page|code|fix|change|everything|still)\s+"
            r"(?:\w+\s+){0,2}?(?:doesn'?t|does not|didn'?t|did not|isn'?t|is not|aren'?t|are not|won'?t|not)\s+"
            r"(?:seem to\s+|actually\s+|really\s+)?(?:work|working|fix|fixed|compile|compiling|build|building|pass|"
            r"passing)\b",
            r"\bnot working\b|\b(?:doesn'?t|does not|didn'?t|did not) work\b|\bno luck\b",
            r"\bstill (?:getting|seeing|get|see|happening|happens|there|the case|occurs|reproduces)\b",
            r"\bnow (?:the \w+ |it |everything |this )?(?:is |are |looks )?(?:blank|empty|gone|broken|missing)\b",
            r"\b(?:doesn'?t|does not|didn'?t|isn'?t|is not)\s+(?:look\s+|seem\s+)?(?:right|correct)\b",
            r"\b(?:that|this|it|you|your (?:change|fix|edit|commit))\s+(?:just\s+)?(?:broke|breaks|has broken|"
            r"introduced (?:a |an )?(?:bug|regression|error))\b",
            r"\b(?:same|new|another) (?:error|exception|failure|traceback)\b|\bsame (?:issue|problem|bug)\b",
            r"\b(?:i'?m|i am|i|we|we'?re|still|now)\s+(?:still\s+)?(?:getting|seeing|get|see)\s+(?:an?\s+|the\s+|"
            r"this\s+|these\s+|same\s+|new\s+)*(?:error|errors|exception|traceback|crash|failure|failures)\b",
            r"\b(?:tests?|the tests|build|the build|ci|pipeline|app|server|page)\s+(?:is|are)?\s*(?:still\s+)?"
            r"(?:failing|fails|failed|red|broken|crashing|crashes)\b",
            r"^(?:no|nope|nah)\s*[,.!]",
            r"\b(?:that'?s|that is|this is|it'?s|it is)\s+(?:still\s+)?(?:wrong|incorrect|not (?:right|correct|what "
            r"i (?:asked|wanted|meant)))\b",
            r"\b(?:revert|undo|roll back|rollback)\s+(?:that|this|it|your|the|those|these|all)\b",
        )
    )
)
_SUCCESS = re.compile(
    "|".join(
        (
            r"\b(?:that|this|it|which|everything|all)\s+(?:now\s+)?(?:worked|works|is working|fixed it|did it|"
            r"did the trick|solved it)\b",
            r"\b(?:works|working|fixed|passing|passes|green)\s+now\b",
            r"\bnow (?:it |everything )?(?:works|passes|builds|compiles)\b",
            r"\b(?:works|worked) (?:great|perfectly|fine|like a charm|as expected|for me)\b",
            r"\b(?:lgtm|looks good|looks great|ship it|nailed it|problem solved|all (?:tests )?(?:pass|passing|green)|"
            r"tests (?:now )?pass)\b",
            r"\b(?:you|that|this) fixed (?:it|the)\b",
            # a verdict word said and thanked for: "fixed, thanks", "solved! thank you"
            r"\b(?:fixed|solved|resolved|works)\s*[,.!]+\s*(?:thanks|thank you|thx|ty|cheers)\b",
            r"^\W*(?:fixed|solved|resolved)\W*$",
            r"\ball good\b|\bmuch better\b|\b(?:does|did|is) (?:exactly )?what i (?:wanted|asked for|needed)\b",
            r"\bexactly what i (?:wanted|needed|asked for)\b",
        )
    )
)
_APPROVAL = re.compile(
    r"^\W*(?:perfect|excellent|awesome|great|nice|brilliant|fantastic|amazing|wonderful|cool|sweet|thanks|"
    r"thank you|thx|ty)\b"
)
_HEDGE = re.compile(r"\b(?:make sure|ensure|check|verify|see if|whether|if|until|so that|confirm)\b[^.!?]*$")
_CLAUSE = re.compile(r",\s*but\b|;|\bbut\b")
#: a failure phrase right after these words describes a wish or a condition, not what happened
_CONDITION = re.compile(r"\b(?:so|when|if|unless|until|should|make|ensure|whenever|to|that)\s+(?:the\s+)?$")


def _normalise(text: str) -> str:
    return " ".join(text.replace("\u2019", "'").replace("\u2018", "'").lower().split())


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?\n])\s+", text) if s.strip()]


def _positive_but(head: str) -> str | None:
    for sentence in _sentences(head):
        for positive in _POSITIVE.finditer(sentence):
            if _NEGATED.search(sentence[: positive.start()]):
                continue
            rest = sentence[positive.end() :]
            but = _BUT.search(rest[:80])
            if but and not _REQUEST.match(rest[but.end() :]):
                return sentence[positive.start() : positive.end() + but.end()]
    return None


def read_feedback(prompt: str) -> tuple[Outcome, str, str] | None:
    """(outcome, rule, phrase) when the prompt is explicit feedback about the previous turn, else None."""
    if not isinstance(prompt, str) or _META.match(prompt):
        return None
    head = _normalise(prompt[:FEEDBACK_HEAD_CHARS])
    partial = _PARTIAL.search(head)
    if partial:
        return Outcome.PARTIAL, "user_reports_partial", partial.group(0)
    phrase = _positive_but(head)
    if phrase:
        return Outcome.PARTIAL, "user_reports_partial", phrase
    for failure in _FAILURE.finditer(head):
        if not _CONDITION.search(head[max(0, failure.start() - 12) : failure.start()]):
            return Outcome.FAILED, "user_reports_failure", failure.group(0)
    for sentence in _sentences(head):
        for clause in _CLAUSE.split(sentence):
            success = _SUCCESS.search(clause)
            if success and not clause.rstrip().endswith("?") and not _HEDGE.search(clause[: success.start()]):
                return Outcome.SUCCESSFUL, "user_confirms_success", success.group(0)
    approval = _APPROVAL.match(head)
    if approval and not head.split(".")[0].rstrip().endswith("?"):
        return Outcome.SUCCESSFUL, "user_approves", approval.group(0).strip(" ,.!")
    return None


# -- the final assistant message ------------------------------------------------------------------------------

_ASSISTANT_PARTIAL = re.compile(
    r"\b(?:partially|partly)\b|\b(?:one|two|three|[1-9]\d*|some|a few|several) (?:of the )?(?:tests?|cases?|"
    r"checks?|specs?) (?:still |are still |is still )?(?:fail|failing|remain)|(?<!no )\bremaining (?:failure|"
    r"failures|issue|issues|problem|errors?)\b|\bnot yet (?:implemented|finished|complete|done)\b|\bis not (?:yet )?"
    r"implemented\b"
)
_ASSISTANT_FAILURE = re.compile(
    r"\bi (?:was|am|'m) (?:unable|not able) to\b|\bi (?:wasn't|was not) able to\b|\bi (?:could not|couldn't|can't|"
    r"cannot) (?:get|make|fix|resolve|"
    r"reproduce|figure out|determine|complete|finish)\b|\b(?:tests?|build|suite|it|the fix) (?:is |are )?still "
    r"(?:fail|failing|broken|erroring)\b|\bi'm stuck\b"
)


_SOME_OF = re.compile(
    r"\b(?:migrated|fixed|updated|converted|ported|implemented|moved|handled|covered) (\d+) (?:of|out of) "
    r"(?:the )?(\d+)\b"
)


def read_assistant_report(text: str) -> tuple[Outcome, str, str] | None:
    """(outcome, rule, phrase) when the final assistant message admits a failure or a partial result."""
    body = _normalise(text or "")
    partial = _ASSISTANT_PARTIAL.search(body)
    if partial:
        return Outcome.PARTIAL, "assistant_reports_partial", partial.group(0)
    for some in _SOME_OF.finditer(body):
        if int(some.group(1)) < int(some.group(2)):
            return Outcome.PARTIAL, "assistant_reports_partial", some.group(0)
    failure = _ASSISTANT_FAILURE.search(body)
    if failure:
        return Outcome.FAILED, "assistant_reports_failure", failure.group(0)
    return None
