"""Drives `troupe mcp serve --http` with the official MCP Python SDK (PyPI `mcp`).

Usage: http_client.py URL [TOKEN]

Prints one JSON object per line; the Rust test (tests/all/mcp.rs) asserts on them. A
failure prints {"event": "error", ...} and exits 1.
"""

import asyncio
import json
import sys
import traceback

from mcp import ClientSession
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client


def emit(event, **fields):
    print(json.dumps({"event": event, **fields}), flush=True)


async def main(url, token):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with create_mcp_http_client(headers=headers) as http:
        async with streamable_http_client(url, http_client=http) as streams:
            read, write = streams[0], streams[1]
            async with ClientSession(read, write) as session:
                info = await session.initialize()
                emit("initialized", server=info.server_info.name)
                listed = await session.list_tools()
                emit("tools", names=[t.name for t in listed.tools])
                result = await session.call_tool("echo", {"prompt": "ping over HTTP"})
                texts = [c.text for c in result.content if getattr(c, "type", "") == "text"]
                schema = next(t.output_schema for t in listed.tools if t.name == "echo")
                emit(
                    "call",
                    is_error=bool(result.is_error),
                    text="\n".join(texts),
                    structured=result.structured_content,
                    output_schema=schema,
                )


if __name__ == "__main__":
    try:
        asyncio.run(main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None))
    except BaseException as e:  # the test shows what went wrong
        emit("error", type=type(e).__name__, message=str(e), trace=traceback.format_exc())
        sys.exit(1)
