"""Resolve the Apache Kafka server jars from Maven Central once and cache them.

Kafka ships no pip package, and CI may only reach package registries, so the
broker's classpath is built by Maven from a generated pom. A marker file makes
every later start skip Maven entirely (no network, no mvn process).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ckptlog.broker.errors import INSTALL_HINT, JarFetchError, ToolMissingError

KAFKA_VERSION = "4.1.1"
SCALA_VERSION = "2.13"
LOG4J_VERSION = "2.25.3"
SLF4J_VERSION = "2.0.17"  # pinned: otherwise Maven picks 1.7.x and log4j-slf4j2 does not bind
MIN_JAVA = 17
MARKER_NAME = "ckptlog-jars.json"
MVN_TIMEOUT_S = 900.0

Log = Callable[[str], None]


def quiet(_: str) -> None:
    """Default progress sink: say nothing."""


def cache_root() -> Path:
    """The jar cache root: $CKPTLOG_CACHE, else ~/.cache/ckptlog."""
    env = os.environ.get("CKPTLOG_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "ckptlog"


def find_tool(name: str, path: str | None = None) -> str:
    """Locate `java` or `mvn`; `path` overrides $PATH (tests pass a fake one)."""
    if name == "java" and path is None and os.environ.get("JAVA_HOME"):
        candidate = Path(os.environ["JAVA_HOME"]) / "bin" / "java"
        if os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which(name, path=path)
    if found is None:
        raise ToolMissingError(f"`{name}` was not found on PATH: {INSTALL_HINT}")
    return found


def java_major(java: str) -> int:
    """The major version of `java`, read from `java -version` (printed on stderr)."""
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ToolMissingError(f"cannot run `{java} -version` ({exc}): {INSTALL_HINT}") from exc
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if match is None:
        raise ToolMissingError(f"cannot tell the version of {java}: {INSTALL_HINT}")
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major  # "1.8" means Java 8


def require_java(path: str | None = None) -> str:
    """Return a java executable that is new enough for Kafka 4.x."""
    java = find_tool("java", path)
    major = java_major(java)
    if major < MIN_JAVA:
        raise ToolMissingError(f"{java} is Java {major}, Kafka 4.x needs Java {MIN_JAVA}+: {INSTALL_HINT}")
    return java


def render_pom(kafka_version: str = KAFKA_VERSION) -> str:
    """A throw-away pom whose runtime dependencies are exactly the broker classpath."""
    deps = [
        ("org.apache.kafka", f"kafka_{SCALA_VERSION}", kafka_version),
        ("org.apache.logging.log4j", "log4j-slf4j2-impl", LOG4J_VERSION),
        ("org.apache.logging.log4j", "log4j-core", LOG4J_VERSION),
        ("org.slf4j", "slf4j-api", SLF4J_VERSION),
    ]
    body = "\n".join(
        f"    <dependency><groupId>{g}</groupId><artifactId>{a}</artifactId><version>{v}</version></dependency>"
        for g, a, v in deps
    )
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0">\n'
        "  <modelVersion>4.0.0</modelVersion>\n"
        "  <groupId>ckptlog</groupId><artifactId>kafka-broker-jars</artifactId>"
        f"<version>{kafka_version}</version>\n"
        "  <packaging>pom</packaging>\n"
        f"  <dependencies>\n{body}\n  </dependencies>\n</project>\n"
    )


@dataclass(frozen=True)
class JarCache:
    """One Kafka version's cached classpath: <root>/kafka-<version>/libs + marker."""

    root: Path
    version: str = KAFKA_VERSION

    @property
    def home(self) -> Path:
        return self.root / f"kafka-{self.version}"

    @property
    def libs(self) -> Path:
        return self.home / "libs"

    @property
    def marker(self) -> Path:
        return self.home / MARKER_NAME

    @property
    def classpath(self) -> str:
        return str(self.libs / "*")

    def is_complete(self) -> bool:
        """True when the marker names this version and every jar it lists exists."""
        try:
            meta = json.loads(self.marker.read_text())
        except (OSError, ValueError):
            return False
        jars = meta.get("jars") if isinstance(meta, dict) else None
        if meta.get("kafka_version") != self.version or not isinstance(jars, list) or not jars:
            return False
        return all((self.libs / str(name)).is_file() for name in jars)

    def write_marker(self) -> None:
        """Record the jar list atomically; written last, so its presence means done."""
        jars = sorted(p.name for p in self.libs.glob("*.jar"))
        tmp = self.marker.with_suffix(".tmp")
        tmp.write_text(json.dumps({"kafka_version": self.version, "jars": jars}, indent=1))
        os.replace(tmp, self.marker)


@contextmanager
def _locked(lock_file: Path) -> Iterator[None]:
    """Serialise fetches of one version across processes (parallel CI jobs, xdist)."""
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_file, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def fetch_jars(
    version: str = KAFKA_VERSION,
    root: Path | None = None,
    path: str | None = None,
    log: Log = quiet,
) -> JarCache:
    """Return a complete cache for `version`, running Maven only if it is missing."""
    cache = JarCache(root if root is not None else cache_root(), version)
    if cache.is_complete():
        return cache
    with _locked(cache.home / ".lock"):
        if cache.is_complete():  # another process finished it while we waited
            return cache
        mvn = find_tool("mvn", path)
        find_tool("java", path)  # mvn itself needs a JDK; fail with the same hint
        log(f"resolving Kafka {version} jars from Maven Central into {cache.libs} ...")
        _run_maven(mvn, cache)
        cache.write_marker()
    return cache


def _run_maven(mvn: str, cache: JarCache) -> None:
    """Run copy-dependencies into a scratch dir, then swap it in whole."""
    pom = cache.home / "pom.xml"
    pom.write_text(render_pom(cache.version))
    partial = cache.home / "libs.partial"
    shutil.rmtree(partial, ignore_errors=True)
    cmd = [
        mvn, "-q", "-B", "-f", str(pom), "dependency:copy-dependencies",
        f"-DoutputDirectory={partial}", "-DincludeScope=runtime",
    ]  # fmt: skip
    try:
        done = subprocess.run(
            cmd, capture_output=True, text=True, timeout=MVN_TIMEOUT_S, check=False,
            stdin=subprocess.DEVNULL, cwd=cache.home,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise JarFetchError(f"Maven failed to run ({exc}); check network access to Maven Central") from exc
    main_jar = partial / f"kafka_{SCALA_VERSION}-{cache.version}.jar"
    if done.returncode != 0 or not main_jar.is_file():
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-20:])
        raise JarFetchError(
            f"Maven could not resolve Kafka {cache.version} (exit {done.returncode}); "
            f"check the version and network access to Maven Central, then retry "
            f"`ckptlog broker fetch`.\n{tail}"
        )
    shutil.rmtree(cache.libs, ignore_errors=True)
    os.replace(partial, cache.libs)
