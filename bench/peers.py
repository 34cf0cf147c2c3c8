"""The same cycle in-process with the peers: the reference ``toolnexus`` runtime and LangGraph.

A cycle is the daemon's: start a fresh agent, run it until the one tool
suspends for approval, answer ok, run it to ``done`` with the tool's output.
Both peers use the reference mock model (call the first tool, then answer with
the tool's output) in-process, so model time is near zero, and run
single-threaded (one cycle at a time, one event loop / the calling thread).

* reference ``toolnexus`` (PyPI): ``toolnexus.agents.AgentRuntime`` with an
  in-process mock ``HttpTransport``; ``spawn``/``wake``/``wait`` → ``pending``,
  ``resume(Answer)`` → ``done``. Everything lives in memory (its conversation
  store is in-memory; nothing is durable). Its resume replays the suspended
  turn from its start (the model is asked again), as that library specifies.
* LangGraph: a two-node agent graph (model node, tool node whose tool calls
  ``interrupt()``), compiled with ``SqliteSaver`` on a file (durable: WAL,
  ``synchronous`` as sqlite3 opens it) or the in-memory saver; a cycle is a
  new ``thread_id``, ``invoke`` → ``__interrupt__``, ``invoke(Command(resume=...))``.
"""

from __future__ import annotations

import asyncio
import itertools
import operator
import sqlite3
import statistics
import threading
import time
import uuid
from pathlib import Path
from typing import Annotated, Any, TypedDict

PROMPT = "please perform the secret action"
TOOL = "secret_action"


def mock_model(messages: list[dict[str, Any]], has_tools: bool = True) -> dict[str, Any]:
    """The reference mock model: the assistant message it answers with."""
    for m in messages:
        if m.get("role") == "tool":
            return {"role": "assistant", "content": str(m.get("content") or "")}
    if has_tools:
        return {"role": "assistant", "content": None,
                "tool_calls": [{"id": "call_1", "type": "function",
                                "function": {"name": TOOL, "arguments": "{}"}}]}
    return {"role": "assistant", "content": "ok"}


# ------------------------------------------------------------------ reference toolnexus


class MockTransport:
    """The reference library's ``HttpTransport`` seam served in-process (no socket, no HTTP)."""

    def post(self, url: str, headers: dict[str, str], payload: dict[str, Any],
             timeout: float) -> dict[str, Any]:
        message = mock_model(payload.get("messages") or [], bool(payload.get("tools")))
        done = not message.get("tool_calls")
        usage = (2, 1, 3) if done else (3, 2, 5)
        return {"id": "chatcmpl-bench", "object": "chat.completion", "model": payload.get("model"),
                "choices": [{"index": 0, "message": message,
                             "finish_reason": "stop" if done else "tool_calls"}],
                "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1],
                          "total_tokens": usage[2]}}

    def open(self, url: str, headers: dict[str, str], payload: dict[str, Any], timeout: float):  # noqa: A003
        raise NotImplementedError("the benchmark model does not stream")


class Reference:
    """One reference ``AgentRuntime`` with the operator agent."""

    def __init__(self) -> None:
        from toolnexus.agents import AgentDef, AgentRuntime
        from toolnexus.types import Tool, ToolResult, pending

        ids = itertools.count(1)

        async def secret_action(args: dict[str, Any] | None = None, ctx: Any = None) -> ToolResult:
            if ctx is not None and getattr(ctx, "answer", None) is not None:
                return ToolResult(output="action performed", is_error=False)
            return pending(kind="approval", prompt="approve?", id=f"approve:{next(ids)}")

        tool = Tool(name=TOOL, description="an action that needs approval",
                    input_schema={"type": "object", "properties": {}}, source="native", execute=secret_action)
        self.agents = {"operator": AgentDef(name="operator",
                                            description="performs actions that need authorization",
                                            system_prompt="", model="inherit", tools=[tool])}
        self.rt = AgentRuntime(registry=self.agents, transport=MockTransport(),
                               llm={"base_url": "http://mock.invalid", "style": "openai", "model": "bench"})

    async def cycle(self) -> None:
        from toolnexus.types import Answer

        rt = self.rt
        h = rt.spawn(rt.root, "operator")
        rt.wake(h, PROMPT)
        r = await rt.wait(h)
        if r.status != "pending" or r.pending is None:
            raise RuntimeError(f"reference: expected pending, got {r.status}: {r.text}")
        out = await rt.resume(Answer(id=r.pending.id, ok=True))
        if out.status != "done" or out.text != "action performed":
            raise RuntimeError(f"reference: expected done, got {out.status}: {out.text}")

    def park_idle(self, n: int) -> None:
        """Add ``n`` handles before the measured ones (see README: its resume answers the first
        suspended handle in tree order, so parked handles it must walk past are idle ones)."""
        for _ in range(n):
            self.rt.spawn(self.rt.root, "operator")

    def count(self) -> int:
        return len(self.rt.root.children)


