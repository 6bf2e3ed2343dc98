"""/v1/models through the official openai client: every id a client may send as model=, with its kind."""

from __future__ import annotations

import openai
import pytest

from voxlane.config import MODEL_ALIASES, SPEECH_MODEL, SPEECH_MODEL_ALIASES
from voxlane.models import installed_names

TRANSCRIPTION = ("whisper-tiny.en", *MODEL_ALIASES)
SPEECH = (SPEECH_MODEL, *SPEECH_MODEL_ALIASES)


def test_the_list_holds_every_model_and_alias_with_its_kind(client) -> None:
    models = client.models.list().data
    ids = [m.id for m in models]
    # The served model, then the other installed ones (and those of the Hugging Face cache), then the aliases.
    assert ids[0] == "whisper-tiny.en" and set(installed_names()) <= set(ids[: ids.index(MODEL_ALIASES[0])])
    others = [m.id for m in models[1 : ids.index(MODEL_ALIASES[0])]]
    assert ids[len(others) + 1 :] == [*MODEL_ALIASES, *SPEECH]
    assert {m.id: m.kind for m in models} == {
        **dict.fromkeys([*TRANSCRIPTION, *others], "transcription"),
        **dict.fromkeys(SPEECH, "speech"),
    }
    assert {m.id: m.root for m in models} == {
        **dict.fromkeys(TRANSCRIPTION, "whisper-tiny.en"),
        **{name: name for name in others},
        **dict.fromkeys(SPEECH, "piper"),
    }
    assert {m.id: m.loaded for m in models if m.root == "whisper-tiny.en" or m.kind == "speech"} == dict.fromkeys(
        [*TRANSCRIPTION, *SPEECH], True
    )  # the default model is preloaded, the speech model always
    assert {(m.object, m.owned_by) for m in models} == {("model", "voxlane")}
    assert all(isinstance(m.created, int) and m.created > 0 for m in models)


@pytest.mark.parametrize(
    ("model_id", "kind"),
    [
        ("tts-1", "speech"),
        ("gpt-4o-mini-tts", "speech"),
        ("whisper-1", "transcription"),
        ("gpt-4o-transcribe", "transcription"),
    ],
)
def test_retrieve_answers_for_the_id_sent(client, model_id: str, kind: str) -> None:
    model = client.models.retrieve(model_id)
    assert (model.id, model.object, model.kind) == (model_id, "model", kind)


def test_every_listed_id_is_accepted_by_its_endpoint(client, dev_set) -> None:
    clip = next(c for c in dev_set if c.path.name == "cmu_goforward.wav")
    for model in client.models.list().data:
        if model.kind == "transcription" and model.root != "whisper-tiny.en":
            continue  # the other installed models: tests/e2e/test_models_by_name.py
        if model.kind == "transcription":
            text = client.audio.transcriptions.create(model=model.id, file=clip.path.open("rb")).text
            assert "forward" in text.lower(), model.id
        else:
            audio = client.audio.speech.create(model=model.id, voice="alloy", input="Hi.", response_format="wav")
            assert audio.content[:4] == b"RIFF", model.id


def test_a_model_name_too_long_for_the_filesystem_is_a_404(client) -> None:
    for name in ("m" * 1500, "org/" + "r" * 1500):
        with pytest.raises(openai.NotFoundError) as exc:
            client.models.retrieve(name)
        assert exc.value.body["code"] == "model_not_found"
    with pytest.raises(openai.BadRequestError):  # an unknown voice, as any other
        client.audio.speech.create(model="tts-1", voice="v" * 1500, input="Hi.")


def test_an_unknown_model_is_a_404_that_lists_the_ids(client) -> None:
    with pytest.raises(openai.NotFoundError) as exc:
        client.models.retrieve("gpt-5-transcribe")
    error = exc.value.body
    assert isinstance(error, dict)
    assert (error["type"], error["code"], error["param"]) == ("invalid_request_error", "model_not_found", "model")
    assert "gpt-5-transcribe" in error["message"] and "tts-1" in error["message"]
