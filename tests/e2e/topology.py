"""The recipe of docs/operations.md on loopback: a real ``redis-server``, a real ``haproxy`` or
``nginx`` and ``contextwarden serve`` processes, each run from the files in ``deploy/`` with only
the addresses changed (the replicas' command is read from ``deploy/docker-compose.yaml``)."""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
REPLICAS = ("cw1", "cw2", "cw3")  # the replicas' names in deploy/, each on port 8080


def free_port() -> int:
    """A port for a server process to bind, below the kernel's ephemeral range: a port the
    kernel handed out (bind to 0) goes back to its pool when released, and a client's
    connection or another server bound to 0 took one before the process bound it (a
    replica failed on "address already in use" while a foreign server answered its /ready)."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768  # Linux's default
    # Below the range when there is room below it; else (every port is ephemeral) anywhere,
    # the bind below still proving the port free.
    ports = range(low - 12000, low) if low >= 13024 else range(20000, 30000)
    pick = random.Random()
    while True:
        port = pick.choice(ports)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port


def binary(name: str) -> str:
    found = shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")
    if found is None:
        pytest.skip(f"{name} is not installed (.ci/run installs it)")
    return found


def wait_for(check: Any, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not happen within {timeout}s")
        time.sleep(0.05)


def accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def serve_command(config: Path, port: int) -> list[str]:
    """The replicas' command in deploy/docker-compose.yaml, its config path and address
    changed; ``contextwarden`` is this environment's."""
    compose = yaml.safe_load((DEPLOY / "docker-compose.yaml").read_text())
    command: list[str] = compose["services"][REPLICAS[0]]["command"]
    assert all(compose["services"][name]["command"] == command for name in REPLICAS)
    changed = {"/etc/contextwarden/config.yaml": str(config), "0.0.0.0": "127.0.0.1"}
    changed["8080"] = str(port)
    argv = [changed.get(word, word) for word in command]
    assert argv[0] == "contextwarden" and argv[1] == "serve", argv
    argv[0] = str(Path(sys.executable).with_name("contextwarden"))
    return argv


def replica_config(upstream: dict[str, Any], redis_url: str, data_dir: Path) -> dict[str, Any]:
    """deploy/contextwarden.yaml with the test's upstream and Redis."""
    config: dict[str, Any] = yaml.safe_load((DEPLOY / "contextwarden.yaml").read_text())
    assert config["checkpoints"]["backend"] == "redis"
    config["checkpoints"]["url"] = redis_url
    return {**config, **upstream, "data_dir": str(data_dir)}


def balancer_config(name: str, listen: int, replicas: list[int]) -> str:
    """deploy/``name`` with its listening address and its replicas' addresses changed."""
    text = (DEPLOY / name).read_text()
    for replica, port in zip(REPLICAS, replicas, strict=True):
        assert text.count(f"{replica}:8080") == 1, (name, replica)
        text = text.replace(f"{replica}:8080", f"127.0.0.1:{port}")
    listen_lines = {
        "bind :8080": f"bind 127.0.0.1:{listen}",
        "listen 8080;": f"listen 127.0.0.1:{listen};",
    }
    for line, local in listen_lines.items():
        text = text.replace(line, local)
    assert "8080" not in text, name
    return text


class Process:
    """A process of the topology, stopped (and its output kept) at the end."""

    def __init__(self, argv: list[str], log: Path, env: dict[str, str] | None = None) -> None:
        self.log = log
        with log.open("ab") as out:
            self.popen = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )

    @property
    def pid(self) -> int:
        return self.popen.pid

    def signal(self, sig: int) -> None:
        if self.popen.poll() is None:
            os.kill(self.popen.pid, sig)

    def stop(self, timeout: float = 30) -> None:
        self.signal(signal.SIGTERM)
        try:
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.signal(signal.SIGKILL)
            self.popen.wait(10)

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def __enter__(self) -> Process:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class Replica(Process):
    def __init__(self, config: dict[str, Any], workdir: Path, name: str) -> None:
        self.port = free_port()
        path = workdir / f"{name}.yaml"
        path.write_text(yaml.safe_dump(config))
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        super().__init__(serve_command(path, self.port), workdir / f"{name}.log", env)
        self.url = f"http://127.0.0.1:{self.port}"

    def ready(self) -> bool:
        if self.popen.poll() is not None:
            raise RuntimeError(f"the replica exited:\n{self.output()[-3000:]}")
        try:
            return httpx.get(f"{self.url}/ready", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False


class Redis(Process):
    """``redis-server`` on a fixed port: stopped, resumed, or started again empty on it."""

    def __init__(self, workdir: Path, port: int | None = None) -> None:
        self.port = port or free_port()
        self.workdir = workdir
        argv = [binary("redis-server"), "--port", str(self.port), "--bind", "127.0.0.1"]
        argv += ["--save", "", "--appendonly", "no", "--dir", str(workdir)]
        super().__init__(argv, workdir / "redis.log")
        self.url = f"redis://127.0.0.1:{self.port}/0"
        wait_for(lambda: accepts(self.port), "redis-server listening")

    def restarted_empty(self) -> Redis:
        self.signal(signal.SIGKILL)
        self.popen.wait(10)
        return Redis(self.workdir, self.port)


class Balancer(Process):
    def __init__(self, kind: str, config: str, workdir: Path, replicas: list[Replica]) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        text = balancer_config(config, self.port, [r.port for r in replicas])
        path = workdir / config
        path.write_text(text)
        if kind == "haproxy":
            argv = [binary("haproxy"), "-db", "-f", str(path)]
        else:
            prefix = workdir / "nginx"
            (prefix / "logs").mkdir(parents=True, exist_ok=True)
            directives = f"daemon off; pid {prefix}/nginx.pid; error_log {prefix}/logs/error.log;"
            argv = [binary("nginx"), "-p", str(prefix), "-c", str(path), "-g", directives]
        super().__init__(argv, workdir / f"{kind}.log")
        wait_for(lambda: accepts(self.port), f"{kind} listening")