async def reference_cycles(n: int, ref: Reference | None = None) -> list[float]:
    ref = ref or Reference()
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        await ref.cycle()
        out.append(time.perf_counter() - t0)
    return out


# ------------------------------------------------------------------ LangGraph


class _State(TypedDict):
    messages: Annotated[list[dict[str, Any]], operator.add]


def build_graph(checkpointer: Any) -> Any:
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import interrupt

    def agent(state: _State) -> dict[str, Any]:
        return {"messages": [mock_model(state["messages"])]}

    def route(state: _State) -> str:
        return "tools" if state["messages"][-1].get("tool_calls") else END

    def tools(state: _State) -> dict[str, Any]:
        out = []
        for call in state["messages"][-1]["tool_calls"]:
            answer = interrupt({"kind": "approval", "prompt": "approve?"})
            content = "action performed" if answer.get("ok") else "declined/expired: approve?"
            out.append({"role": "tool", "tool_call_id": call["id"], "content": content})
        return {"messages": out}

    g = StateGraph(_State)
    g.add_node("agent", agent)
    g.add_node("tools", tools)
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", route, ["tools", END])
    g.add_edge("tools", "agent")
    return g.compile(checkpointer=checkpointer)


class LangGraph:
    """The graph with a SqliteSaver on ``path`` (durable) or, without a path, the in-memory saver."""

    def __init__(self, path: Path | None = None) -> None:
        if path is None:
            from langgraph.checkpoint.memory import InMemorySaver

            self.saver: Any = InMemorySaver()
            self.conn = None
        else:
            from langgraph.checkpoint.sqlite import SqliteSaver

            self.conn = sqlite3.connect(str(path), check_same_thread=False)
            self.saver = SqliteSaver(self.conn)
            self.saver.setup()
        self.graph = build_graph(self.saver)

    def pragmas(self) -> dict[str, Any]:
        if self.conn is None:
            return {}
        return {"journal_mode": self.conn.execute("PRAGMA journal_mode").fetchone()[0],
                "synchronous": self.conn.execute("PRAGMA synchronous").fetchone()[0]}

    def cycle(self, durability: str | None = None) -> None:
        from langgraph.types import Command

        config = {"configurable": {"thread_id": uuid.uuid4().hex}}
        out = self.graph.invoke({"messages": [{"role": "user", "content": PROMPT}]}, config,
                                durability=durability)
        if not out.get("__interrupt__"):
            raise RuntimeError(f"langgraph: expected an interrupt, got {list(out)}")
        done = self.graph.invoke(Command(resume={"ok": True}), config, durability=durability)
        last = done["messages"][-1]
        if last.get("content") != "action performed":
            raise RuntimeError(f"langgraph: expected 'action performed', got {last}")

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()


class LangGraphPg(LangGraph):
    """The graph with LangGraph's ``PostgresSaver`` on the database of ``dsn`` (tables made by ``setup``)."""

    def __init__(self, dsn: str) -> None:  # noqa: D107 (the parent's in-memory/SQLite set-up is not wanted)
        import psycopg
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg.rows import dict_row

        self.pg = psycopg.connect(dsn, autocommit=True, prepare_threshold=0, row_factory=dict_row)
        self.conn = None
        self.saver = PostgresSaver(self.pg)
        self.saver.setup()
        self.graph = build_graph(self.saver)

    def pragmas(self) -> dict[str, Any]:
        row = self.pg.execute("SHOW synchronous_commit").fetchone()
        return {"synchronous_commit": row["synchronous_commit"] if row else "?", "autocommit": True}

    def close(self) -> None:
        self.pg.close()


def langgraph_cycles(n: int, lg: LangGraph, durability: str | None = None) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        lg.cycle(durability)
        out.append(time.perf_counter() - t0)
    return out


