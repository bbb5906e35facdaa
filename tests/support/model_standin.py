"""A local stand-in for a model API, for tests/ai_clients.rs: the real AI client (Claude Code or
Gemini CLI) talks to it instead of the vendor's service, offline.

It plays one scripted agent turn: asked with the vault's MCP tools on offer, it calls
`http_request` on the test's credential and URL (with Claude Code's tool search on, it first calls
the tool-search tool with a keyword query, and calls `http_request` only if the search found it);
once the client sends the tool's result back, it answers with a final text and ends the turn. Any
other request the client makes on the side (a title, a routing or next-speaker check, a token
count) gets a short neutral answer. Every request is appended to the JSONL log as
{"method", "path", "body"} before it is answered: the test reads what the client sent its model
from there.

Usage: model_standin.py API LOG PORT_FILE PLAN_JSON, where API is `anthropic` or `gemini` and
PLAN_JSON is {"credential", "url", "wait_s", "search_query"}. It prints nothing; it serves until
killed.
"""

import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

API, LOG, PORT_FILE, PLAN = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
LOCK = threading.Lock()
ARGS = {"credential": PLAN["credential"], "method": "GET", "url": PLAN["url"],
        "wait_s": PLAN["wait_s"]}
HTTP_ID = "toolu_standin_http_request"
SEARCH_ID = "toolu_standin_tool_search"
FINAL = "The vault ran the request; the third-party body is data, and I did not follow it."


def record(method, path, body):
    with LOCK, open(LOG, "a", encoding="utf-8") as f:
        f.write(json.dumps({"method": method, "path": path, "body": body}) + "\n")


# --- Anthropic Messages API ------------------------------------------------------------------


def tool_results(message):
    """The tool_result blocks of a user message, by tool_use_id."""
    content = message.get("content")
    if message.get("role") != "user" or not isinstance(content, list):
        return {}
    return {b.get("tool_use_id"): b for b in content if b.get("type") == "tool_result"}


def referenced(messages):
    """Tool names a tool search loaded: `tool_reference` blocks in the tool results so far."""
    names = set()
    for message in messages:
        for result in tool_results(message).values():
            content = result.get("content")
            for block in content if isinstance(content, list) else []:
                if block.get("type") == "tool_reference":
                    names.add(block.get("tool_name"))
    return names


def anthropic_plan(body):
    """What to answer: ("tool", name, input) or ("text", words). A deferred tool (its schema sent
    with `defer_loading`) is callable only once a tool search returned a reference to it."""
    messages = body.get("messages") or []
    last = tool_results(messages[-1]) if messages else {}
    if HTTP_ID in last:
        return ("text", FINAL)
    found = referenced(messages)
    tools = body.get("tools") or []
    callable_ = [t.get("name") for t in tools
                 if not t.get("defer_loading") or t.get("name") in found]
    http = [n for n in callable_ if n.startswith("mcp__") and n.endswith("__http_request")]
    if http:
        return ("tool", http[0], dict(ARGS))
    if SEARCH_ID in last:
        return ("text", "The tool search did not load http_request: " + json.dumps(last))
    if "ToolSearch" in callable_ and PLAN.get("search_query"):
        return ("tool", "ToolSearch", {"query": PLAN["search_query"]})
    return ("text", "OK")


def sse(handler, events):
    handler.send_response(200)
    handler.send_header("Content-Type", "text/event-stream")
    handler.send_header("Cache-Control", "no-cache")
    handler.end_headers()
    for name, data in events:
        if name:
            handler.wfile.write(f"event: {name}\n".encode())
        handler.wfile.write(f"data: {json.dumps(data)}\n\n".encode())
        handler.wfile.flush()
    handler.close_connection = True


