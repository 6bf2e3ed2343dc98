"""Settings: one declaration per setting gives the flag, the variable, the check and the tables of settings."""

from __future__ import annotations

import os
from dataclasses import fields
from pathlib import Path

import pytest

from voxlane.cli import build_parser
from voxlane.config import (
    EXPERT_SETTINGS,
    SETTINGS,
    USER_SETTINGS,
    EngineConfig,
    ServerConfig,
    defaults_for,
    expert_table,
    host_device,
    serve_config_from_args,
    settings_table,
)

ROOT = Path(__file__).resolve().parents[2]


def config(*flags: str, env: dict[str, str] | None = None) -> ServerConfig:
    return serve_config_from_args(build_parser().parse_args(["serve", *flags]), env or {})


def test_defaults_are_the_dataclass_defaults() -> None:
    built = config()
    server, engine = ServerConfig(), EngineConfig(model_path="")
    for s in SETTINGS:
        owner, default = (built, server) if s.owner is ServerConfig else (built.engine, engine)
        expected = s.default  # a setting by device of the engine stays None until Whisper is placed
        if s.flag.by_device and s.owner is ServerConfig:
            expected = getattr(defaults_for(host_device("auto")), s.name)
        assert getattr(owner, s.name) == getattr(default, s.name) == expected, s.option
    assert Path(built.engine.model_path, "model.bin").is_file()
    assert built.engine.tts_preload is not None


def test_every_field_but_the_derived_ones_is_a_setting() -> None:
    derived = {"engine", "text_workers", "model_path", "tts_preload", "warm_up_beam_sizes", "api_keys"}
    derived |= {"whisper", "voices", "aliases", "hub"}  # --model, --voice, --model-alias resolved; HF_* variables
    derived |= {
        "decoder_threads",
        "doubt_log_prob",
        "tts_cost_headroom",
        "worker_niceness",
        "blas_threads",
    }  # constants
    declared = {f.name for cls in (ServerConfig, EngineConfig) for f in fields(cls)} - derived
    assert declared == {s.name for s in SETTINGS}


def test_env_sets_a_value_and_the_flag_beats_it() -> None:
    env = {
        "VOXLANE_ENGINE_WORKERS": "3",
        "VOXLANE_MAX_UPLOAD_MB": "1.5",
        "VOXLANE_TTS_ORDER": "fifo",
        "VOXLANE_PORT": "9000",
    }
    from_env = config(env=env)
    assert from_env.engine.engine_workers == 3
    assert from_env.max_upload_mb == 1.5
    assert from_env.engine.tts_order == "fifo"
    assert from_env.port == 9000
    flagged = config("--engine-workers", "1", "--port", "9001", env=env)
    assert flagged.engine.engine_workers == 1
    assert flagged.port == 9001
    assert flagged.max_upload_mb == 1.5  # no flag: the variable still counts


def test_data_dir_is_expanded(tmp_path: Path) -> None:
    assert config("--data-dir", "~/voices-here").data_dir == str(Path("~/voices-here").expanduser())
    assert config(env={"VOXLANE_DATA_DIR": str(tmp_path)}).data_dir == str(tmp_path)


@pytest.mark.parametrize(
    ("flags", "env", "message"),
    [
        (["--engine-workers", "0"], {}, "--engine-workers must be at least 1, not 0"),
        (
            [],
            {"VOXLANE_ENGINE_WORKERS": "-1"},
            "--engine-workers must be at least 1, not -1 (from VOXLANE_ENGINE_WORKERS)",
        ),
        ([], {"VOXLANE_MAX_BATCH_SIZE": "many"}, "--max-batch-size takes a whole number such as 8"),
        (["--device", "gpu"], {}, "--device must be 'cpu', 'cuda' or 'auto', not 'gpu'"),
        (["--max-upload-mb", "0"], {}, "--max-upload-mb must be above 0"),
        (["--max-batch-wait-ms", "-1"], {}, "--max-batch-wait-ms must be 0 or more"),
        (["--port", "70000"], {}, "--port must be at most 65535"),
        ([], {"VOXLANE_PORT": "abc"}, "VOXLANE_PORT='abc' is not an integer; --port takes a whole number"),
        (["--port", "80.5"], {}, "--port '80.5' is not an integer"),
        (
            [],
            {"VOXLANE_REQUEST_TIMEOUT_S": "soon"},
            "VOXLANE_REQUEST_TIMEOUT_S='soon' is not a number; --request-timeout-s takes a number",
        ),
        ([], {"VOXLANE_MAX_AUDIO_DURATION_S": "nan"}, "--max-audio-duration-s takes a number"),
        (["--chunking-strategy", "vad"], {}, "--chunking-strategy must be 'none' or 'auto', not 'vad'"),
        (["--tts-order", "lifo"], {}, "--tts-order must be 'deadline' or 'fifo', not 'lifo'"),
        (
            [],
            {"VOXLANE_AUDIO_PREPROCESS_POOL": "gpu"},
            "--audio-preprocess-pool must be 'thread' or 'process', not 'gpu' (from VOXLANE_AUDIO_PREPROCESS_POOL)",
        ),
        (["--log-level", "loud"], {}, "--log-level must be 'debug', 'info', 'warning' or 'error'"),
    ],
)
def test_a_bad_value_names_the_flag(flags: list[str], env: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError) as exc:
        config(*flags, env=env)
    assert message in str(exc.value)


