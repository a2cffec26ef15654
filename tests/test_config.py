"""The config refuses what would go wrong later, in one line that names the key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hookinbox.config import config_from_mapping, load_config, parse_duration
from hookinbox.errors import ConfigError


def _config(**source: Any) -> dict[str, Any]:
    base = {
        "scheme": "standard-webhooks",
        "secret_env": "HB_X",
        "routes": [{"events": ["*"], "action": "a", "handler": "m.n:f"}],
    }
    base.update(source)
    return {"sources": {"openai": base}}


@pytest.mark.parametrize(
    ("data", "key"),
    [
        (_config(secret="whsec_abc"), "sources.openai.secret"),
        (_config(secret_env="whsec_abcdef"), "sources.openai.secret_env"),
        (_config(secret_env="not a name"), "sources.openai.secret_env"),
        (_config(scheme="carrier-pigeon"), "sources.openai.scheme"),
        (_config(tolerance_seconds=0), "sources.openai.tolerance_seconds"),
        (_config(routes=[{"events": ["*"], "action": "a"}]), "sources.openai.routes.0"),
        (
            _config(
                routes=[{"events": ["*"], "action": "a", "handler": "m:f", "forward": "http://x"}]
            ),
            "sources.openai.routes.0",
        ),
        (
            _config(routes=[{"action": "a", "forward": "ftp://x"}]),
            "sources.openai.routes.0.forward",
        ),
        (
            _config(
                routes=[
                    {"events": ["*"], "action": "a", "handler": "m:f"},
                    {"events": ["*"], "action": "a", "handler": "m:g"},
                ]
            ),
            "sources.openai.routes",
        ),
        ({"database": "mysql://x"}, "database"),
        ({"worker": {"max_attempts": 0}}, "worker.max_attempts"),
        ({"worker": {"backoff_base_seconds": 10, "backoff_max_seconds": 1}}, "worker"),
        ({"wokrer": {}}, "wokrer"),
    ],
)
def test_a_bad_config_is_one_error_naming_the_key(data: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        config_from_mapping(data)
    message = caught.value.message
    assert message.startswith(key), message
    assert "\n" not in message
    assert "whsec_abc" not in message


def test_a_missing_secret_is_refused_at_serve_time_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("HB_X", raising=False)
    config = config_from_mapping(_config())
    with pytest.raises(ConfigError, match=r"^sources\.openai\.secret_env: .*HB_X"):
        config.require_secrets()
    monkeypatch.setenv("HB_X", "whsec_a2V5 whsec_b2xk")
    config.require_secrets()
    assert config.sources["openai"].secrets() == ["whsec_a2V5", "whsec_b2xk"]


def test_routes_match_exact_names_and_globs() -> None:
    config = config_from_mapping(
        _config(
            routes=[
                {"events": ["response.completed"], "action": "exact", "handler": "m:f"},
                {"events": ["response.*"], "action": "glob", "handler": "m:f"},
                {"events": ["*"], "action": "all", "handler": "m:f"},
            ]
        )
    )
    source = config.sources["openai"]
    assert [r.action for r in source.routes_for("response.completed")] == ["exact", "glob", "all"]
    assert [r.action for r in source.routes_for("response.failed")] == ["glob", "all"]
    assert [r.action for r in source.routes_for("batch.done")] == ["all"]


def test_files_that_are_missing_or_not_toml_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "nope.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("database = \n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(bad)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [(90, 90.0), ("90s", 90.0), ("15m", 900.0), ("72h", 259200.0), ("30d", 2592000.0)],
)
def test_durations(text: str | int, seconds: float) -> None:
    assert parse_duration(text) == seconds


def test_a_bad_duration_is_refused() -> None:
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration("soon")


def test_a_source_can_retry_longer_than_the_default_window_but_not_past_key_retention() -> None:
    data = _config(redelivery_window="10d")
    config = config_from_mapping(data)
    assert config.longest_redelivery_window() == 10 * 86400
    with pytest.raises(ConfigError, match=r"^sources\.openai\.redelivery_window "):
        config_from_mapping({**data, "operations": {"key_retention": "7d"}})