def langgraph_threaded(lanes: list[LangGraph], total: int, durability: str | None = None) -> float:
    """``total`` cycles on one thread per lane (each cycle its own ``thread_id``); returns the elapsed
    seconds. A lane is a compiled graph with a saver and a connection of its own: both savers hold a
    lock around every database operation (``SqliteSaver.cursor``, ``PostgresSaver._cursor``, even
    with a connection pool), so threads sharing one saver take turns at the database; with a saver
    each they share only the GIL (released during fsyncs and PostgreSQL round trips) and the
    database's own locking (SQLite: one writer at a time, WAL)."""
    counter = itertools.count()
    errors: list[BaseException] = []

    def lane(lg: LangGraph) -> None:
        try:
            while next(counter) < total:
                lg.cycle(durability)
        except BaseException as exc:  # noqa: BLE001 (re-raised on the calling thread below)
            errors.append(exc)

    workers = [threading.Thread(target=lane, args=(lg,), name=f"langgraph-{i}") for i, lg in enumerate(lanes)]
    t0 = time.perf_counter()
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    elapsed = time.perf_counter() - t0
    if errors:
        raise RuntimeError(f"langgraph with {len(lanes)} threads failed: {errors[0]!r}") from errors[0]
    return elapsed


def alternate(modes: tuple[str, ...], rep: int) -> tuple[str, ...]:
    """The order of ``modes`` in repetition ``rep``: forwards, then backwards, so neither is always first."""
    return modes if rep % 2 == 0 else modes[::-1]


# LangGraph's default durability, then a checkpoint written before each step returns
MODES = ("async", "sync")


def measure_modes(lg: LangGraph, *, warmup: int, reps: int, cycles: int,
                  lanes: list[LangGraph] | None = None, concurrent_cycles: int = 0) -> dict[str, Any]:
    """LangGraph in both durability modes, repetitions alternating between them (async, sync, then
    sync, async…) so a slow-disk window falls on both: per mode the single-threaded latency (ms, the
    median of each repetition's median) and 1 / that median as cycles/s; with ``lanes`` the rate of
    one thread per lane, ``concurrent_cycles`` cycles per repetition. The peer's throughput is the
    better of the two (``best_cycles_per_s``, ``best_of``)."""
    from .common import summary

    threads = len(lanes or [])
    for mode in MODES:
        langgraph_cycles(warmup, lg, mode)
        if lanes:
            langgraph_threaded(lanes, threads * 2, mode)
    lat: dict[str, list[float]] = {m: [] for m in MODES}
    rates: dict[str, list[float]] = {m: [] for m in MODES}
    for rep in range(reps):
        for mode in alternate(MODES, rep):
            lat[mode].append(statistics.median(langgraph_cycles(cycles, lg, mode)))
            if lanes:
                rates[mode].append(concurrent_cycles / langgraph_threaded(lanes, concurrent_cycles, mode))
    out: dict[str, Any] = {}
    for mode in MODES:
        fig: dict[str, Any] = {"latency_ms": summary(lat[mode], 1e3), "durability": mode}
        fig["cycles_per_s"] = round(1e3 / fig["latency_ms"]["median"], 1)
        fig["best_cycles_per_s"], fig["best_of"] = fig["cycles_per_s"], "1 thread, 1 / median cycle"
        if lanes:
            rate = summary(rates[mode], 1.0, 1)
            fig[f"threads_{threads}"] = {"cycles_per_s": rate, "threads": threads,
                                         "how": "one thread per lane, a saver and a connection each"}
            if rate["median"] > fig["cycles_per_s"]:
                fig["best_cycles_per_s"], fig["best_of"] = rate["median"], f"{threads} threads"
        out[mode] = fig
    return out


if __name__ == "__main__":  # a quick look: python -m bench.peers
    import tempfile

    ref_times = asyncio.run(reference_cycles(200))
    print("reference ms", round(statistics.median(ref_times[20:]) * 1e3, 3))
    d = Path(tempfile.mkdtemp())
    for lg in (LangGraph(d / "lg.sqlite"), LangGraph(None)):
        times = langgraph_cycles(200, lg)
        print("langgraph", lg.pragmas() or "memory", "ms", round(statistics.median(times[20:]) * 1e3, 3))
        lg.close()