def test_a_model_path_that_is_not_a_model_directory(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"--model .* is not a CTranslate2 Whisper model directory"):
        config("--model", str(tmp_path))
    with pytest.raises(ValueError, match=r"\(from VOXLANE_MODEL\)"):
        config(env={"VOXLANE_MODEL": str(tmp_path)})


def test_a_bad_env_value_does_not_break_the_parser() -> None:
    args = build_parser().parse_args(["serve"])  # the variables are read later, by serve_config_from_args
    with pytest.raises(ValueError, match="VOXLANE_ENGINE_THREADS='two'"):
        serve_config_from_args(args, {"VOXLANE_ENGINE_THREADS": "two"})


def _help(flag: str, capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", flag])
    return capsys.readouterr().out


def test_serve_help_lists_the_user_settings_in_groups(capsys: pytest.CaptureFixture[str]) -> None:
    out = _help("--help", capsys)
    flags = [line for line in out.splitlines() if line.startswith("  --")]
    assert len(flags) <= 35
    text = " ".join(out.split())  # argparse wraps lines
    for s in USER_SETTINGS:
        assert f"(default: {s.shown_default}; env {s.env})" in text, s.option
    listed = {line.split()[0] for line in flags}
    assert listed == {s.option for s in USER_SETTINGS} | {"--help-all"}
    assert not listed & {s.option for s in EXPERT_SETTINGS}
    for group in ("server:", "limits:", "models:", "ASR:", "TTS:", "realtime:", "scale-out:", "GPU:"):
        assert f"\n{group}\n" in out
    assert "--help-all" in text


def test_serve_help_all_lists_every_setting_with_its_variable(capsys: pytest.CaptureFixture[str]) -> None:
    text = " ".join(_help("--help-all", capsys).split())
    for s in SETTINGS:
        assert f"(default: {s.shown_default}; env {s.env})" in text, s.option
    assert "min(cpu count, 2)" in text and "~/.local/share/voxlane" in text


def test_an_expert_knob_is_set_by_its_flag_and_its_variable() -> None:
    assert config("--max-queued-windows", "7").max_queued_windows == 7
    assert config(env={"VOXLANE_TTS_ORDER": "fifo"}).engine.tts_order == "fifo"


def _table(text: str) -> str:
    start = text.index("| flag | environment | default |")
    end = text.find("\n\n", start)
    return text[start : end + 1 if end >= 0 else len(text)]


def test_readme_table_is_the_rendered_one() -> None:
    assert _table((ROOT / "README.md").read_text()) == settings_table(), (
        "README.md's settings table differs from voxlane/config: paste `python -m voxlane.config` over it"
    )


def test_engine_config_doc_table_is_the_rendered_one() -> None:
    assert _table((ROOT / "docs" / "engine-config.md").read_text()) == expert_table(), (
        "docs/engine-config.md's table differs from voxlane/config: paste `python -m voxlane.config --expert` over it"
    )


def test_api_keys_come_from_the_flag_the_variable_and_the_file(tmp_path: Path) -> None:
    assert config().api_keys == ()
    assert config("--api-key", " key-a, key-b ,").api_keys == ("key-a", "key-b")
    assert config(env={"VOXLANE_API_KEY": "key-env"}).api_keys == ("key-env",)
    keys_file = tmp_path / "keys"
    keys_file.write_text("# team keys\nkey-c\n\n  key-d  \nkey-a\n")
    both = config("--api-key", "key-a", "--api-keys-file", str(keys_file))
    assert both.api_keys == ("key-a", "key-c", "key-d")
    assert config(env={"VOXLANE_API_KEYS_FILE": str(keys_file)}).api_keys == ("key-c", "key-d", "key-a")


def test_api_keys_never_show_in_the_config_repr(tmp_path: Path) -> None:
    built = config("--api-key", "key-secret-1")
    assert built.api_keys == ("key-secret-1",)
    assert "key-secret-1" not in repr(built)


@pytest.mark.parametrize(
    ("flags", "content", "message"),
    [
        (["--api-key", " , "], None, "--api-key holds no key"),
        (["--api-keys-file", "KEYS"], "# only a comment\n\n", "holds no key; write one key a line"),
        (["--api-keys-file", "KEYS"], "open sesame\n", "an API key contains a space"),
        (["--api-keys-file", "MISSING"], None, "cannot be read (FileNotFoundError)"),
    ],
)
def test_bad_api_keys_stop_the_server(tmp_path: Path, flags: list[str], content: str | None, message: str) -> None:
    if content is not None:
        (tmp_path / "KEYS").write_text(content)
    flags = [str(tmp_path / f) if f in ("KEYS", "MISSING") else f for f in flags]
    with pytest.raises(ValueError) as exc:
        config(*flags)
    assert message in str(exc.value)
    assert "sesame" not in str(exc.value)  # the key itself is never shown


@pytest.mark.parametrize(
    ("flags", "env", "expected"),
    [
        ([], {}, False),
        (["--metrics-need-key"], {}, True),
        ([], {"VOXLANE_METRICS_NEED_KEY": "true"}, True),
        ([], {"VOXLANE_METRICS_NEED_KEY": "0"}, False),
        (["--metrics-need-key", "off"], {"VOXLANE_METRICS_NEED_KEY": "yes"}, False),
    ],
)
def test_a_switch_is_on_alone_or_takes_a_value(flags: list[str], env: dict[str, str], expected: bool) -> None:
    assert config(*flags, env=env).metrics_need_key is expected


def test_a_bad_switch_value_names_the_flag() -> None:
    with pytest.raises(ValueError, match="VOXLANE_METRICS_NEED_KEY='maybe' is not a switch value"):
        config(env={"VOXLANE_METRICS_NEED_KEY": "maybe"})


def test_the_settings_by_device_are_resolved_where_whisper_runs() -> None:
    engine = config().engine
    assert (engine.device, engine.compute_type, engine.engine_workers, engine.max_batch_size) == (
        "auto",
        "auto",
        None,
        None,
    )
    assert not engine.is_placed
    cpu, cuda = engine.placed("cpu", "int8"), engine.placed("cuda", "float16")
    assert (cpu.engine_workers, cpu.max_batch_size, cpu.device, cpu.compute_type) == (2, 8, "cpu", "int8")
    assert (cuda.engine_workers, cuda.max_batch_size, cuda.device, cuda.compute_type) == (4, 16, "cuda", "float16")
    assert (cpu.live_batch_size, cuda.live_batch_size) == (1, 16)  # finals share batches on a GPU only
    assert cpu.is_placed and cuda.is_placed
    chosen = config("--engine-workers", "3", "--max-batch-size", "32", "--live-batch-size", "4").engine
    chosen = chosen.placed("cuda", "float16")
    assert (chosen.engine_workers, chosen.max_batch_size, chosen.live_batch_size) == (3, 32, 4)


def test_a_gpu_machine_feeds_the_gpu_from_every_core(monkeypatch: pytest.MonkeyPatch) -> None:
    import voxlane.config.device as device

    monkeypatch.setattr(device, "nvidia_gpu_present", lambda: False)
    assert (config().audio_preprocess_pool, config().audio_preprocess_workers) == (
        "thread",
        min(os.cpu_count() or 1, 2),
    )
    gpu = config("--device", "cuda")
    assert (gpu.audio_preprocess_pool, gpu.audio_preprocess_workers) == ("process", max(1, device.CORES - 2))
    assert config("--device", "cpu").audio_preprocess_pool == "thread"
    # Short windows and short live finals were measured on the CPU only.
    assert (gpu.engine.short_window_pad_s, gpu.engine.short_final_pad_s) == (0.0, 0.0)
    cpu = config("--device", "cpu").engine
    assert (cpu.short_window_pad_s, cpu.short_final_pad_s) == (5.0, 10.0)
    placed = config().engine.placed("cpu", "int8")  # --device auto: by the device the engine finds
    assert (placed.short_window_pad_s, placed.short_final_pad_s) == (5.0, 10.0)
    assert config("--short-window-pad-s", "2").engine.placed("cuda", "float16").short_window_pad_s == 2.0
    chosen = config("--device", "cuda", "--audio-preprocess-pool", "thread", "--audio-preprocess-workers", "3")
    assert (chosen.audio_preprocess_pool, chosen.audio_preprocess_workers) == ("thread", 3)
    monkeypatch.setattr(device, "nvidia_gpu_present", lambda: True)
    assert config().audio_preprocess_pool == "process"  # --device auto with an NVIDIA driver


def test_the_engine_warms_up_the_live_finals_beam() -> None:
    assert config("--realtime-beam-size", "4").engine.warm_up_beam_sizes == (4,)
    assert config("--realtime-beam-size", "0").engine.warm_up_beam_sizes == ()
