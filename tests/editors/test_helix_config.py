"""Structure of editors/helix/languages.toml, parsed the way Helix reads it (TOML)."""

import pathlib
import tomllib

import pytest

CONFIG = pathlib.Path(__file__).resolve().parents[2] / "editors" / "helix" / "languages.toml"

# Each language trellis has a sensor for, with the language's own server that
# must come first.
LANGUAGES = {
    "rust": "rust-analyzer",
    "python": "pylsp",
    "typescript": "typescript-language-server",
}


@pytest.fixture(scope="module")
def config():
    with CONFIG.open("rb") as file:
        return tomllib.load(file)


def test_trellis_server_runs_trellis_lsp(config):
    server = config["language-server"]["trellis"]
    assert server["command"] == "trellis"
    assert server["args"] == ["lsp"]


def test_only_trellis_server_is_defined(config):
    # The language's own servers come from Helix's built-in defaults; redefining
    # them here would override a user's own settings for them.
    assert set(config["language-server"]) == {"trellis"}


@pytest.mark.parametrize("language, own_server", LANGUAGES.items())
def test_trellis_follows_language_server_with_limited_features(config, language, own_server):
    entries = [entry for entry in config["language"] if entry["name"] == language]
    assert len(entries) == 1, f"exactly one [[language]] entry named {language}"
    servers = entries[0]["language-servers"]
    assert servers[0] == own_server, "the language's own server is listed first"
    assert servers[-1] == {"name": "trellis", "only-features": ["diagnostics", "code-action"]}
    assert len(servers) == 2


def test_no_other_languages_are_touched(config):
    assert sorted(entry["name"] for entry in config["language"]) == sorted(LANGUAGES)
