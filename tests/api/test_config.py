"""Configuration: configs/*.toml, precedence, validation, and the saved effective config."""

from __future__ import annotations

import json
import tomllib
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

from spector_gpu import Config, ConfigError, SpectorMemory, load_config

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def _no_env() -> dict[str, str]:
    return {}


def test_default_toml_mirrors_every_dataclass_default() -> None:
    data = tomllib.loads((CONFIGS / "default.toml").read_text(encoding="utf-8"))
    defaults = Config().to_dict()
    # every section and every key, no more and no less, with the same values
    assert data == defaults
    assert load_config(CONFIGS / "default.toml", environ=_no_env()) == Config()


def test_default_toml_comments_every_setting() -> None:
    for line in (CONFIGS / "default.toml").read_text(encoding="utf-8").splitlines():
        if "=" in line and not line.lstrip().startswith("#"):
            assert "#" in line, f"setting without a unit/meaning comment: {line!r}"


@pytest.mark.parametrize(("name", "device"), [("cpu.toml", "cpu"), ("cuda.toml", "cuda")])
def test_device_profiles_load(name: str, device: str) -> None:
    cfg = load_config(CONFIGS / name, environ=_no_env())
    assert cfg.dense.device == device
    assert cfg.dense.backend == "torch"
    # everything not named in the profile keeps its default
    assert cfg.store == Config().store and cfg.recall == Config().recall


def test_precedence_arguments_env_file_defaults(tmp_path: Path) -> None:
    toml = tmp_path / "c.toml"
    toml.write_text("[recall]\nk = 7\ncandidates = 70\nrrf_k = 30\n", encoding="utf-8")
    env = {"SPECTOR_RECALL__CANDIDATES": "80", "SPECTOR_RECALL__RRF_K": "40"}
    cfg = load_config(toml, environ=env, overrides={"recall": {"rrf_k": 50}})
    assert cfg.recall.k == 7  # file beats defaults (10)
    assert cfg.recall.candidates == 80  # env beats file
    assert cfg.recall.rrf_k == 50  # arguments beat env
    assert cfg.recall.fusion == "cognitive"  # untouched default
    assert load_config(environ=_no_env()) == Config()


def test_env_names_are_section_double_underscore_key() -> None:
    env = {
        "SPECTOR_STORE__DURABILITY": "fsync",
        "SPECTOR_LEXICAL__STEMMING": "false",
        "SPECTOR_STRENGTH__LTP_STEP": "0.25",
        "UNRELATED": "1",
        "SPECTOR_NOSEP": "x",
    }
    cfg = load_config(environ=env)
    assert cfg.store.durability == "fsync"
    assert cfg.lexical.stemming is False
    assert cfg.strength.ltp_step == 0.25


@pytest.mark.parametrize(
    ("overrides", "setting"),
    [
        ({"recall": {"k": 0}}, "recall.k"),
        ({"recall": {"k": "ten"}}, "recall.k"),
        ({"recall": {"k": 2.5}}, "recall.k"),
        ({"recall": {"k": True}}, "recall.k"),
        ({"recall": {"fusion": "sum"}}, "recall.fusion"),
        ({"store": {"durability": "sometimes"}}, "store.durability"),
        ({"store": {"strict": "maybe"}}, "store.strict"),
        ({"store": {"provenance_capacity": -1}}, "store.provenance_capacity"),
        ({"lexical": {"k1": float("nan")}}, "lexical.k1"),
        ({"lexical": {"b": -0.5}}, "lexical.b"),
        ({"strength": {"decay_exponent": False}}, "strength.decay_exponent"),
        ({"embedder": {"name": 3}}, "embedder.name"),
        ({"recall": {"nope": 1}}, "recall.nope"),
        ({"strength": {"forget_factor": 2.0}}, "strength.forget_factor"),
        ({"strength": {"decay_floor": 1.5}}, "strength.decay_floor"),
        ({"lexical": {"b": 1.01}}, "lexical.b"),
        ({"working": {"capacity": 0}}, "working.capacity"),
        ({"nosuch": {"k": 1}}, "nosuch"),
    ],
)
def test_bad_values_raise_config_error_naming_the_setting(
    overrides: dict[str, Any], setting: str
) -> None:
    with pytest.raises(ConfigError, match=setting.replace(".", r"\.")):
        load_config(overrides=overrides, environ=_no_env())