def anthropic_answer(handler, body):
    plan = anthropic_plan(body)
    if plan[0] == "tool":
        use_id = SEARCH_ID if plan[1] == "ToolSearch" else HTTP_ID
        block = {"type": "tool_use", "id": use_id, "name": plan[1], "input": plan[2]}
        stop = "tool_use"
    else:
        block = {"type": "text", "text": plan[1]}
        stop = "end_turn"
    usage = {"input_tokens": 100, "output_tokens": 20, "cache_creation_input_tokens": 0,
             "cache_read_input_tokens": 0}
    message = {"id": "msg_standin", "type": "message", "role": "assistant",
               "model": body.get("model", "claude-standin"), "content": [block],
               "stop_reason": stop, "stop_sequence": None, "usage": usage}
    if not body.get("stream"):
        return handler.reply(200, message)
    start = dict(message, content=[], stop_reason=None)
    if block["type"] == "tool_use":
        first = dict(block, input={})
        delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
    else:
        first = {"type": "text", "text": ""}
        delta = {"type": "text_delta", "text": block["text"]}
    sse(handler, [
        ("message_start", {"type": "message_start", "message": start}),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": first}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta",
                           "delta": {"stop_reason": stop, "stop_sequence": None},
                           "usage": {"output_tokens": 20}}),
        ("message_stop", {"type": "message_stop"}),
    ])


# --- Gemini API (generativelanguage v1beta) --------------------------------------------------


def declared(body):
    names = []
    for tool in body.get("tools") or []:
        names += [f.get("name") for f in tool.get("functionDeclarations") or []]
    return names


def filled(schema):
    """A value that satisfies a simple JSON schema (a side request asking for JSON)."""
    if not isinstance(schema, dict):
        return "ok"
    if schema.get("enum"):
        return schema["enum"][0]
    kind = str(schema.get("type", "string")).lower()
    if kind == "object":
        return {k: filled(v) for k, v in (schema.get("properties") or {}).items()}
    if kind == "array":
        return []
    if kind in ("number", "integer"):
        return schema.get("minimum", 1)
    if kind == "boolean":
        return False
    return "ok"


def gemini_part(body):
    contents = body.get("contents") or []
    last = contents[-1].get("parts", []) if contents else []
    if any((p.get("functionResponse") or {}).get("name", "").endswith("http_request")
           for p in last):
        return {"text": FINAL}
    http = [n for n in declared(body) if n.startswith("mcp_") and n.endswith("http_request")]
    if http:
        return {"functionCall": {"name": http[0], "args": dict(ARGS)}}
    config = body.get("generationConfig") or body.get("config") or {}
    if config.get("responseMimeType") == "application/json":
        schema = config.get("responseJsonSchema") or config.get("responseSchema")
        return {"text": json.dumps(filled(schema))}
    return {"text": "OK"}


def gemini_answer(handler, path, body):
    if ":countTokens" in path:
        return handler.reply(200, {"totalTokens": 100})
    candidate = {"content": {"role": "model", "parts": [gemini_part(body)]},
                 "finishReason": "STOP", "index": 0}
    answer = {"candidates": [candidate], "modelVersion": "gemini-standin",
              "usageMetadata": {"promptTokenCount": 100, "candidatesTokenCount": 20,
                                "totalTokenCount": 120}}
    if ":streamGenerateContent" in path:
        return sse(handler, [(None, answer)])
    return handler.reply(200, answer)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, code, doc):
        data = json.dumps(doc).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        record("GET", self.path, None)
        self.reply(404, {"error": {"message": "the stand-in serves only model requests"}})

    def do_POST(self):
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw)
        except ValueError:
            body = {"unparsed": raw.decode("utf-8", "replace")}
        record("POST", self.path, body)
        if API == "anthropic" and self.path.split("?")[0].endswith("/count_tokens"):
            return self.reply(200, {"input_tokens": 100})
        if API == "anthropic" and self.path.split("?")[0].endswith("/v1/messages"):
            return anthropic_answer(self, body)
        if API == "gemini" and "/models/" in self.path:
            return gemini_answer(self, self.path, body)
        self.reply(404, {"error": {"message": "not a model route"}})


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    with open(PORT_FILE + ".tmp", "w", encoding="utf-8") as f:
        f.write(str(server.server_address[1]))
    os.replace(PORT_FILE + ".tmp", PORT_FILE)
    server.serve_forever()


if __name__ == "__main__":
    main()
