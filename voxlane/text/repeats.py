"""Words that repeat themselves: what Whisper reads when it loops on audio cut short."""

from __future__ import annotations


def plain_words(words: list[str]) -> list[str]:
    """Words as compared: lower case, without the punctuation Whisper puts on them."""
    return [w.strip(".,!?;:").lower() for w in words]


def cut_repeats(words: list[str]) -> list[str]:
    """``words`` up to where they start repeating themselves: a phrase said again at once ("go forward
    ten meters go forward"), or a word three times ("6 6 6"). What a partial decode of a few seconds
    often ends in, and what a beam search on a short window may prefer to the right text ("6, 6, 6, 6" for
    "6.")."""
    norm = plain_words(words)
    for i in range(1, len(norm)):
        if i + 1 < len(norm) and norm[i - 1] == norm[i] == norm[i + 1]:
            return words[:i]
        for period in range(2, i + 1):
            m = min(period, 3)
            if i + m <= len(norm) and norm[i : i + m] == norm[i - period : i - period + m]:
                return words[:i]
    return words
