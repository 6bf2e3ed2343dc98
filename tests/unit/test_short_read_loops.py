"""The rule that sends a live final read on a short window back to a 30 s window (``short_read_loops``): the
reads below are what short reads of `voxlane bench realtime`'s finals said (docs/asr-engine.md "Short finals")."""

from __future__ import annotations

from voxlane.runners.whisper_decode import short_read_loops

SURE = -0.3  # a mean token log-probability the decoder is sure of


def test_a_read_that_loops_is_caught() -> None:
    assert short_read_loops("Montreal, Montreal, Montreal, Montreal, Montreal, Montreal,", SURE)
    assert short_read_loops("This is all very whisper-da-da-da-da-da-da-d", SURE)  # inside a word
    assert short_read_loops("Many complicated ideas about the rainbow have been formed. Many complicated ideas", SURE)


def test_a_read_that_says_its_context_again_is_caught() -> None:
    assert short_read_loops("Montreal, forced.", SURE, context="Montreal, forced.")
    assert short_read_loops("a liner. A liner.", SURE, context="Montreal, forced.")


def test_a_read_the_decoder_doubts_is_caught() -> None:
    assert short_read_loops("Ugh, forced.", -1.2)


def test_a_plain_read_passes() -> None:
    assert not short_read_loops("Montreal.", SURE)
    assert not short_read_loops("Um... a liner.", SURE, context="Montreal, forced.")
    assert not short_read_loops("Please call Stella.", -0.9)
    assert not short_read_loops("A well-to-do man.", SURE)
    # A context that loops itself does not condemn every read after it.
    assert not short_read_loops("Forced.", SURE, context="umm... umm... umm...")