def test_retired_settings_are_ignored_not_refused() -> None:
    # a config.json saved by an older release still names them: it must keep opening
    saved = {"store": {"events": True, "durability": "none"}, "association": {"seeds": 50}}
    cfg = load_config(base=saved, environ=_no_env())
    assert cfg.store.durability == "none"
    assert not hasattr(cfg.store, "events") and not hasattr(cfg.association, "seeds")


def test_working_memory_capacity_comes_from_the_config(tmp_path: Path) -> None:
    with SpectorMemory.open(tmp_path / "s", config={"working": {"capacity": 2}}) as mem:
        ids = [mem.remember_working(f"thought {i}") for i in range(3)]
        assert mem.get(ids[0]) is None
        assert mem.get(ids[2]) is not None


def test_bad_env_value_names_the_setting_and_origin() -> None:
    with pytest.raises(ConfigError, match=r"environment.*recall\.k"):
        load_config(environ={"SPECTOR_RECALL__K": "many"})


def test_bad_file_value_names_the_file_and_setting(tmp_path: Path) -> None:
    toml = tmp_path / "bad.toml"
    toml.write_text('[dense]\nbackend = "annoy"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"bad\.toml.*dense\.backend"):
        load_config(toml, environ=_no_env())
    broken = tmp_path / "broken.toml"
    broken.write_text("[recall\nk = 1\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"broken\.toml"):
        load_config(broken, environ=_no_env())
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "missing.toml", environ=_no_env())


def test_config_is_frozen() -> None:
    cfg = Config()
    with pytest.raises(AttributeError):
        cfg.recall.k = 3  # type: ignore[misc]
    for section in fields(Config):
        assert type(getattr(cfg, section.name)).__dataclass_params__.frozen


def test_effective_config_is_saved_in_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPECTOR_RECALL__CANDIDATES", "33")
    with SpectorMemory.open(
        tmp_path / "s", config={"recall": {"k": 4}, "store": {"durability": "none"}}
    ) as mem:
        assert mem.config.recall.k == 4
        assert mem.config.recall.candidates == 33  # env applies under explicit overrides
        saved = json.loads((tmp_path / "s" / "config.json").read_text(encoding="utf-8"))
        assert saved == mem.config.to_dict()
        assert saved["recall"]["k"] == 4 and saved["recall"]["candidates"] == 33


def test_store_opened_from_a_toml_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPECTOR_RECALL__K", raising=False)
    toml = tmp_path / "c.toml"
    toml.write_text('[recall]\nk = 3\n[store]\ndurability = "none"\n', encoding="utf-8")
    with SpectorMemory.open(tmp_path / "s", config=toml) as mem:
        assert mem.config.recall.k == 3
        ids = mem.remember_batch([f"note number {i}" for i in range(6)])
        assert len(mem.recall("note number")) == 3  # the file's k is the default k
        assert len(ids) == 6


def test_bad_env_refuses_to_open_a_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECTOR_STORE__DURABILITY", "always")
    with pytest.raises(ConfigError, match=r"store\.durability"):
        SpectorMemory.open(tmp_path / "s")
    assert not (tmp_path / "s").exists()  # nothing was created for a refused config


@pytest.mark.parametrize(("durability", "synced"), [("fsync", True), ("flush", False)])
def test_config_json_is_synced_before_its_rename_under_fsync(
    tmp_path: Path, durability: str, synced: bool
) -> None:
    """Power loss after the rename must not leave an empty config.json (the next open would
    refuse the store): under ``fsync`` the file is synced before it replaces the old one, and
    its directory after."""
    from spector_gpu.storage.io import set_observer

    events: list[tuple[str, str]] = []

    class Recorder:
        def on_sync(self, path: str, kind: str) -> None:
            events.append(("sync", Path(path).name))

        def on_dir_sync(self, path: str) -> None:
            events.append(("dir_sync", Path(path).name))

        def on_replace(self, src: str, dst: str) -> None:
            events.append(("replace", Path(dst).name))

        def __getattr__(self, name: str) -> object:
            return lambda *args, **kwargs: None

    previous = set_observer(Recorder())  # type: ignore[arg-type]
    try:
        SpectorMemory.open(tmp_path / "s", config={"store": {"durability": durability}}).close()
    finally:
        set_observer(previous)
    at = events.index(("replace", "config.json"))
    assert (("sync", "config.json.partial") in events[:at]) is synced
    if synced:
        assert ("dir_sync", "s") in events[at:]
