"""Runs the cells: one scripted server in its own process, each implementation in its own worker
process. In a full run every (cell, implementation, repetition) is one worker, and the
implementations of a cell take turns, rotating (A B C, B C A, ...), so machine drift hits all
alike; the median of the repetitions is reported. A quick run gives each implementation one worker
for all its cells. Entry point: ``benchmarks/run``."""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import report
from harness.cells import FULL_CELLS, Cell, Implementation, quick
from harness.probes import PROBES, Probe, quick_probes
from harness.venvs import BENCH_DIR, PEER_REQUIREMENTS, Environment, ensure_peer, main_environment

WORKER = BENCH_DIR / "harness" / "worker.py"
SERVER = BENCH_DIR / "harness" / "server.py"
OUT_DIR = BENCH_DIR / ".out"

Measured = Cell | Probe
"""A row of the report: a cell of the main table or a scale probe (both know their worker spec)."""


@dataclass
class Outcome:
    """Every repetition of one implementation in one cell, or why it could not be measured."""

    results: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None

    def median(self, metric: str) -> float:
        """The median of ``metric`` over the repetitions."""
        return statistics.median(r[metric] for r in self.results)


class Server:
    """The scripted server, in its own process so its CPU never counts against a client."""

    def __init__(self) -> None:
        self.process = subprocess.Popen([sys.executable, str(SERVER)], stdout=subprocess.PIPE, text=True)
        line = self.process.stdout.readline() if self.process.stdout else ""
        if not line.startswith("PORT "):
            self.process.kill()
            raise RuntimeError(f"the benchmark server did not start: {line!r}")
        self.url = f"http://127.0.0.1:{int(line.split()[1])}"

    def close(self) -> None:
        """Stop the server process."""
        self.process.terminate()
        self.process.wait(timeout=10)
        if self.process.stdout is not None:
            self.process.stdout.close()


