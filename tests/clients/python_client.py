"""Drives `vault mcp` with the official Python MCP SDK (the `mcp` package, pinned in
.ci/requirements.txt). Run by tests/mcp_clients.rs; not a test on its own.

Usage: python_client.py session|auto VAULT_BIN VAULT_DIR

  session  the legacy `ClientSession` over `stdio_client`, with the initialize handshake
  auto     the default high-level `Client` (mode "auto": probes server/discover first)

Each mode lists the tools, calls list_credentials (the SDK validates structuredContent against
the tool's outputSchema; we validate again with jsonschema), http_request with wait_s 0 (pending
with an action_id), get_action on it, and a call with an unknown argument (an isError result
whose text starts with "Error:"). stdout gets one JSON line per result the client saw, then a
summary line; the server's stderr is passed through to ours. Any failed check exits non-zero.
"""

import sys
import time

T0 = time.perf_counter()

import json  # noqa: E402

import anyio  # noqa: E402
import jsonschema  # noqa: E402
from mcp import ClientSession, StdioServerParameters, stdio_client  # noqa: E402
from mcp.client.client import Client  # noqa: E402

IMPORTED = time.perf_counter()


def ms(a: float, b: float) -> float:
    return round((b - a) * 1000, 1)


def emit(kind: str, value) -> None:
    """Everything the client saw goes to stdout, so the Rust side can scan it for secrets."""
    if hasattr(value, "model_dump"):
        value = value.model_dump(mode="json", by_alias=True, exclude_none=True)
    print(json.dumps({"seen": kind, "value": value}), flush=True)


def check(cond: bool, what: str) -> None:
    if not cond:
        raise AssertionError(what)


async def exercise(call, list_tools, timings: dict) -> dict:
    t = time.perf_counter()
    listed = await list_tools()
    timings["list_tools_ms"] = ms(t, time.perf_counter())
    emit("tools/list", listed)
    tools = {tool.name: tool for tool in listed.tools}
    check(
        set(tools)
        == {"list_credentials", "http_request", "ssh_exec", "get_action", "list_recent_actions", "cancel_action"},
        f"unexpected tool names: {sorted(tools)}",
    )
    for tool in tools.values():
        check(tool.output_schema is not None, f"{tool.name} has no outputSchema")
        jsonschema.validators.validator_for(tool.output_schema).check_schema(tool.output_schema)

    def validate(name: str, structured) -> None:
        schema = tools[name].output_schema
        jsonschema.validators.validator_for(schema)(schema).validate(structured)

    # list_credentials: the SDK validated structuredContent already (it raises otherwise).
    t = time.perf_counter()
    creds = await call("list_credentials", {})
    timings["list_credentials_ms"] = ms(t, time.perf_counter())
    emit("list_credentials", creds)
    check(not creds.is_error, f"list_credentials failed: {creds}")
    validate("list_credentials", creds.structured_content)
    names = [c["name"] for c in creds.structured_content["credentials"]]
    check(names == ["api"], f"credentials: {names}")
    check(creds.structured_content["credentials"][0]["kind"] == "http", "api is an http credential")
    check(
        json.loads(creds.content[0].text) == creds.structured_content,
        "the text block carries the same JSON as structuredContent",
    )

    # http_request with wait_s 0: nobody approves, so it comes back pending.
    pending = await call(
        "http_request",
        {"credential": "api", "method": "GET", "url": "https://api.example.com/v1/items", "wait_s": 0},
    )
    emit("http_request", pending)
    check(not pending.is_error, f"http_request failed: {pending}")
    validate("http_request", pending.structured_content)
    check(pending.structured_content["state"] == "pending", f"state: {pending.structured_content}")
    action_id = pending.structured_content["action_id"]
    check(action_id.startswith("act_"), f"action_id: {action_id}")

    got = await call("get_action", {"action_id": action_id})
    emit("get_action", got)
    check(not got.is_error, f"get_action failed: {got}")
    validate("get_action", got.structured_content)
    check(got.structured_content["action_id"] == action_id, "get_action returns the same action")
    check(got.structured_content["state"] == "pending", f"state: {got.structured_content['state']}")

    # An unknown argument: a tool error result, not a protocol error.
    bad = await call("list_credentials", {"bogus_argument": 1})
    emit("unknown_argument", bad)
    check(bad.is_error is True, f"unknown argument must be an isError result: {bad}")
    text = bad.content[0].text
    check(text.startswith("Error:"), f"error text: {text!r}")
    check("bogus_argument" in text, f"the error names the argument: {text!r}")
    validate("list_credentials", bad.structured_content)
    check(bad.structured_content["error"]["code"] == "invalid_argument", f"{bad.structured_content}")
    return {"action_id": action_id}


async def run_session(bin_path: str, vault_dir: str) -> dict:
    params = StdioServerParameters(
        command=bin_path, args=["mcp"], env={"VAULT_DIR": vault_dir, "VAULT_KEYRING": "kernel"}
    )
    timings: dict = {}
    t = time.perf_counter()
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            timings["connect_ms"] = ms(t, time.perf_counter())
            emit("initialize", init)
            check(init.server_info.name == "agent-vault", f"server: {init.server_info}")
            check(init.protocol_version.startswith("20"), f"version: {init.protocol_version}")
            out = await exercise(
                lambda n, a: session.call_tool(n, a), lambda: session.list_tools(), timings
            )
            out["protocol_version"] = init.protocol_version
    return out | timings


async def run_auto(bin_path: str, vault_dir: str) -> dict:
    params = StdioServerParameters(
        command=bin_path, args=["mcp"], env={"VAULT_DIR": vault_dir, "VAULT_KEYRING": "kernel"}
    )
    timings: dict = {}
    t = time.perf_counter()
    async with Client(params) as client:  # mode="auto" is the default
        check(client.mode == "auto", f"mode: {client.mode}")
        timings["connect_ms"] = ms(t, time.perf_counter())
        emit("connected", {"protocol_version": client.protocol_version})
        out = await exercise(
            lambda n, a: client.call_tool(n, a), lambda: client.list_tools(), timings
        )
        out["protocol_version"] = client.protocol_version
    return out | timings


async def bounded(runner, *args) -> dict:
    with anyio.fail_after(30):
        return await runner(*args)


def main() -> None:
    mode, bin_path, vault_dir = sys.argv[1:4]
    runner = {"session": run_session, "auto": run_auto}[mode]
    t = time.perf_counter()
    out = anyio.run(bounded, runner, bin_path, vault_dir)
    out["run_ms"] = ms(t, time.perf_counter())
    out["import_ms"] = ms(T0, IMPORTED)
    out["client"] = f"python-{mode}"
    print(json.dumps({"summary": out}), flush=True)


if __name__ == "__main__":
    main()