def run_worker(python: Path, impl: Implementation, cells: list[Measured], server: Server) -> dict[str, Any]:
    """One worker process for ``cells``; its result (see worker.py)."""
    spec = {
        "impl": impl.module,
        "options": impl.options,
        "server": server.url,
        "cells": [c.worker_spec(impl) for c in cells],
    }
    timeout = sum(c.timeout_s for c in cells)
    try:
        done = subprocess.run(
            [str(python), str(WORKER), json.dumps(spec)],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": f"worker ran past {timeout:g} s ({len(cells)} cell(s))"}
    for line in reversed(done.stdout.splitlines()):
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT ") :])  # type: ignore[no-any-return]
    tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
    return {"ok": False, "error": f"worker exited {done.returncode}: {tail[0][:300]}"}


Outcomes = dict[str, dict[str, Outcome]]


class Runner:
    """Runs batches of cells against one server and collects the outcomes."""

    def __init__(self, envs: dict[str, Environment], server: Server, reps: int) -> None:
        self.envs = envs
        self.server = server
        self.reps = reps
        self.outcomes: Outcomes = {}

    def run_batch(self, cells: list[Measured]) -> None:
        """Every implementation of ``cells``, one worker each, ``reps`` times, rotating the order."""
        for cell in cells:
            self.outcomes[cell.key] = {label: Outcome() for impl in cell.impls for label in impl.labels}
        impls = list({impl.label: impl for cell in cells for impl in cell.impls}.values())
        for rep in range(self.reps):
            shift = rep % len(impls)
            for impl in impls[shift:] + impls[:shift]:
                self._run_one(impl, [c for c in cells if impl in c.impls], rep)

    def _run_one(self, impl: Implementation, cells: list[Measured], rep: int) -> None:
        pending = [c for c in cells if self.outcomes[c.key][impl.labels[0]].error is None]
        env = self.envs[impl.env]
        if not pending:
            return
        start = time.perf_counter()
        if env.python is None:
            result: dict[str, Any] = {"ok": False, "error": env.error}
        else:
            result = run_worker(env.python, impl, pending, self.server)
        took = time.perf_counter() - start
        for cell in pending:
            got = result.get("cells", {}).get(cell.key, result) if result.get("ok") else result
            for label in impl.labels:
                measured = got.get("variants", {}).get(label, got) if impl.variants and got.get("ok") else got
                self._record(label, cell, {**result, **measured}, rep, took)

    def _record(self, label: str, cell: Measured, got: dict[str, Any], rep: int, took: float) -> None:
        out = self.outcomes[cell.key][label]
        if not got.get("ok"):
            out.error = str(got.get("error"))
            line = f"FAILED {out.error}"
        else:
            out.results.append({k: v for k, v in got.items() if k != "cells"})
            line = f"{cell.summary(got)} (worker {took:.1f} s)"
        print(f"  {cell.key:13} {label:18} rep {rep + 1}: {line}", file=sys.stderr, flush=True)


def environments(cells: tuple[Measured, ...], install: bool) -> dict[str, Environment]:
    """The main venv plus every peer venv the cells need (installed on first use)."""
    envs = {"main": main_environment()}
    for name in sorted({i.env for c in cells for i in c.impls} - {"main"}):
        envs[name] = ensure_peer(name, install, OUT_DIR / f"install-{name}.log")
    return envs


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line of ``benchmarks/run``."""
    parser = argparse.ArgumentParser(prog="benchmarks/run", description=__doc__)
    parser.add_argument(
        "--quick", action="store_true", help="a smoke run: little work, one worker per library"
    )
    parser.add_argument("--reps", type=int, default=None, help="repetitions per cell (default 3; quick 1)")
    parser.add_argument(
        "--cells",
        default="",
        help="comma-separated cell and probe keys to run (default all); probes: "
        + ", ".join(p.key for p in PROBES),
    )
    parser.add_argument(
        "--probes",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="--probes: only the scale probes (those in --cells, else all); "
        "--no-probes: no scale probes (default: the probes run with the cells)",
    )
    parser.add_argument("--impls", default="", help="comma-separated implementations (default all)")
    parser.add_argument("--no-install", action="store_true", help="do not create missing peer venvs")
    parser.add_argument("--output", type=Path, default=None, help="where to write the markdown")
    return parser.parse_args(argv)


def _wanted(option: str, known: list[str], what: str) -> set[str]:
    wanted = set(option.split(",")) if option else set(known)
    unknown = wanted - set(known)
    if unknown:
        sys.exit(f"unknown {what} {sorted(unknown)!r}; known: {known!r}")
    return wanted


def select_cells(args: argparse.Namespace) -> tuple[Cell, ...]:
    """The cells and implementations the command line asks for (both floors always run)."""
    cells = () if args.probes else quick(FULL_CELLS) if args.quick else FULL_CELLS
    probes = () if args.probes is False else PROBES
    keys = _wanted(args.cells, [c.key for c in cells] + [p.key for p in probes], "cells or probes")
    every = [i.label for c in cells for i in c.impls] + [i.label for p in probes for i in p.impls]
    labels = _wanted(args.impls, list(dict.fromkeys(every)), "implementations")
    labels |= {"floor", "aiohttp floor"}
    picked = (
        replace(c, impls=tuple(i for i in c.impls if i.label in labels)) for c in cells if c.key in keys
    )
    return tuple(c for c in picked if len(c.impls) > 1)


def select_probes(args: argparse.Namespace) -> tuple[Probe, ...]:
    """The scale probes the command line asks for (always advisorchain and the aiohttp floor)."""
    if args.probes is False:
        return ()
    probes = quick_probes(PROBES) if args.quick else PROBES
    return tuple(p for p in probes if not args.cells or p.key in args.cells.split(","))


def default_output(args: argparse.Namespace) -> Path:
    """RESULTS.md for a full run of everything; a quick or partial run never overwrites it."""
    if args.quick:
        return OUT_DIR / "RESULTS-quick.md"
    if args.cells or args.impls or args.reps or args.probes is not None:
        return OUT_DIR / "RESULTS-partial.md"
    return BENCH_DIR / "RESULTS.md"


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; print the markdown report and write it (see ``default_output``)."""
    args = parse_args(argv)
    cells, probes = select_cells(args), select_probes(args)
    reps = args.reps or (1 if args.quick else 3)
    output = args.output or default_output(args)
    envs = environments((*cells, *probes), not args.no_install)
    started = time.time()
    server = Server()
    runner = Runner(envs, server, reps)
    measured: list[Measured] = [*cells, *probes]
    try:
        for batch in [measured] if args.quick and measured else [[c] for c in measured]:
            print("cells " + ", ".join(c.title for c in batch), file=sys.stderr, flush=True)
            runner.run_batch(batch)
    finally:
        server.close()
    markdown = report.render(
        cells,
        runner.outcomes,
        probes=probes,
        reps=reps,
        quick=args.quick,
        seconds=time.time() - started,
        peers=PEER_REQUIREMENTS,
    )
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(markdown)
    print(markdown)
    print(f"written to {output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
